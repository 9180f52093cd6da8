package engine

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/sampling"
	"github.com/vkllm/vkllm/tools/modelgen"
	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// argmaxRow is OutArgmax's pick over one row of logits: ops.RefArgmax,
// as CPUModel picks, -1 when no logit is above -Inf.
func argmaxRow(x []float32) int32 {
	var id [1]uint32
	ops.RefArgmax(id[:], x, 1, len(x))
	return int32(id[0])
}

// paths names the two ways results reach the host: in place on a UMA
// device, and through device-local buffers and recorded copies
// (vk.Options.ForceStaging, the discrete-GPU path).
var paths = []struct {
	name    string
	staging bool
}{{"direct", false}, {"staging", true}}

// rowsBatch is one row per slot 0..n-1 at position pos, feeding tokens,
// asking for nothing yet.
func rowsBatch(tokens []int32, pos int32) Batch {
	n := len(tokens)
	b := Batch{Tokens: tokens, Slots: make([]int32, n), Pos: make([]int32, n), Out: make([]RowOut, n)}
	for i := range n {
		b.Slots[i], b.Pos[i] = int32(i), pos
	}
	return b
}

// spreadTokens is n token ids spread over the vocabulary.
func spreadTokens(vocab, n int) []int32 {
	tokens := make([]int32, n)
	for i := range tokens {
		tokens[i] = int32(5 + 37*i%(vocab-5))
	}
	return tokens
}

// logitsPass runs one row per token (slot i, position 0) asking for every
// row's logits: the reference the other outputs are checked against.
func logitsPass(t *testing.T, m *GPUModel, tokens []int32) Output {
	t.Helper()
	all := rowsBatch(tokens, 0)
	for i := range all.Out {
		all.Out[i] = RowOut{Kind: OutLogits}
	}
	ref, err := forwardCopy(m, all)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// TestForwardArgmax runs batches whose rows ask for logits, argmax ids and
// hidden states on both result paths, with soft-capped logits too (gemma2),
// and checks every result against a logits-only pass: the argmax ids are
// the rows' argmax, the logits and hidden states the same bits. The
// staging path gives the direct path's bits, and a pass of 16 argmax rows
// reads back 64 bytes.
func TestForwardArgmax(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	for _, arch := range []string{"llama", "gemma2"} {
		path := genModel(t, modelgen.Options{Arch: arch, Embd: 64, Layers: 2, Type: gguf.TypeQ8_0, Seed: 7})
		o, w := openModel(t, path)
		const n = 16
		tokens := spreadTokens(o.Vocab, n)
		var direct []float32 // the direct path's logits, for the staging path
		for _, p := range paths {
			t.Run(arch+"/"+p.name, func(t *testing.T) {
				dev := vktest.Open(t, vk.Options{ForceStaging: p.staging})
				if p.staging && !dev.Discrete() {
					t.Fatal("Discrete() = false with ForceStaging")
				}
				m, err := NewGPUModel(dev, o, w, GPUConfig{CtxSize: 32, Slots: n, BatchSize: n})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				V, E := o.Vocab, o.Embd
				// Every row's logits, then every row's hidden state.
				ref := logitsPass(t, m, tokens)
				if ref.ReadBytes != 4*n*V {
					t.Errorf("%d logits rows: ReadBytes = %d, want %d", n, ref.ReadBytes, 4*n*V)
				}
				hid := rowsBatch(tokens, 0)
				for i := range n {
					hid.Out[i] = RowOut{Kind: OutHidden}
				}
				refHidden, err := forwardCopy(m, hid)
				if err != nil {
					t.Fatal(err)
				}
				if p.staging && direct != nil && !slices.Equal(ref.Logits, direct) {
					t.Errorf("the staging path's logits differ from the direct path's (max |diff| %g)", maxAbsDiff(ref.Logits, direct))
				}
				if !p.staging {
					direct = slices.Clone(ref.Logits)
				}

				// Argmax only: 16 ids, 64 bytes.
				am := rowsBatch(tokens, 0)
				for i := range n {
					am.Out[i] = RowOut{Kind: OutArgmax}
				}
				var out Output
				if err := m.ForwardInto(am, &out); err != nil {
					t.Fatal(err)
				}
				if out.ReadBytes != 4*n || len(out.Logits) != 0 || len(out.Tokens) != n {
					t.Errorf("%d argmax rows: ReadBytes = %d, %d logits, %d tokens; want %d, 0, %d", n, out.ReadBytes, len(out.Logits), len(out.Tokens), 4*n, n)
				}
				for i, id := range out.Tokens {
					if want := argmaxRow(ref.Logits[i*V : (i+1)*V]); id != want {
						t.Errorf("row %d: argmax %d, want %d", i, id, want)
					}
				}

				// Mixed: argmax on rows 0, 3, 6, ..., logits on 1, 4, ...,
				// hidden states on 2, 5, ...; borrowed and copied alike.
				mix := rowsBatch(tokens, 0)
				var wantTok []int32
				var wantLogits, wantHidden []float32
				for i := range n {
					switch i % 3 {
					case 0:
						mix.Out[i] = RowOut{Kind: OutArgmax}
						wantTok = append(wantTok, argmaxRow(ref.Logits[i*V:(i+1)*V]))
					case 1:
						mix.Out[i] = RowOut{Kind: OutLogits}
						wantLogits = append(wantLogits, ref.Logits[i*V:(i+1)*V]...)
					case 2:
						mix.Out[i] = RowOut{Kind: OutHidden}
						wantHidden = append(wantHidden, refHidden.Hidden[i*E:(i+1)*E]...)
					}
				}
				for _, borrow := range []bool{false, true} {
					out := Output{Borrow: borrow}
					if err := m.ForwardInto(mix, &out); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(out.Tokens, wantTok) {
						t.Errorf("mixed batch (borrow %v): tokens %v, want %v", borrow, out.Tokens, wantTok)
					}
					if !slices.Equal(out.Logits, wantLogits) {
						t.Errorf("mixed batch (borrow %v): logits differ from the logits-only pass's (max |diff| %g)", borrow, maxAbsDiff(out.Logits, wantLogits))
					}
					if !slices.Equal(out.Hidden, wantHidden) {
						t.Errorf("mixed batch (borrow %v): hidden states differ from the hidden-only pass's (max |diff| %g)", borrow, maxAbsDiff(out.Hidden, wantHidden))
					}
					if want := 4 * (len(wantTok) + len(wantLogits) + len(wantHidden)); out.ReadBytes != want {
						t.Errorf("mixed batch: ReadBytes = %d, want %d", out.ReadBytes, want)
					}
				}

				// A row asks for a known kind of output, and every row
				// says what it asks.
				bad := rowsBatch(tokens, 0)
				bad.Out[3] = RowOut{Kind: OutHidden + 1}
				if err := m.ForwardInto(bad, &out); err == nil {
					t.Error("a row asking for an unknown output: no error")
				}
				bad.Out[3], bad.Out = RowOut{}, bad.Out[:5]
				if err := m.ForwardInto(bad, &out); err == nil {
					t.Error("5 outputs for 16 rows: no error")
				}
				vktest.Check(t, dev)
			})
		}
	}
}

// forwardCopy runs b and returns a copy of its output.
func forwardCopy(m *GPUModel, b Batch) (Output, error) {
	var out Output
	err := m.ForwardInto(b, &out)
	return out, err
}

func maxAbsDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// TestCPUArgmax: the CPU reference answers Argmax and TopK rows as the GPU
// does.
func TestCPUArgmax(t *testing.T) {
	path := genModel(t, modelgen.Options{Arch: "llama", Embd: 64, Layers: 2, Type: gguf.TypeF32, Seed: 2})
	o, w := openModel(t, path)
	cpu, err := NewCPUModel(o, w, 16, 4)
	if err != nil {
		t.Fatal(err)
	}
	tokens := []int32{9, 40, 41, 300}
	all := rowsBatch(tokens, 0)
	for i := range all.Out {
		all.Out[i] = RowOut{Kind: OutLogits}
	}
	var ref Output
	if err := cpu.ForwardInto(all, &ref); err != nil {
		t.Fatal(err)
	}
	b := rowsBatch(tokens, 0)
	b.Out[0], b.Out[1], b.Out[3] = RowOut{Kind: OutArgmax}, RowOut{Kind: OutLogits}, RowOut{Kind: OutArgmax}
	var out Output
	if err := cpu.ForwardInto(b, &out); err != nil {
		t.Fatal(err)
	}
	V := o.Vocab
	want := []int32{argmaxF32(ref.Logits[:V]), argmaxF32(ref.Logits[3*V:])}
	if !slices.Equal(out.Tokens, want) || !slices.Equal(out.Logits, ref.Logits[V:2*V]) {
		t.Errorf("CPU argmax rows: tokens %v, want %v; logits row equal: %v", out.Tokens, want, slices.Equal(out.Logits, ref.Logits[V:2*V]))
	}
	b = rowsBatch(tokens, 0)
	b.Out = []RowOut{{Kind: OutArgmax}, {Kind: OutTopK, K: 7}, {Kind: OutLogits}, {Kind: OutTopK, K: 12}}
	if err := cpu.ForwardInto(b, &out); err != nil {
		t.Fatal(err)
	}
	wantIDs, wantVals := refTopRows(ref.Logits, []int{1, 3}, V, 12)
	if out.TopN != 12 || !slices.Equal(out.TopIDs, wantIDs) || !slices.Equal(out.TopLogits, wantVals) || !slices.Equal(out.Logits, ref.Logits[2*V:3*V]) {
		t.Errorf("CPU top rows: TopN %d, ids %v; want 12, %v", out.TopN, out.TopIDs, wantIDs)
	}
}

// greedyChain is a greedy chain; logprobs makes it read whole rows.
func greedyChain(t *testing.T, m *Model, prompt []int32, edit func(p *sampling.Params), con sampling.Constraint) *sampling.Chain {
	t.Helper()
	p := sampling.DefaultParams()
	p.Temperature = 0
	if edit != nil {
		edit(&p)
	}
	c, err := sampling.NewChain(p, sampling.Vocab{Size: m.Opts.Vocab, EOG: m.Tok.EOGIDs()}, con)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Prime(prompt); err != nil {
		t.Fatal(err)
	}
	return c
}

// runAll generates every request at once through s and returns each one's
// tokens.
func runAll(t *testing.T, s *Scheduler, reqs []GenRequest) [][]int32 {
	t.Helper()
	groups := make([]*Group, len(reqs))
	for i, r := range reqs {
		g, err := s.Generate(context.Background(), []GenRequest{r})
		if err != nil {
			t.Fatal(err)
		}
		groups[i] = g
	}
	out := make([][]int32, len(reqs))
	for i, g := range groups {
		r := collect(g)
		if r.err != nil {
			t.Fatalf("request %d: %v", i, r.err)
		}
		out[i] = r.tokens
	}
	return out
}

// TestSchedulerGreedyArgmax generates greedily from the fixture models
// through the scheduler, 8 sequences at once, on both result paths: with
// chains that take the GPU's argmax, and with chains that ask for
// log-probabilities and so sample read-back rows. The tokens are the
// same; the first run takes every token from the argmax and reads back 4
// bytes per token, the second none.
func TestSchedulerGreedyArgmax(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	dir := fixtures.Dir(t, "models")
	for _, file := range []string{"llama-spm-256x4-q8_0.gguf", "qwen2-gpt2-256x4-q8_0.gguf", "qwen3-dscoder-256x3-f16.gguf"} {
		for _, p := range paths {
			t.Run(file+"/"+p.name, func(t *testing.T) {
				m, err := Load(filepath.Join(dir, file), Config{CtxSize: 64, Parallel: 8, BatchSize: 32, Validation: true, ForceStaging: p.staging})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				const n, maxTokens = 8, 16
				var got [2][][]int32
				var stats [2]Stats
				for run, logprobs := range []bool{false, true} {
					s := NewScheduler(m, SchedulerConfig{})
					reqs := make([]GenRequest, n)
					for i := range reqs {
						prompt := testPrompt(m, i, 2+3*i)
						reqs[i] = GenRequest{Prompt: prompt, MaxTokens: maxTokens, Logprobs: logprobs,
							Chain: greedyChain(t, m, prompt, func(p *sampling.Params) { p.Logprobs = logprobs }, nil)}
					}
					got[run] = runAll(t, s, reqs)
					stats[run] = s.Stats()
					s.Close()
				}
				total := 0
				for i := range n {
					if !slices.Equal(got[0][i], got[1][i]) {
						t.Errorf("sequence %d: GPU argmax gave %v, sampling the rows %v", i, got[0][i], got[1][i])
					}
					total += len(got[0][i])
				}
				if stats[0].ArgmaxRows != int64(total) || stats[0].ReadBytes != 4*int64(total) {
					t.Errorf("greedy run: %d argmax rows and %d bytes read back for %d tokens, want %d and %d",
						stats[0].ArgmaxRows, stats[0].ReadBytes, total, total, 4*total)
				}
				if stats[1].ArgmaxRows != 0 || stats[1].ReadBytes < int64(total*m.Opts.Vocab*4) {
					t.Errorf("logprobs run: %d argmax rows and %d bytes read back, want 0 and whole rows", stats[1].ArgmaxRows, stats[1].ReadBytes)
				}
				vktest.Check(t, m.Device())
			})
		}
	}
}

// allowAll is a grammar that allows everything: its presence alone must
// keep a sequence off the argmax path.
type allowAll struct{}

func (allowAll) Mask([]float32) error { return nil }
func (allowAll) Accept(int32) error   { return nil }

// TestSchedulerArgmaxOnlyWhenAllowed runs one request at a time and counts
// the tokens that came from the GPU's argmax: all of a plain greedy
// request's, those after min_tokens of one with min_tokens, and none of
// requests with log-probabilities, a grammar, a penalty, a logit bias or
// temperature sampling.
func TestSchedulerArgmaxOnlyWhenAllowed(t *testing.T) {
	m := schedModel(t, "llama", 2, 16)
	s := NewScheduler(m, SchedulerConfig{})
	defer s.Close()
	const maxTokens = 8
	for _, tc := range []struct {
		name     string
		edit     func(p *sampling.Params)
		con      sampling.Constraint
		logprobs bool
		want     func(tokens int) int
	}{
		{"greedy", nil, nil, false, func(n int) int { return n }},
		{"top_k 1 at temperature 0.7", func(p *sampling.Params) { p.Temperature, p.TopK, p.Seed = 0.7, 1, 3 }, nil, false, func(n int) int { return n }},
		{"min_tokens 3", func(p *sampling.Params) { p.MinTokens = 3 }, nil, false, func(n int) int { return max(n-3, 0) }},
		{"logprobs", func(p *sampling.Params) { p.Logprobs = true }, nil, true, func(int) int { return 0 }},
		{"top_logprobs in the chain only", func(p *sampling.Params) { p.TopLogprobs = 2 }, nil, false, func(int) int { return 0 }},
		{"grammar", nil, allowAll{}, false, func(int) int { return 0 }},
		{"repeat penalty", func(p *sampling.Params) { p.RepeatPenalty = 1.1 }, nil, false, func(int) int { return 0 }},
		{"logit bias", func(p *sampling.Params) { p.LogitBias = map[string]float64{"5": 0.5} }, nil, false, func(int) int { return 0 }},
		{"temperature 0.7", func(p *sampling.Params) { p.Temperature, p.Seed = 0.7, 3 }, nil, false, func(int) int { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prompt := testPrompt(m, 1, 5)
			before := s.Stats().ArgmaxRows
			toks := runAll(t, s, []GenRequest{{Prompt: prompt, MaxTokens: maxTokens, Logprobs: tc.logprobs, Chain: greedyChain(t, m, prompt, tc.edit, tc.con)}})[0]
			if got, want := s.Stats().ArgmaxRows-before, int64(tc.want(len(toks[0:]))); got != want {
				t.Errorf("%s: %d of %d tokens from the GPU argmax, want %d", tc.name, got, len(toks), want)
			}
		})
	}
}

// TestSchedulerGreedyStep: a decode step of 16 greedy sequences reads back
// their 16 token ids (64 bytes) and nothing else, on both result paths,
// and allocates nothing.
func TestSchedulerGreedyStep(t *testing.T) {
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			// Seed 11: none of the 16 greedy sequences meets an end-of-generation
			// token within the measured steps (the model is deterministic).
			path := genModel(t, modelgen.Options{Arch: "llama", Embd: 64, Layers: 2, Type: gguf.TypeQ8_0, Seed: 11})
			m, err := Load(path, Config{CtxSize: 96, Parallel: 16, BatchSize: 32, Validation: true, ForceStaging: p.staging})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			s := newScheduler(m, SchedulerConfig{})
			defer func() { close(s.quit); s.shutdown(); close(s.jobs) }()
			var qs []*Sequence
			for i := range 16 {
				prompt := testPrompt(m, i, 2)
				g, err := s.Generate(context.Background(), []GenRequest{{Prompt: prompt, Chain: greedyChain(t, m, prompt, nil, nil), MaxTokens: 80}})
				if err != nil {
					t.Fatal(err)
				}
				qs = append(qs, g.Seqs()...)
			}
			s.admit()
			s.step() // the prompts, pipelines and descriptor sets
			s.step()
			drain := func() {
				for _, q := range qs {
					for len(q.grp.events) > 0 {
						<-q.grp.events
					}
				}
			}
			drain()
			st := s.Stats()
			if !s.step() || s.batch.Len() != 16 {
				t.Fatalf("a decode step ran %d rows, want 16", s.batch.Len())
			}
			after := s.Stats()
			if rows, bytes := after.ArgmaxRows-st.ArgmaxRows, after.ReadBytes-st.ReadBytes; rows != 16 || bytes != 64 {
				t.Errorf("a greedy decode step of 16 sequences: %d argmax rows, %d bytes read back; want 16 and 64 (was %d bytes a row)", rows, bytes, 4*m.Opts.Vocab)
			}
			allocs := testing.AllocsPerRun(10, func() {
				if !s.step() || s.batch.Len() != 16 {
					t.Fatalf("a decode step ran %d rows, want 16 (did a sequence end?)", s.batch.Len())
				}
				drain()
			})
			if allocs != 0 {
				t.Errorf("a greedy decode step of 16 sequences: %v allocations, want 0", allocs)
			}
			vktest.Check(t, m.Device())
		})
	}
}

// BenchmarkGreedyDecodeStep times a decode step of 16 greedy rows of a
// fixture model (32,000-token vocabulary): the logits read back and copied,
// then the argmax of each row on the CPU (the path before OutArgmax),
// against the argmax on the device and 16 ids read back.
//
//	go test ./engine -run '^$' -bench GreedyDecodeStep -benchtime 20x
func BenchmarkGreedyDecodeStep(b *testing.B) {
	dir := fixtures.Dir(b, "models")
	m, err := Load(filepath.Join(dir, "llama-spm-256x4-q8_0.gguf"), Config{CtxSize: 64, Parallel: 16, BatchSize: 16})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	const n = 16
	tokens := make([]int32, n)
	for i := range tokens {
		tokens[i] = int32(100 + 7*i)
	}
	V := m.Opts.Vocab
	for _, gpu := range []bool{false, true} {
		name := map[bool]string{false: "cpu-argmax", true: "gpu-argmax"}[gpu]
		b.Run(name, func(b *testing.B) {
			batch := rowsBatch(tokens, 0)
			for i := range n {
				batch.Out[i] = RowOut{Kind: OutLogits}
				if gpu {
					batch.Out[i] = RowOut{Kind: OutArgmax}
				}
			}
			out := Output{Logits: make([]float32, 0, n*V)}
			var sink int32
			for b.Loop() {
				if err := m.GPU.ForwardInto(batch, &out); err != nil {
					b.Fatal(err)
				}
				for r := range n {
					if gpu {
						sink += out.Tokens[r]
					} else {
						sink += argmaxRow(out.Logits[r*V : (r+1)*V])
					}
				}
			}
			_ = sink
		})
	}
}
