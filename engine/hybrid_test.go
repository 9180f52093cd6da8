package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkllm/vkllm/internal/fixtures"
	"github.com/vkllm/vkllm/sampling"
	"github.com/vkllm/vkllm/vk/vktest"
)

// hybridModel loads the Qwen3.5 fixture (a hybrid: Gated DeltaNet layers
// with recurrent state, and full-attention layers) with slots slots.
func hybridModel(t *testing.T, slots, batch int) *Model {
	t.Helper()
	return hybridModelConfig(t, Config{CtxSize: 160, Parallel: slots, BatchSize: batch, Validation: true})
}

func hybridModelConfig(t *testing.T, cfg Config) *Model {
	t.Helper()
	path := filepath.Join(fixtures.Dir(t, "archs-next"), "hybrid", "qwen35-spm-256x8-q8_0.gguf")
	m, err := Load(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestHybridChunks feeds one prompt in chunks of 1, 7, 64 and whole: the
// recurrent states carried between passes give the last token the same
// logits (the CPU reference's, within f32 rounding) however it is cut,
// with the delta rule's token-by-token kernel and with its chunked one
// for the passes of 32 rows and more.
func TestHybridChunks(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	for _, chunked := range []Path{PathOff, PathOn} {
		t.Run(fmt.Sprintf("chunked=%v", chunked == PathOn), func(t *testing.T) {
			checkHybridChunks(t, chunked)
		})
	}
}

// checkHybridChunks is TestHybridChunks with the delta rule's chunked
// kernel for prompt-shaped passes on or off.
func checkHybridChunks(t *testing.T, chunked Path) {
	m := hybridModelConfig(t, Config{CtxSize: 160, Parallel: 1, BatchSize: 128, Validation: true, chunkedDelta: chunked})
	prompt := testPrompt(m, 2, 100)
	cpu, err := NewCPUModel(m.Opts, mustWeights(t, m), m.CtxSize(), 1)
	if err != nil {
		t.Fatal(err)
	}
	want, err := cpu.Forward(promptBatch(prompt, 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, chunk := range []int{1, 7, 64, len(prompt)} {
		if err := m.Blocks.Truncate(0, 0); err != nil {
			t.Fatal(err)
		}
		var got []float32
		for off := 0; off < len(prompt); off += chunk {
			b := seqBatch(prompt[off:min(off+chunk, len(prompt))], 0, off)
			if off+b.Len() == len(prompt) {
				b.Out[b.Len()-1] = RowOut{Kind: OutLogits}
			}
			if got, err = m.Forward(b); err != nil {
				t.Fatalf("chunks of %d, at %d: %v", chunk, off, err)
			}
		}
		if e := maxRelError(got, want); e > 1e-3 {
			t.Errorf("chunks of %d: last logits differ from the CPU reference's whole prompt by %.3g (relative)", chunk, e)
		}
	}
	vktest.Check(t, m.Device())
}

// TestHybridPositions checks that a hybrid model's slot continues only
// from its length or starts again at position 0: a row that would skip or
// rewrite positions of the recurrent state is an error naming it, and
// nothing changes.
func TestHybridPositions(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	m := hybridModel(t, 2, 16)
	prompt := testPrompt(m, 1, 12)
	if _, err := m.Prefill(context.Background(), 0, 0, prompt); err != nil {
		t.Fatal(err)
	}
	if !m.Blocks.Recurrent() {
		t.Fatal("the hybrid model's slots report no recurrent state")
	}
	for _, pos := range []int{5, 11} { // a rewrite inside the prompt, of its last token
		_, err := m.Step(0, pos, 7)
		if err == nil || !strings.Contains(err.Error(), "recurrent state holds 12 positions") {
			t.Errorf("a row at %d of a slot of 12: %v, want an error naming the recurrent state", pos, err)
		}
	}
	if m.Blocks.Len(0) != 12 {
		t.Errorf("after the refused rows the slot holds %d positions, want 12", m.Blocks.Len(0))
	}
	// Cutting the slot back loses the state: only position 0 continues.
	if err := m.Blocks.Truncate(0, 6); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(0, 6, 7); err == nil {
		t.Error("a row continuing a slot cut back below its recurrent state: no error")
	}
	if _, err := m.Prefill(context.Background(), 0, 0, prompt[:3]); err != nil {
		t.Errorf("starting the slot again at 0: %v", err)
	}
	// Rows of one slot apart in a batch are refused.
	b := Batch{Tokens: []int32{5, 6, 7}, Slots: []int32{1, 0, 1}, Pos: []int32{0, 3, 1}, Out: []RowOut{{}, {}, {Kind: OutLogits}}}
	if _, err := m.Forward(b); err == nil || !strings.Contains(err.Error(), "consecutive") {
		t.Errorf("a batch with slot 1's rows apart: %v, want an error", err)
	}
}

// TestHybridScheduler runs 16 hybrid sequences at once (prompts of 3 to
// 78 tokens fed in chunks of 8 beside the others' decode rows): each
// equals its run alone.
func TestHybridScheduler(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	m := hybridModel(t, 16, 32)
	prompts := make([][]int32, 16)
	for i := range prompts {
		prompts[i] = testPrompt(m, i%5, 3+5*i) // some share their start
	}
	checkTogetherMatchesSolo(t, m, prompts, 10)
}

// TestHybridCandidates runs n seeded candidates of one prompt on a hybrid
// model: each equals the same seed run alone, whether a candidate took its
// leader's copied state or fed the prompt itself.
func TestHybridCandidates(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	m := hybridModel(t, 4, 32)
	checkCandidates(t, m, testPrompt(m, 3, 40), SchedulerConfig{PrefillChunk: 16})
}

// TestHybridStateCopy checks the copy of a leader's recurrent state to a
// follower (Blocks.CopyPrefix at the leader's whole length): the follower
// continues exactly as the leader does.
func TestHybridStateCopy(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	m := hybridModel(t, 2, 64)
	prompt := testPrompt(m, 4, 30)
	if _, err := m.Prefill(context.Background(), 0, 0, prompt); err != nil {
		t.Fatal(err)
	}
	if err := m.Blocks.CopyPrefix(1, 0, len(prompt)); err != nil {
		t.Fatal(err)
	}
	a, err := m.Step(0, len(prompt), 9)
	if err != nil {
		t.Fatal(err)
	}
	a = append([]float32(nil), a...)
	b, err := m.Step(1, len(prompt), 9)
	if err != nil {
		t.Fatal(err)
	}
	if e := maxRelError(b, a); e > 1e-5 {
		t.Errorf("the follower's step differs from the leader's by %.3g", e)
	}
	// A copy shorter than the leader's state leaves the follower none.
	if err := m.Blocks.CopyPrefix(1, 0, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Step(1, 10, 9); err == nil {
		t.Error("a follower of a shorter prefix continued a recurrent state it does not have")
	}
	vktest.Check(t, m.Device())
}

// TestHybridCancel cancels 100 hybrid requests at random points (seeded;
// the seed is printed): afterwards every slot and KV page is free, and a
// new request equals its run alone (no state of a cancelled one leaks).
func TestHybridCancel(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	m := hybridModel(t, 4, 32)
	prompt := testPrompt(m, 1, 20)
	want := soloGenerate(t, m, prompt, sampling.RandomSeed, 8)
	m.Blocks.Truncate(0, 0)
	s := NewScheduler(m, SchedulerConfig{PrefillChunk: 8})
	defer s.Close()
	const seed = 30
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	var wg sync.WaitGroup
	for i := range 100 {
		ctx, cancel := context.WithCancel(context.Background())
		delay := time.Duration(rng.IntN(4000)) * time.Microsecond
		p := testPrompt(m, i, 5+i%40)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			g, err := s.Generate(ctx, []GenRequest{{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: 40}})
			if err != nil {
				return
			}
			time.AfterFunc(delay, cancel)
			r := collect(g)
			if r.err != nil && !errors.Is(r.err, context.Canceled) {
				t.Errorf("request %d: %v", i, r.err)
			}
		}()
		if i%10 == 9 {
			wg.Wait()
		}
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Active != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := s.Stats(); st.Active != 0 || st.Queued != 0 {
		t.Fatalf("after 100 cancellations: %d active, %d queued", st.Active, st.Queued)
	}
	if kv := m.Blocks.Stats(); kv.Used != 0 {
		t.Errorf("after 100 cancellations %d KV pages are held by sequences", kv.Used)
	}
	g, err := s.Generate(context.Background(), []GenRequest{{Prompt: prompt, Chain: newChain(t, m, prompt, sampling.RandomSeed), MaxTokens: 8, Logprobs: true}})
	if err != nil {
		t.Fatal(err)
	}
	compareRuns(t, "after the cancellations", collect(g), want)
	vktest.Check(t, m.Device())
}

// TestHybridCheckpoints serves prompts that share a 200-token start (a
// system prompt) on a hybrid model with the CPU reference checking every
// pass (Config.Verify, its states copied alike): the first prompt's chunks
// end on checkpoint positions (every 64) and save the recurrent state
// there; the later prompts resume from the longest checkpoint of their
// start (192 tokens) with the prefix cache's pages, and each equals its run
// alone.
func TestHybridCheckpoints(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	m := hybridModelConfig(t, Config{CtxSize: 256, Parallel: 4, BatchSize: 128, Validation: true, Verify: true})
	system := testPrompt(m, 6, 200)
	prompts := make([][]int32, 5)
	want := make([]genResult, len(prompts))
	for i := range prompts {
		prompts[i] = append(append([]int32(nil), system...), testPrompt(m, 10+i, 5+3*i)...)
		want[i] = soloGenerate(t, m, prompts[i], sampling.RandomSeed, 6)
	}
	m.Blocks.Truncate(0, 0)
	if every := m.Blocks.CheckpointEvery(); every != 64 {
		t.Fatalf("checkpoints every %d positions, want 64", every)
	}
	s := NewScheduler(m, SchedulerConfig{})
	defer s.Close()
	run := func(i int) genResult {
		g, err := s.Generate(context.Background(), []GenRequest{{Prompt: prompts[i], Chain: newChain(t, m, prompts[i], sampling.RandomSeed), MaxTokens: 6, Logprobs: true}})
		if err != nil {
			t.Fatal(err)
		}
		return collect(g)
	}
	compareRuns(t, "the first prompt", run(0), want[0])
	if st := s.Stats(); st.ReusedTokens != 0 {
		t.Fatalf("the first prompt reused %d tokens", st.ReusedTokens)
	}
	got := make([]genResult, len(prompts))
	var wg sync.WaitGroup
	for i := 1; i < len(prompts); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = run(i)
		}()
	}
	wg.Wait()
	for i := 1; i < len(prompts); i++ {
		compareRuns(t, fmt.Sprintf("prompt %d", i), got[i], want[i])
	}
	if st, most := s.Stats(), int64(4*192); st.ReusedTokens != most {
		t.Errorf("the later prompts reused %d tokens, want %d (four times the 192 of the last checkpoint of their shared start)", st.ReusedTokens, most)
	}
	vktest.Check(t, m.Device())
}
