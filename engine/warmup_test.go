package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/vkllm/vkllm/sampling"
	"github.com/vkllm/vkllm/vk/vktest"
)

// TestWarmUpCoversShapes: after WarmUp, prompts of any length (fed in
// chunks of any size) and any number of concurrent streams, sampled
// greedily, from the top k or with logprobs, dispatch no pipeline for the
// first time (on lavapipe: compile nothing on the request path), on a
// decoder and on an encoder. The devices' top-k path is forced on, so the
// GPUs' variants are covered too.
func TestWarmUpCoversShapes(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	for _, arch := range []string{"llama", "bert", "qwen3moe"} {
		t.Run(arch, func(t *testing.T) {
			m := schedModel(t, arch, 16, 48)
			s := NewScheduler(m, SchedulerConfig{DeviceTopK: PathOn})
			defer s.Close()
			dev := m.GPU.dev
			calls, last := 0, 0
			if err := s.WarmUp(context.Background(), func(done, total int) { calls, last = done, total }); err != nil {
				t.Fatal(err)
			}
			if calls == 0 || calls != last {
				t.Errorf("progress reached %d of %d, want every group", calls, last)
			}
			warm := dev.FirstDispatches()
			if warm == 0 {
				t.Fatal("the warm-up dispatched nothing")
			}
			check := func(what string) {
				t.Helper()
				if d := dev.FirstDispatches(); d != warm {
					t.Fatalf("%s: %d pipelines dispatched for the first time after the warm-up", what, d-warm)
				}
			}
			if st := s.Stats(); !m.Opts.Encoder && (st.ArgmaxRows == 0 || st.TopKRows == 0) {
				t.Errorf("the warm-up chose %d tokens by the device's argmax and %d by its top k, want both paths run", st.ArgmaxRows, st.TopKRows)
			}
			kinds := []func(*sampling.Params){
				func(p *sampling.Params) { p.Temperature, p.Logprobs = 0, false },
				func(p *sampling.Params) { p.Temperature, p.TopK, p.Logprobs = 0.8, 7, false },
				func(p *sampling.Params) { p.Temperature, p.TopK, p.Logprobs = 1, 0, true },
			}
			run := func(streams, plen int) {
				t.Helper()
				if m.Opts.Encoder {
					for i := range streams {
						if _, err := s.Embed(context.Background(), testPrompt(m, i, plen)); err != nil {
							t.Fatal(err)
						}
					}
					return
				}
				var reqs []GenRequest
				for i := range streams {
					p := testPrompt(m, i+31*plen, plen)
					reqs = append(reqs, GenRequest{Prompt: p, MaxTokens: 3, Logprobs: i%3 == 2,
						Chain: newChainParams(t, m, p, int64(i), kinds[i%3])})
				}
				runAll(t, s, reqs)
			}
			longest := 90 // prompts in chunks, past the batch of 48
			if m.Opts.Encoder {
				longest = 48 // an encoder reads a sequence in one batch
			}
			for plen := 1; plen <= longest; plen += 7 {
				run(1, plen)
				check(fmt.Sprintf("a prompt of %d tokens", plen))
			}
			for n := 1; n <= 16; n++ {
				run(n, 2+n%5)
				check(fmt.Sprintf("%d streams", n))
			}
			if st := s.Stats(); !m.Opts.Encoder && (st.ArgmaxRows == 0 || st.TopKRows == 0) {
				t.Errorf("the sweep chose %d tokens by the device's argmax and %d by its top k, want both paths checked", st.ArgmaxRows, st.TopKRows)
			}
			vktest.Check(t, m.Device())
		})
	}
}
