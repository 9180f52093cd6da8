package engine

import (
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

// refTopRows is ops.RefTopK of the given rows of logits (vocab V), k each.
func refTopRows(logits []float32, rows []int, V, k int) ([]int32, []float32) {
	ids, vals := make([]int32, 0, len(rows)*k), make([]float32, 0, len(rows)*k)
	u, v := make([]uint32, k), make([]float32, k)
	for _, r := range rows {
		ops.RefTopK(u, v, logits[r*V:(r+1)*V], 1, V, k)
		for i := range k {
			ids = append(ids, int32(u[i]))
		}
		vals = append(vals, v...)
	}
	return ids, vals
}

// TestForwardTopK runs batches whose rows ask for argmax ids, their
// largest logits (k from 3 to 64), logits and hidden states on both result
// paths, with soft-capped logits too (gemma2), and checks the top rows
// against ops.RefTopK of a logits-only pass: the same ids and the same
// bits, k = the largest asked, and the bytes read back.
func TestForwardTopK(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	for _, arch := range []string{"llama", "gemma2"} {
		path := genModel(t, modelgen.Options{Arch: arch, Embd: 64, Layers: 2, Type: gguf.TypeQ8_0, Seed: 7})
		o, w := openModel(t, path)
		const n = 16
		tokens := spreadTokens(o.Vocab, n)
		for _, p := range paths {
			if arch == "gemma2" && p.staging {
				continue // soft-capping is the same on both paths
			}
			t.Run(arch+"/"+p.name, func(t *testing.T) {
				dev := vktest.Open(t, vk.Options{ForceStaging: p.staging})
				m, err := NewGPUModel(dev, o, w, GPUConfig{CtxSize: 32, Slots: n, BatchSize: n})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				V := o.Vocab
				ref := logitsPass(t, m, tokens)
				for c, ks := range [][]int32{{40}, {3, 64, 17}, {5, 5, 5, 5}} {
					// The last case has no argmax rows: the top rows' kernel
					// then follows the logits product directly.
					noArgmax := c == 2
					b := rowsBatch(tokens, 0)
					var topRows, logitRows []int
					kmax, nArgmax := 0, 0
					for i := range n {
						switch i % 4 {
						case 0:
							if noArgmax {
								continue
							}
							b.Out[i] = RowOut{Kind: OutArgmax}
							nArgmax++
						case 1, 3:
							b.Out[i] = RowOut{Kind: OutTopK, K: ks[len(topRows)%len(ks)]}
							kmax = max(kmax, int(b.Out[i].K))
							topRows = append(topRows, i)
						case 2:
							b.Out[i] = RowOut{Kind: OutLogits}
							logitRows = append(logitRows, i)
						}
					}
					wantIDs, wantVals := refTopRows(ref.Logits, topRows, V, kmax)
					var wantLogits []float32
					for _, r := range logitRows {
						wantLogits = append(wantLogits, ref.Logits[r*V:(r+1)*V]...)
					}
					for _, borrow := range []bool{false, true} {
						out := Output{Borrow: borrow}
						if err := m.ForwardInto(b, &out); err != nil {
							t.Fatal(err)
						}
						if out.TopN != kmax || !slices.Equal(out.TopIDs, wantIDs) || !slices.Equal(out.TopLogits, wantVals) {
							t.Fatalf("k %v (borrow %v): TopN %d, ids %v\nwant %d, %v", ks, borrow, out.TopN, out.TopIDs, kmax, wantIDs)
						}
						if !slices.Equal(out.Logits, wantLogits) || len(out.Tokens) != nArgmax {
							t.Errorf("k %v: the logits rows or argmax ids beside the top rows are wrong", ks)
						}
						if want := 4 * (nArgmax + 2*len(topRows)*kmax + len(wantLogits)); out.ReadBytes != want {
							t.Errorf("k %v: ReadBytes = %d, want %d", ks, out.ReadBytes, want)
						}
					}
				}
				bad := rowsBatch(tokens, 0)
				bad.Out[2] = RowOut{Kind: OutTopK, K: ops.MaxTopK + 1}
				var out Output
				if err := m.ForwardInto(bad, &out); err == nil {
					t.Errorf("a row asking for its %d largest logits: no error", ops.MaxTopK+1)
				}
				bad.Out[2] = RowOut{Kind: OutLogits, K: 4}
				if err := m.ForwardInto(bad, &out); err == nil {
					t.Error("a row asking for its logits with a top-k count: no error")
				}
				vktest.Check(t, dev)
			})
		}
	}
}

// sampledChain is a seeded top_k chain at temperature 0.9; logprobs makes
// it read whole rows (the same draws: TestSampleTopKMatchesSample).
func sampledChain(t *testing.T, m *Model, prompt []int32, seed int64, topK int, logprobs bool) *sampling.Chain {
	return newChainParams(t, m, prompt, seed, func(p *sampling.Params) {
		p.Temperature, p.TopK, p.Logprobs = 0.9, topK, logprobs
	})
}

// TestSchedulerTopKSampling samples from the fixture models through the
// scheduler, 8 seeded sequences at once with top_k from 2 to 64, the llama
// fixture on the direct result path and qwen2 (50k vocabulary) on the
// staging one: with chains that draw from the device's top k (forced on
// lavapipe, whose default is whole rows: DeviceTopK), with chains that ask
// for log-probabilities and so sample read-back rows, and with the
// device's top k off. The tokens are the same; the first run draws every
// token from the top k and reads back k ids and logits per token (the
// step's largest k), the others none.
func TestSchedulerTopKSampling(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	dir := fixtures.Dir(t, "models")
	// Each fixture on one result path (the pairs cost CI time; the
	// kernel's rows are checked on both paths by TestForwardTopK).
	for i, file := range []string{"llama-spm-256x4-q8_0.gguf", "qwen2-gpt2-256x4-q8_0.gguf"} {
		for _, p := range paths[i : i+1] {
			t.Run(file+"/"+p.name, func(t *testing.T) {
				m, err := Load(filepath.Join(dir, file), Config{CtxSize: 64, Parallel: 8, BatchSize: 32, Validation: true, ForceStaging: p.staging})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				if cpu := m.Device().Info().Type == vk.TypeCPU; m.GPU.DeviceTopK() == cpu {
					t.Errorf("DeviceTopK() = %v on a %v device, want %v", m.GPU.DeviceTopK(), m.Device().Info().Type, !cpu)
				}
				const n, maxTokens = 8, 16
				topKs := []int{40, 2, 64, 10, 40, 33, 5, 64}
				var got [3][][]int32
				var stats [3]Stats
				for run, logprobs := range []bool{false, true, false} {
					topK := PathOff
					if run < 2 {
						topK = PathOn
					}
					s := NewScheduler(m, SchedulerConfig{DeviceTopK: topK})
					reqs := make([]GenRequest, n)
					for i := range reqs {
						prompt := testPrompt(m, i, 2+3*i)
						reqs[i] = GenRequest{Prompt: prompt, MaxTokens: maxTokens, Logprobs: logprobs,
							Chain: sampledChain(t, m, prompt, int64(100+i), topKs[i], logprobs)}
					}
					got[run] = runAll(t, s, reqs)
					stats[run] = s.Stats()
					s.Close()
				}
				total := 0
				for i := range n {
					for run := 1; run < 3; run++ {
						if !slices.Equal(got[0][i], got[run][i]) {
							t.Errorf("sequence %d (top_k %d): the device's top k gave %v, sampling the rows (run %d) %v", i, topKs[i], got[0][i], run, got[run][i])
						}
					}
					total += len(got[0][i])
				}
				if stats[0].TopKRows != int64(total) || stats[0].ArgmaxRows != 0 {
					t.Errorf("top-k run: %d top-k rows and %d argmax rows for %d tokens, want %d and 0", stats[0].TopKRows, stats[0].ArgmaxRows, total, total)
				}
				if max := int64(total * 8 * ops.MaxTopK); stats[0].ReadBytes > max || stats[0].ReadBytes < int64(total*8*2) {
					t.Errorf("top-k run: %d bytes read back for %d tokens, want between %d and %d", stats[0].ReadBytes, total, total*16, max)
				}
				for run := 1; run < 3; run++ {
					if stats[run].TopKRows != 0 || stats[run].ReadBytes < int64(total*m.Opts.Vocab*4) {
						t.Errorf("run %d: %d top-k rows and %d bytes read back, want 0 and whole rows", run, stats[run].TopKRows, stats[run].ReadBytes)
					}
				}
				vktest.Check(t, m.Device())
			})
		}
	}
}
