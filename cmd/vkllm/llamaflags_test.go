package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// parseServe parses args with serve's real flag set.
func parseServe(t *testing.T, args []string) (*serveFlags, error, string) {
	t.Helper()
	fs := newFlagSet("serve")
	f := &serveFlags{}
	f.register(fs)
	err := parseFlags(fs, args, true)
	var log bytes.Buffer
	if err == nil {
		f.llamaFlags.logNoEffect(fs, slog.New(slog.NewTextHandler(&log, nil)))
	}
	return f, err, log.String()
}

// TestLlamaServerFlagsOtherCommands checks that llama-server's spellings
// of serve-only flags are errors naming them on a command without them,
// not short flags with a value attached (-ngl read as -n "gl").
func TestLlamaServerFlagsOtherCommands(t *testing.T) {
	fs := newFlagSet("bench")
	var mf modelFlags
	mf.register(fs, 0, false)
	fs.IntShort('n', 128, "`tokens` to generate")
	fs.IntShort('p', 512, "prompt `tokens`")
	err := parseFlags(fs, []string{"-m", "x.gguf", "-p", "8", "-ngl", "99"}, false)
	if want := `unknown flag "-ngl" (llama-server's --n-gpu-layers, which this command does not take)`; err == nil || err.Error() != want {
		t.Errorf("bench -ngl 99 = %v, want %s", err, want)
	}
	if err := parseFlags(fs, []string{"-m", "x.gguf", "-b", "64", "-n4"}, false); err != nil || mf.batchSize != 64 {
		t.Errorf("bench -b 64 -n4 = %v, batch %d; want -b read as --batch-size", err, mf.batchSize)
	}
}

// TestLlamaServerFlags parses llama-server command lines with serve's flag
// set: the flags whose meaning matches set vkllm's, the ones that change
// nothing here are accepted and named once in the log, and flags vkllm
// does not know are errors naming them and the vkllm equivalent.
func TestLlamaServerFlags(t *testing.T) {
	type want struct {
		ctx, parallel, threads, nPredict, batch int
		alias, fa, ngl                          string
		jinja, embedding, rerank, logOff        bool
	}
	for _, tc := range []struct {
		name string
		args string
		want want
		rest string
	}{
		{"usual", "-m x.gguf -c 2048 -np 2 -t 8 -a mine -fa on -ngl 99 --jinja --embedding --reranking --metrics --log-disable -n 128",
			want{2048, 2, 8, 128, 512, "mine", "on", "99", true, true, true, true}, ""},
		{"long names", "--ctx-size 512 -b 256 -ctk q8_0 --parallel 3 --threads 4 --alias other --flash-attn off --n-gpu-layers=all --embeddings --rerank",
			want{512, 3, 4, 0, 256, "other", "off", "all", false, true, true, false}, ""},
		{"bare -fa", "-fa -ngl auto -c4096",
			want{4096, 4, 0, 0, 512, "", "on", "auto", false, false, false, false}, ""},
		{"-fa then a value flag", "-fa --gpu-layers 10 -n -1",
			want{0, 4, 0, -1, 512, "", "on", "10", false, false, false, false}, ""},
		{"bool with a value", "--jinja true -ngl 5 --metrics=false -np 2",
			want{0, 2, 0, 0, 512, "", "auto", "5", true, false, false, false}, ""},
		{"none", "", want{0, 4, 0, 0, 512, "", "auto", "", false, false, false, false}, ""},
		{"rest after --", "-np 1 -- -ngl", want{0, 1, 0, 0, 512, "", "auto", "", false, false, false, false}, "-ngl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err, log := parseServe(t, strings.Fields(tc.args))
			if err != nil {
				t.Fatalf("parse %q: %v", tc.args, err)
			}
			got := want{f.ctxSize, f.parallel, f.threads, f.nPredict, f.batchSize, f.alias, string(f.flashAttn), string(f.gpuLayers),
				f.jinja, f.embedding, f.reranking, f.logDisable}
			if got != tc.want || tc.name == "long names" && f.cacheTypeK != "q8_0" {
				t.Errorf("parse %q = %+v, want %+v", tc.args, got, tc.want)
			}
			if tc.want.ngl != "" && !strings.Contains(log, "all layers run on the Vulkan device") {
				t.Errorf("parse %q: log %q does not say the layers all run on the device", tc.args, log)
			}
			if tc.want.ngl == "" && tc.want.fa == "auto" && log != "" {
				t.Errorf("parse %q: log %q, want nothing for a vkllm command line", tc.args, log)
			}
		})
	}

	for _, tc := range []struct{ args, want string }{
		{"-ub 512", `unknown flag "-ub" (llama-server's; in vkllm: --batch-size)`},
		{"--list-devices", `unknown flag "--list-devices" (llama-server's; in vkllm: vkllm devices)`},
		{"-m x.gguf --ubatch-size 512", `unknown flag "--ubatch-size" (llama-server's; in vkllm: --batch-size)`},
		{"--mlock", `unknown flag "--mlock" (llama-server's; vkllm has no equivalent)`},
		{"-cb", `unknown flag "-cb" (llama-server's; in vkllm: continuous batching is always on)`},
		{"-xyz", `unknown flag "-xyz"`},
		{"--nope=1", `unknown flag "--nope"`},
		{"-ngl lots", `n-gpu-layers`},
		{"-fa=maybe", `flash-attn`},
		{"-t many", `threads`},
		{"--c 5", `unknown flag "--c"`},
		{"-m x.gguf -ngl", `--n-gpu-layers: missing value`},
	} {
		t.Run(tc.args, func(t *testing.T) {
			_, err, _ := parseServe(t, strings.Fields(tc.args))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("parse %q = %v, want an error containing %s", tc.args, err, tc.want)
			}
		})
	}
}

// TestLlamaServerHubFlags parses llama-server's hub spellings (-hf, -hff,
// -hft, --no-mmproj) with serve's flag set, and the store name given as
// serve's argument.
func TestLlamaServerHubFlags(t *testing.T) {
	f, err, _ := parseServe(t, strings.Fields("-hf ggml-org/gemma-3-4b-it-GGUF:Q8_0 -hff gemma-3-4b-it-Q8_0.gguf -hft hf_x --no-mmproj -ngl 99"))
	if err != nil {
		t.Fatal(err)
	}
	if f.hfRepo != "ggml-org/gemma-3-4b-it-GGUF:Q8_0" || f.hfFile != "gemma-3-4b-it-Q8_0.gguf" || f.hfToken != "hf_x" || !f.noMMProj {
		t.Errorf("-hf -hff -hft --no-mmproj = %q %q %q %v", f.hfRepo, f.hfFile, f.hfToken, f.noMMProj)
	}
	if f, err, _ = parseServe(t, strings.Fields("--hf-repo o/r --models-dir /m --offline")); err != nil || f.hfRepo != "o/r" || f.modelsDir != "/m" || !f.offline {
		t.Errorf("--hf-repo --models-dir --offline = %+v, %v", f.hubFlags, err)
	}
	for _, tc := range []struct{ args, want string }{
		{"-m x.gguf -hf o/r", "-m x.gguf and --hf-repo o/r both name a model"},
		{"-hf nope", `--hf-repo: model "nope": want a hub repository owner/name`},
		{"-m x.gguf -hff f.gguf", "--hf-file needs --hf-repo"},
		{"-m x.gguf extra more", `unexpected arguments ["extra" "more"]`},
		{"o/r -m x.gguf", `the model "o/r" and -m/--hf-repo both name a model`},
		{"o/r:Q8_0 --offline --models-dir /nonexistent", "-m o/r:Q8_0: no such file, and o/r:Q8_0 is not in the store /nonexistent"},
	} {
		err := cmdServe(strings.Fields(tc.args))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve %s = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
