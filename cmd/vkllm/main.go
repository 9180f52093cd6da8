// Command vkllm is a local LLM inference server whose math runs in Vulkan
// compute shaders. Run "vkllm help" for the sub-commands.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/vkllm/vkllm/api"
)

type command struct {
	name, summary string
	run           func(args []string) error
}

func commands() []command {
	return []command{
		{"serve", "serve the HTTP API (completions, chat, embeddings, rerank, tokenize)", cmdServe},
		{"run", "generate a continuation of a prompt", cmdRun},
		{"pull", "download a model from a Hugging Face hub into the store (owner/repo[:quant])", cmdPull},
		{"list", "list the models in the store", cmdList},
		{"rm", "remove models from the store", cmdRm},
		{"perplexity", "measure perplexity over a text file", cmdPerplexity},
		{"bench", "measure prompt processing and generation speed", cmdBench},
		{"tokenize", "print the token ids of a text (metadata only, no GPU)", cmdTokenize},
		{"devices", "list the Vulkan devices and the features vkllm uses", cmdDevices},
		{"health", "ask a running server's /health: exit 0 once its model is ready (the image's HEALTHCHECK)", cmdHealth},
		{"version", "print the version and the built-in features", cmdVersion},
	}
}

const version = "0.1.0-dev"

// cmdVersion prints the version and the build's features.
func cmdVersion(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments %q", args)
	}
	printVersion(os.Stdout)
	return nil
}

// printVersion writes the version, the Go toolchain and platform, and the
// features built in (as /props lists them).
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "vkllm %s (%s, %s/%s)\nfeatures: %s\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH,
		strings.Join(api.Features(), " "))
}

func usage(w *os.File) {
	fmt.Fprintln(w, "usage: vkllm <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'vkllm <command> --help' for a command's flags; 'vkllm --version' prints the version.")
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "help" || name == "-h" || name == "--help" {
		usage(os.Stdout)
		return
	}
	if name == "--version" || name == "-version" || name == "-v" {
		printVersion(os.Stdout)
		return
	}
	for _, c := range commands() {
		if c.name == name {
			err := c.run(os.Args[2:])
			if errors.Is(err, flag.ErrHelp) {
				return
			}
			var logged loggedError
			if errors.As(err, &logged) {
				os.Exit(1)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "vkllm %s: %v\n", name, err)
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "vkllm: unknown command %q\n\n", name)
	usage(os.Stderr)
	os.Exit(2)
}
