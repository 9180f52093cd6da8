package main

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/peterbourgon/ff/v4"
)

// llama-server's flag names (issue 32 item 5). Where the meaning matches,
// a llama-server command line starts vkllm as it is: its short spellings
// are aliases of vkllm's flags, and the flags that have no effect here
// (all layers always run on the device) are accepted and said so once in
// the log. A flag neither knows is an error naming it and, where there is
// one, the vkllm flag that does the job.

// llamaAliases maps llama-server's spellings to the vkllm flag of the
// same meaning. parseFlags rewrites them when fs has that flag.
var llamaAliases = map[string]string{
	"np":         "parallel",
	"ngl":        "n-gpu-layers",
	"gpu-layers": "n-gpu-layers",
	"fa":         "flash-attn",
	"alias":      "model-alias",
	"embeddings": "embedding",
	"rerank":     "reranking",
	"b":          "batch-size",
	"ctk":        "cache-type-k",
	"ctv":        "cache-type-v",
	"hf":         "hf-repo",
	"hff":        "hf-file",
	"hft":        "hf-token",
}

// llamaEquivalents names, for llama-server flags vkllm does not take, the
// vkllm flag or behaviour that does their job ("" when there is none).
var llamaEquivalents = map[string]string{
	"ub":                   "--batch-size",
	"ubatch-size":          "--batch-size",
	"dev":                  "--device",
	"mg":                   "--device",
	"main-gpu":             "--device",
	"to":                   "--timeout",
	"mm":                   "--mmproj",
	"cb":                   "continuous batching is always on",
	"cont-batching":        "continuous batching is always on",
	"no-cont-batching":     "",
	"cache-prompt":         "prompt caching is always on",
	"cache-reuse":          "cached prefixes are always reused",
	"context-shift":        "",
	"no-context-shift":     "the context never shifts: a prompt over it is a 400",
	"list-devices":         "vkllm devices",
	"s":                    "seed in the request",
	"mu":                   "",
	"model-url":            "",
	"tb":                   "",
	"threads-batch":        "",
	"threads-http":         "",
	"mlock":                "",
	"no-mmap":              "",
	"sm":                   "",
	"split-mode":           "",
	"ts":                   "",
	"tensor-split":         "",
	"nkvo":                 "",
	"no-kv-offload":        "",
	"ns":                   "",
	"slots":                "/slots is always served",
	"props":                "/props is always served",
	"no-webui":             "",
	"path":                 "",
	"api-key-file":         "--api-key",
	"ssl-key-file":         "",
	"ssl-cert-file":        "",
	"chat-template-kwargs": "chat_template_kwargs in the request",
	"grammar":              "grammar in the request",
	"json-schema":          "json_schema in the request",
	"temp":                 "temperature in the request",
	"top-k":                "top_k in the request",
	"top-p":                "top_p in the request",
	"min-p":                "min_p in the request",
	"seed":                 "seed in the request",
	"lora":                 "",
	"md":                   "",
	"model-draft":          "",
	"kv-unified":           "the KV cache is always one pool (--kv-memory)",
	"cram":                 "",
	"cache-ram":            "",
	"swa-full":             "",
	"verbose":              "",
	"v":                    "",
	"log-file":             "",
	"log-verbosity":        "",
	"lv":                   "",
}

// unknownFlag is the error for flag arg (name without dashes): it names
// the flag and, for a llama-server flag, the vkllm way to the same end.
func unknownFlag(arg, name string) error {
	eq, isLlama := llamaEquivalents[name]
	if target, ok := llamaAliases[name]; ok {
		return fmt.Errorf("unknown flag %q (llama-server's --%s, which this command does not take)", arg, target)
	}
	switch {
	case isLlama && eq != "":
		return fmt.Errorf("unknown flag %q (llama-server's; in vkllm: %s)", arg, eq)
	case isLlama:
		return fmt.Errorf("unknown flag %q (llama-server's; vkllm has no equivalent)", arg)
	}
	return fmt.Errorf("unknown flag %q", arg)
}

// rewriteLlama returns args with llama-server's spellings of fs's flags
// rewritten to vkllm's long names (see llamaAliases), "--flash-attn on"
// joined into one argument, and an error naming the first flag fs does
// not know, up to the first argument that is no flag or "--" (where
// parsing stops). Arguments are walked as ff reads them: a flag that
// takes a value and has no "=value" consumes the next argument.
func rewriteLlama(fs *ff.FlagSet, args []string) ([]string, error) {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" || !strings.HasPrefix(a, "-") {
			return append(out, args[i:]...), nil
		}
		body := strings.TrimLeft(a, "-")
		name, val, hasVal := strings.Cut(body, "=")
		if target, ok := llamaAliases[name]; ok && name != target {
			if _, has := fs.GetFlag(target); has {
				name = target
				a = "--" + target
				if hasVal {
					a += "=" + val
				}
			}
		}
		if name == "flash-attn" && !hasVal && i+1 < len(args) {
			if _, err := parseFlashAttn(args[i+1]); err == nil {
				a += "=" + args[i+1]
				i++
				hasVal = true
			}
		}
		long := strings.HasPrefix(a, "--")
		var f ff.Flag
		var known bool
		switch {
		case name == "help" || name == "h":
			known = true
		case long || utf8.RuneCountInString(name) == 1:
			f, known = fs.GetFlag(name)
			if known && long && utf8.RuneCountInString(name) == 1 {
				// --c is no spelling of -c.
				if n, ok := f.GetLongName(); !ok || n != name {
					known = false
				}
			}
		default:
			// -xyz: a short flag with its value attached (-c4096), else
			// unknown.
			r, _ := utf8.DecodeRuneInString(name)
			sf, ok := fs.GetFlag(string(r))
			_, isLlama := llamaEquivalents[name]
			_, isAlias := llamaAliases[name]
			if ok && !isLlama && !isAlias && sf.GetPlaceholder() != "" {
				out = append(out, a)
				continue
			}
		}
		if !known {
			return nil, unknownFlag(strings.SplitN(a, "=", 2)[0], name)
		}
		out = append(out, a)
		// A flag takes a value when ff gives it a placeholder; bool flags
		// have none, but for --flash-attn, whose value type names itself.
		switch {
		case f == nil || hasVal:
		case f.GetPlaceholder() != "" && name != "flash-attn":
			if i+1 == len(args) {
				return nil, fmt.Errorf("%s: missing value", a)
			}
			i++
			out = append(out, args[i])
		case long && i+1 < len(args):
			// ff lets a long bool flag take a following true or false.
			if _, err := strconv.ParseBool(args[i+1]); err == nil {
				i++
				out = append(out, args[i])
			}
		}
	}
	return out, nil
}

// flashAttn is --flash-attn: llama-server's on, off or auto (a bare flag
// is on, as its older releases read -fa).
type flashAttn string

func parseFlashAttn(s string) (flashAttn, error) {
	switch s {
	case "on", "off", "auto":
		return flashAttn(s), nil
	}
	if b, err := strconv.ParseBool(s); err == nil {
		if b {
			return "on", nil
		}
		return "off", nil
	}
	return "", fmt.Errorf("%q is not one of on, off, auto", s)
}

func (f *flashAttn) Set(s string) error {
	v, err := parseFlashAttn(s)
	if err == nil {
		*f = v
	}
	return err
}

func (f *flashAttn) String() string   { return string(*f) }
func (f *flashAttn) IsBoolFlag() bool { return true }

// gpuLayers is --n-gpu-layers: a layer count, auto or all, as
// llama-server takes it.
type gpuLayers string

func (g *gpuLayers) Set(s string) error {
	if s != "auto" && s != "all" {
		if _, err := strconv.Atoi(s); err != nil {
			return fmt.Errorf("%q is not a number of layers, auto or all", s)
		}
	}
	*g = gpuLayers(s)
	return nil
}

func (g *gpuLayers) String() string { return string(*g) }

// llamaFlags are llama-server's flags that vkllm takes without their
// having an effect: what they ask for is always so here.
type llamaFlags struct {
	gpuLayers                   gpuLayers
	flashAttn                   flashAttn
	threads                     int
	jinja, embedding, reranking bool
	metrics, logDisable         bool
}

func (l *llamaFlags) register(fs *ff.FlagSet) {
	l.flashAttn = "auto"
	fs.Value(0, "n-gpu-layers", &l.gpuLayers, "llama-server's layer offload (-ngl `N`, auto or all): accepted; every layer always runs on the Vulkan device")
	fs.Value(0, "flash-attn", &l.flashAttn, "llama-server's -fa [on|off|auto]: accepted; attention always runs in fused online-softmax kernels")
	fs.IntVar(&l.threads, 't', "threads", 0, "llama-server's CPU `threads`: accepted; the model runs on the Vulkan device")
	fs.BoolVar(&l.jinja, 0, "jinja", "llama-server's --jinja: accepted; the model's Jinja chat template is used by default")
	fs.BoolVar(&l.embedding, 0, "embedding", "llama-server's --embedding(s): accepted; /v1/embeddings is always served")
	fs.BoolVar(&l.reranking, 0, "reranking", "llama-server's --reranking (--rerank): accepted; /v1/rerank is always served")
	fs.BoolVar(&l.metrics, 0, "metrics", "llama-server's --metrics: accepted; /metrics is always served")
	fs.BoolVar(&l.logDisable, 0, "log-disable", "log nothing (llama-server's --log-disable); the console lines stay")
}

// logNoEffect says once in the log which of llama-server's flags were
// given and change nothing here.
func (l *llamaFlags) logNoEffect(fs *ff.FlagSet, log *slog.Logger) {
	var given []string
	for _, n := range []string{"n-gpu-layers", "flash-attn", "threads", "jinja", "embedding", "reranking", "metrics"} {
		if f, ok := fs.GetFlag(n); ok && f.IsSet() {
			given = append(given, "--"+n)
		}
	}
	if len(given) > 0 {
		log.Info("llama-server flags accepted without effect: all layers run on the Vulkan device, with fused attention kernels, the model's Jinja template, and every route (embeddings, rerank, metrics) served",
			"flags", strings.Join(given, " "))
	}
}
