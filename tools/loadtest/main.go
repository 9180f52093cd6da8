// Command loadtest drives a running vkllm (or any OpenAI-compatible) server
// with concurrent streaming completions and prints aggregate tokens/s,
// requests/s, time to first token and inter-token latency:
//
//	go run ./tools/loadtest -url http://127.0.0.1:8080 -c 8 -r 32 -n 64 -prompt-words 50
//
// Tokens are counted as stream chunks with non-empty text (see Result).
// With -inject-prompt-words K -inject-after D one extra request with a
// K-word prompt arrives D after the start, and the inter-token latency of
// the other streams until its first token (its prefill, and its wait in
// the server's queue) is reported on its own line. Every
// run ends by itself: after -r requests or -timeout, whichever comes first.
// It talks to the -url server only.
//
// With -sweep N it sends prompts of exactly 1..N tokens one at a time
// instead (-sweep-passes times) and reports each pass's slowest request
// and the worst ratio of a first-pass time to the last pass's time of the
// same length: on a server that has just turned ready, whether any prompt
// length still pays for a compile.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

// errFailed is returned when some requests failed (after the report).
var errFailed = errors.New("some requests failed")

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	var cfg Config
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8080", "server base `URL`")
	fs.BoolVar(&cfg.Chat, "chat", false, "use /v1/chat/completions (one user message) instead of /v1/completions")
	fs.StringVar(&cfg.Model, "model", "", "send this \"model\" in each request (default: none)")
	fs.IntVar(&cfg.Concurrency, "c", 4, "concurrent streams")
	fs.IntVar(&cfg.Requests, "r", 16, "ordinary requests in all")
	fs.IntVar(&cfg.MaxTokens, "n", 64, "max_tokens of each request")
	fs.StringVar(&cfg.Prompt, "prompt", "Once upon a time", "prompt `text` of every request (unless -prompt-words)")
	fs.IntVar(&cfg.PromptWords, "prompt-words", 0, "give request i its own prompt of `K` words (deterministic, seeded by i)")
	fs.IntVar(&cfg.PrefixWords, "prefix-words", 0, "put one shared prompt of `K` words (a system prompt) before every request's prompt")
	fs.Float64Var(&cfg.Temperature, "temp", 0, "temperature")
	fs.StringVar(&cfg.APIKey, "api-key", os.Getenv("VKLLM_API_KEY"), "send `key` as a Bearer token ($VKLLM_API_KEY)")
	fs.DurationVar(&cfg.Timeout, "timeout", 5*time.Minute, "stop the whole run after this long")
	fs.IntVar(&cfg.InjectWords, "inject-prompt-words", 0, "send one extra request with a prompt of `K` words during the run")
	fs.DurationVar(&cfg.InjectAfter, "inject-after", 2*time.Second, "when the extra request is sent, from the start")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "vary the prompts of -prompt-words and -inject-prompt-words with `S`, so that a run misses the previous runs' prompts in the server's prompt cache")
	sweepTokens := fs.Int("sweep", 0, "instead of the load run, send prompts of exactly 1..`N` tokens one at a time (max_tokens 1) and report each pass's slowest request")
	sweepPasses := fs.Int("sweep-passes", 2, "how many times -sweep runs; the worst ratio compares the first pass with the last")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *sweepTokens != 0 {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		res, err := Sweep(ctx, SweepConfig{URL: cfg.URL, MaxTokens: *sweepTokens, Passes: *sweepPasses, Model: cfg.Model, APIKey: cfg.APIKey})
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		}
		writeSweep(w, &res)
		return nil
	}
	if cfg.Timeout <= 0 {
		return fmt.Errorf("-timeout %v: want a positive duration", cfg.Timeout)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := Run(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		writeText(w, &cfg, &res)
	}
	if res.Errors > 0 || res.NotStarted > 0 || (res.Inject != nil && res.Inject.Error != "") {
		return errFailed
	}
	return nil
}

// writeText prints res for people.
func writeText(w io.Writer, cfg *Config, res *Result) {
	prompt := fmt.Sprintf("prompt %q", cfg.Prompt)
	if cfg.PromptWords > 0 {
		prompt = fmt.Sprintf("prompts of %d words", cfg.PromptWords)
	}
	if cfg.PrefixWords > 0 {
		prompt += fmt.Sprintf(" after a shared prefix of %d words", cfg.PrefixWords)
	}
	fmt.Fprintf(w, "%s: %d requests, %d concurrent, max_tokens %d, %s\n", res.URL, res.Requests, res.Concurrency, res.MaxTokens, prompt)
	fmt.Fprintf(w, "completed     %d in %.2f s, %d errors, %d not started", res.Completed, res.Elapsed, res.Errors, res.NotStarted)
	if res.TimedOut {
		fmt.Fprintf(w, " (stopped by -timeout)")
	}
	fmt.Fprintln(w)
	for _, e := range res.ErrorSamples {
		fmt.Fprintf(w, "  error: %s\n", e)
	}
	fmt.Fprintf(w, "tokens        %d content chunks (server usage: %d tokens), %.2f tokens/s, %.2f requests/s\n",
		res.Tokens, res.UsageTokens, res.TokensPerSec, res.RequestsPerSec)
	writeLatency(w, "TTFT", res.TTFT, "streams")
	writeLatency(w, "ITL", res.ITL, "gaps")
	if in := res.Inject; in != nil {
		if !in.Sent {
			fmt.Fprintf(w, "injected      %d-word prompt not sent: the ordinary requests ended first\n", in.PromptWords)
			return
		}
		fmt.Fprintf(w, "injected      %d-word prompt sent at %.2f s: TTFT %.1f ms, %d content chunks", in.PromptWords, in.At, in.TTFT, in.Tokens)
		if in.Error != "" {
			fmt.Fprintf(w, ", error: %s", in.Error)
		}
		fmt.Fprintln(w)
		writeLatency(w, "ITL meanwhile", in.ITLUntilFirstToken, "gaps of the ordinary streams from sending it to its first token")
	}
}

func writeLatency(w io.Writer, name string, l Latency, of string) {
	fmt.Fprintf(w, "%-13s p50 %8.1f ms  p99 %8.1f ms  max %8.1f ms  (%d %s)\n", name, l.P50, l.P99, l.Max, l.Count, of)
}
