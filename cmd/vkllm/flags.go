package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/peterbourgon/ff/v4"
	"github.com/peterbourgon/ff/v4/ffhelp"
)

// envPrefix is the prefix of the environment variables that set serve's
// flags: --ctx-size is VKLLM_CTX_SIZE.
const envPrefix = "VKLLM"

// newFlagSet returns the flag set of "vkllm name". Flags are GNU style
// (--name value, --name=value, -x value), parsed by ff.
func newFlagSet(name string) *ff.FlagSet { return ff.NewFlagSet("vkllm " + name) }

// parseFlags parses args into fs. With env, every flag the command line
// leaves out is taken from its VKLLM_* variable when that is set, and a
// value that does not parse is an error naming the variable, like a bad
// flag. A single dash before a long name (-port 8080) is read as two, as
// Go's flag package did. --help prints the flags and returns flag.ErrHelp.
func parseFlags(fs *ff.FlagSet, args []string, env bool, usage ...string) error {
	var opts []ff.Option
	if env {
		opts = append(opts, ff.WithEnvVarPrefix(envPrefix))
	}
	args, err := rewriteLlama(fs, doubleDashLong(fs, args))
	if err != nil {
		return err
	}
	err = ff.Parse(fs, args, opts...)
	if errors.Is(err, ff.ErrHelp) {
		if env {
			usage = append(usage, "", "Each flag can also be set by its environment variable: --ctx-size by "+envPrefix+"_CTX_SIZE, and so on;",
				"the command line wins. A value that does not parse is an error, never a silent default.")
		}
		// Backticks mark placeholders in the usage texts; ffhelp shows them.
		fmt.Fprint(os.Stdout, strings.ReplaceAll(ffhelp.Flags(fs, usage...).String(), "`", ""))
		return flag.ErrHelp
	}
	if err != nil {
		return errors.New(strings.TrimPrefix(strings.TrimPrefix(err.Error(), "parse args: "), "parse environment: "))
	}
	return nil
}

// doubleDashLong rewrites "-name" and "-name=value" to "--name..." for the
// long flags of fs, up to a "--".
func doubleDashLong(fs *ff.FlagSet, args []string) []string {
	long := map[string]bool{"help": true}
	fs.WalkFlags(func(f ff.Flag) error {
		if n, ok := f.GetLongName(); ok && len(n) > 1 {
			long[n] = true
		}
		return nil
	})
	out := make([]string, len(args))
	copy(out, args)
	for i, a := range out {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if long[name] {
			out[i] = "-" + a
		}
	}
	return out
}
