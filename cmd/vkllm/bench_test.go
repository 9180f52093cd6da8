package main

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/tools/modelgen"
)

func TestBenchParseCounts(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"1,2,4,8,16", []int{1, 2, 4, 8, 16}},
		{" 8 , 3", []int{8, 3}},
		{"1", []int{1}},
		{"", nil},
		{"0", nil},
		{"-2", nil},
		{"2,,4", nil},
		{"2,x", nil},
		{"1.5", nil},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseCounts(tc.in)
			if tc.want == nil {
				if err == nil {
					t.Errorf("parseCounts(%q) = %v, want an error", tc.in, got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseCounts(%q) = %v, %v, want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// tableRows returns the cells of the data rows of a Markdown table (the
// lines after the header and the separator).
func tableRows(t *testing.T, out string) [][]string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "|---") {
		t.Fatalf("output is not a Markdown table:\n%s", out)
	}
	var rows [][]string
	for _, l := range lines[2:] {
		cells := strings.Split(strings.Trim(l, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}

// rateCell parses "mean ± sd".
func rateCell(t *testing.T, cell string) (mean, sd float64) {
	t.Helper()
	m, s, ok := strings.Cut(cell, "±")
	mean, err1 := strconv.ParseFloat(strings.TrimSpace(m), 64)
	sd, err2 := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("cell %q is not \"mean ± sd\"", cell)
	}
	return mean, sd
}

// TestBenchParallel runs `vkllm bench` on a generated model: with
// --parallel, one row (or JSON object) per sequence count with positive
// rates; without it, the single-sequence pp/tg rows as before.
func TestBenchParallel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := modelgen.WriteFile(path, modelgen.Options{Arch: "llama", Vocab: "spm", Embd: 64, Layers: 1, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	// 4 prompts of 7 tokens in chunks of 6 rows: chunks mix sequences and
	// cut prompts in the middle. --verify checks every batch against the
	// CPU reference.
	common := []string{"-m", path, "-p", "7", "-n", "3", "-r", "2", "--batch-size", "6", "--verify"}
	seqs := []int{1, 2, 4}

	t.Run("table", func(t *testing.T) {
		var out bytes.Buffer
		if err := bench(&out, append(common, "--parallel", "1,2,4")); err != nil {
			t.Fatal(err)
		}
		rows := tableRows(t, out.String())
		if len(rows) != len(seqs) {
			t.Fatalf("bench --parallel 1,2,4 table has %d rows, want %d:\n%s", len(rows), len(seqs), out.String())
		}
		for i, r := range rows {
			// model, device, test, seqs, pp, tg, tg per seq
			if len(r) != 7 || r[2] != "pp7+tg3" || r[3] != strconv.Itoa(seqs[i]) {
				t.Fatalf("row %d = %q, want test pp7+tg3 and %d seqs", i, r, seqs[i])
			}
			pp, _ := rateCell(t, r[4])
			tg, _ := rateCell(t, r[5])
			seq, _ := rateCell(t, r[6])
			if pp <= 0 || tg <= 0 || seq <= 0 {
				t.Errorf("row %d rates pp %g, tg %g, per seq %g, want all positive", i, pp, tg, seq)
			}
			if n := float64(seqs[i]); math.Abs(seq*n-tg) > 0.01*n+0.01 {
				t.Errorf("row %d: per-sequence %g × %d seqs = %g, want the aggregate %g", i, seq, seqs[i], seq*n, tg)
			}
		}
	})

	t.Run("json", func(t *testing.T) {
		var out bytes.Buffer
		if err := bench(&out, append(common, "--parallel", "1,2,4", "--json")); err != nil {
			t.Fatal(err)
		}
		var got []parallelResult
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("bench --json: %v\n%s", err, out.String())
		}
		if len(got) != len(seqs) {
			t.Fatalf("bench --parallel 1,2,4 --json has %d results, want %d", len(got), len(seqs))
		}
		for i, r := range got {
			n := seqs[i]
			if r.Parallel != n || r.Prompt != 7 || r.Gen != 3 || r.Reps != 2 || r.PP == nil || r.TG == nil || r.TGSeq == nil {
				t.Fatalf("result %d = %+v, want n_parallel %d, n_prompt 7, n_gen 3, 2 repetitions, pp, tg and tg_per_seq", i, r, n)
			}
			for _, c := range []struct {
				name   string
				r      *tokenRate
				tokens int
			}{{"pp", r.PP, 7 * n}, {"tg", r.TG, 3 * n}, {"tg_per_seq", r.TGSeq, 3}} {
				if c.r.Tokens != c.tokens || len(c.r.Samples) != 2 || c.r.Mean <= 0 || c.r.StdDev < 0 {
					t.Errorf("result %d %s = %+v, want %d tokens, 2 positive samples", i, c.name, *c.r, c.tokens)
				}
				for _, s := range c.r.Samples {
					if s <= 0 || math.IsInf(s, 0) || math.IsNaN(s) {
						t.Errorf("result %d %s sample %g, want a positive rate", i, c.name, s)
					}
				}
			}
			if math.Abs(r.TGSeq.Mean*float64(n)-r.TG.Mean) > 1e-9*r.TG.Mean {
				t.Errorf("result %d: tg_per_seq %g × %d != tg %g", i, r.TGSeq.Mean, n, r.TG.Mean)
			}
		}
	})

	t.Run("decode only", func(t *testing.T) {
		var out bytes.Buffer
		if err := bench(&out, []string{"-m", path, "-p", "0", "-n", "3", "-r", "1", "--parallel", "3", "--json"}); err != nil {
			t.Fatal(err)
		}
		var got []parallelResult
		if err := json.Unmarshal(out.Bytes(), &got); err != nil {
			t.Fatalf("bench --json: %v\n%s", err, out.String())
		}
		if len(got) != 1 || got[0].PP != nil || got[0].TG == nil || got[0].TG.Mean <= 0 || got[0].TG.Tokens != 9 {
			t.Errorf("bench -p 0 -n 3 --parallel 3 = %s, want one result without pp and 9 generated tokens", out.String())
		}
	})

	t.Run("without parallel", func(t *testing.T) {
		var out bytes.Buffer
		if err := bench(&out, []string{"-m", path, "-p", "7", "-n", "3", "-r", "1"}); err != nil {
			t.Fatal(err)
		}
		rows := tableRows(t, out.String())
		if len(rows) != 2 || len(rows[0]) != 4 || rows[0][2] != "pp7" || rows[1][2] != "tg3" {
			t.Fatalf("bench without --parallel = %q, want the rows pp7 and tg3", rows)
		}
		for _, r := range rows {
			if mean, _ := rateCell(t, r[3]); mean <= 0 {
				t.Errorf("bench %s = %g t/s, want positive", r[2], mean)
			}
		}
	})

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"zero count", []string{"-m", path, "--parallel", "2,0"}, "--parallel"},
		{"nothing to do", []string{"-m", path, "-p", "0", "-n", "0", "--parallel", "2"}, "nothing to measure"},
		{"context too small", []string{"-m", path, "-p", "8", "-n", "4", "--ctx-size", "10", "--parallel", "2"}, "--ctx-size 10"},
		{"more sequences than batch rows", []string{"-m", path, "-p", "2", "-n", "2", "--batch-size", "3", "--parallel", "1,4"}, "--batch-size 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := bench(new(bytes.Buffer), tc.args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("bench(%q) = %v, want an error mentioning %q", tc.args, err, tc.want)
			}
		})
	}
}

// TestBenchProfileBandwidth runs `vkllm bench --profile` on a generated
// model: the memory bandwidth is measured, and every weight kind the
// decode step multiplies by gets its bytes (the sum of its layers'
// tensors), a positive time and rate, and its share of the bandwidth, in
// the JSON and the table.
func TestBenchProfileBandwidth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	opts := modelgen.Options{Arch: "llama", Vocab: "spm", Embd: 64, Layers: 2, Type: gguf.TypeQ8_0, Seed: 5}
	if err := modelgen.WriteFile(path, opts); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{} // weight kind -> bytes of all its layers
	for _, ti := range f.Tensors {
		if len(ti.Dims) != 2 || ti.Name == "token_embd.weight" {
			continue
		}
		kind := strings.TrimSuffix(ti.Name, ".weight") // blk.N.attn_q -> attn_q
		if parts := strings.SplitN(kind, ".", 3); len(parts) == 3 && parts[0] == "blk" {
			kind = parts[2]
		}
		want[kind] += int64(ti.Size)
	}
	f.Close()
	// Decode steps multiply q|k|v and gate|up joined at load (the decode
	// fusions, where the device takes them: not on the integer-dot path).
	fused := map[string]int64{}
	for k, v := range want {
		switch k {
		case "attn_q", "attn_k", "attn_v":
			k = "attn_qkv"
		case "ffn_gate", "ffn_up":
			k = "ffn_gate_up"
		}
		fused[k] += v
	}
	args := []string{"-m", path, "-p", "4", "-n", "3", "-r", "1", "--parallel", "1,2", "--profile"}

	var out bytes.Buffer
	if err := bench(&out, append(args, "--json")); err != nil {
		t.Fatal(err)
	}
	var got []parallelResult
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out.String())
	}
	if len(got) != 2 {
		t.Fatalf("bench --parallel 1,2 --profile --json has %d results, want 2", len(got))
	}
	for _, r := range got {
		bw := r.Bandwidth
		if bw == nil || bw.GBps <= 0 || bw.Bytes < 16<<20 || bw.Reps != 5 || bw.Micros <= 0 {
			t.Fatalf("%d sequences: mem_bandwidth %+v, want a positive rate over at least 16 MiB, best of 5", r.Parallel, bw)
		}
		seen := map[string]int64{}
		for _, w := range r.Weights {
			seen[w.Weights] = w.Bytes
			if w.Micros <= 0 || w.GBps <= 0 || w.Percent <= 0 || len(w.Kernels) == 0 {
				t.Errorf("%d sequences: %+v, want positive time, rate and share, and its kernels", r.Parallel, w)
			}
			if d := w.GBps - float64(w.Bytes)/w.Micros/1e3; math.Abs(d) > 1e-9*w.GBps {
				t.Errorf("%d sequences, %s: %g GB/s, want bytes / time = %g", r.Parallel, w.Weights, w.GBps, float64(w.Bytes)/w.Micros/1e3)
			}
			if d := w.Percent - 100*w.GBps/bw.GBps; math.Abs(d) > 1e-9*w.Percent {
				t.Errorf("%d sequences, %s: %g%% of %g GB/s, want %g", r.Parallel, w.Weights, w.Percent, bw.GBps, 100*w.GBps/bw.GBps)
			}
		}
		if !reflect.DeepEqual(seen, want) && !reflect.DeepEqual(seen, fused) {
			t.Errorf("%d sequences: bytes per weight kind %v, want %v (or, fused, %v)", r.Parallel, seen, want, fused)
		}
		labelled := 0
		for _, k := range r.Profile {
			if k.Weights != "" {
				labelled++
			}
		}
		if labelled < len(seen) {
			t.Errorf("%d sequences: %d profile rows carry a weight kind, want at least %d", r.Parallel, labelled, len(seen))
		}
	}

	out.Reset()
	if err := bench(&out, args); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"GB/s", "% bw", "| ffn_down ", "| output ", "| all "} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("bench --profile table lacks %q:\n%s", s, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}
