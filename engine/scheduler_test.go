package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vkllm/vkllm/gguf"
	"github.com/vkllm/vkllm/sampling"
	"github.com/vkllm/vkllm/tools/modelgen"
	"github.com/vkllm/vkllm/vk/vktest"
)

// schedModel loads a generated model of arch with slots sequence slots.
func schedModel(t *testing.T, arch string, slots, batch int) *Model {
	t.Helper()
	path := genModel(t, modelgen.Options{Arch: arch, Embd: 64, Layers: 2, Type: gguf.TypeQ8_0})
	m, err := Load(path, Config{CtxSize: 96, Parallel: slots, BatchSize: batch, Validation: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// newChain returns a primed chain: greedy when seed is RandomSeed, else
// temperature 1 with top_k 20 seeded with seed.
func newChain(t *testing.T, m *Model, prompt []int32, seed int64) *sampling.Chain {
	t.Helper()
	return newChainParams(t, m, prompt, seed, nil)
}

// endlessChain is newChain's greedy chain with the end-of-generation tokens
// banned, for sequences that must run to MaxTokens.
func endlessChain(t *testing.T, m *Model, prompt []int32) *sampling.Chain {
	t.Helper()
	return newChainParams(t, m, prompt, sampling.RandomSeed, func(p *sampling.Params) {
		p.LogitBias = map[string]float64{}
		for _, id := range m.Tok.EOGIDs() {
			p.LogitBias[fmt.Sprint(id)] = math.Inf(-1)
		}
	})
}

func newChainParams(t *testing.T, m *Model, prompt []int32, seed int64, edit func(*sampling.Params)) *sampling.Chain {
	t.Helper()
	p := sampling.DefaultParams()
	p.Temperature, p.Logprobs = 0, true
	if seed != sampling.RandomSeed {
		p.Temperature, p.TopK, p.Seed = 1, 20, seed
	}
	if edit != nil {
		edit(&p)
	}
	c, err := sampling.NewChain(p, sampling.Vocab{Size: m.Opts.Vocab, EOG: m.Tok.EOGIDs()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Prime(prompt); err != nil {
		t.Fatal(err)
	}
	return c
}

type genResult struct {
	tokens   []int32
	logprobs []float32
	err      error
}

// soloGenerate is the reference: the prompt prefilled in slot 0 and one
// token per Step, no scheduler, nothing else running.
func soloGenerate(t *testing.T, m *Model, prompt []int32, seed int64, maxTokens int) genResult {
	t.Helper()
	if err := m.Blocks.Truncate(0, 0); err != nil {
		t.Fatal(err)
	}
	c := newChain(t, m, prompt, seed)
	logits, err := m.Prefill(context.Background(), 0, 0, prompt)
	if err != nil {
		t.Fatal(err)
	}
	var r genResult
	for pos := len(prompt); ; pos++ {
		id, err := c.Sample(logits)
		if err != nil {
			t.Fatal(err)
		}
		c.Accept(id)
		lp, _ := c.Logprob(id)
		r.tokens, r.logprobs = append(r.tokens, id), append(r.logprobs, lp)
		if m.Tok.IsEOG(id) || len(r.tokens) == maxTokens {
			return r
		}
		if pos >= m.CtxSize() {
			r.err = ErrContextFull
			return r
		}
		if logits, err = m.Step(0, pos, id); err != nil {
			t.Fatal(err)
		}
	}
}

// collectAll drains g: each candidate's tokens and error.
func collectAll(g *Group) []genResult {
	rs := make([]genResult, len(g.Seqs()))
	for ev := range g.Events() {
		r := &rs[ev.Candidate]
		if ev.End {
			r.err = g.Seqs()[ev.Candidate].Err()
			continue
		}
		r.tokens, r.logprobs = append(r.tokens, ev.Token), append(r.logprobs, ev.Logprob)
	}
	return rs
}

// collect drains g, a group of one candidate.
func collect(g *Group) genResult { return collectAll(g)[0] }

// testPrompt returns a prompt of n tokens that differs with i.
func testPrompt(m *Model, i, n int) []int32 {
	p := make([]int32, n)
	for j := range p {
		p[j] = int32(3 + (i*7+j*13)%(m.Opts.Vocab-3))
	}
	return p
}

// logprobBound is how far a token's log-probability may move when its row
// runs in another batch: the matrix kernels differ with the batch's width
// (matvec passes or tiles), so f32 sums are ordered differently.
const logprobBound = 2e-3

func compareRuns(t *testing.T, what string, got, want genResult) {
	t.Helper()
	if !errors.Is(got.err, want.err) {
		t.Errorf("%s: error %v, want %v", what, got.err, want.err)
	}
	if fmt.Sprint(got.tokens) != fmt.Sprint(want.tokens) {
		t.Errorf("%s: tokens %v, want (alone) %v", what, got.tokens, want.tokens)
		return
	}
	for i := range got.logprobs {
		if d := math.Abs(float64(got.logprobs[i] - want.logprobs[i])); d > logprobBound {
			t.Errorf("%s: token %d logprob %v, want %v (alone), differ by %.2g", what, i, got.logprobs[i], want.logprobs[i], d)
		}
	}
}

// TestSchedulerMatchesSolo runs 16 greedy sequences of different prompt
// lengths through the scheduler at once and checks each against the same
// sequence run alone, for every architecture (qwen3moe, gpt-oss: the rows
// of a step route to different experts, an expert's rows share its passes).
func TestSchedulerMatchesSolo(t *testing.T) {
	t.Parallel() // a heavy test: see "Parallel tests" in gpu_test.go
	for _, arch := range []string{"llama", "qwen2", "qwen3", "qwen3moe", "gpt-oss"} {
		t.Run(arch, func(t *testing.T) {
			m := schedModel(t, arch, 16, 32)
			prompts := make([][]int32, 16)
			for i := range prompts {
				prompts[i] = testPrompt(m, i, 3+5*i) // 3..78 tokens: some span several chunks
			}
			checkTogetherMatchesSolo(t, m, prompts, 12)
		})
	}
}

// checkTogetherMatchesSolo runs prompts at once through a scheduler (prompt
// chunks of 8 beside the others' decode rows), greedy for maxTokens each,
// and requires each to equal its run alone, and the steps to be shared.
func checkTogetherMatchesSolo(t *testing.T, m *Model, prompts [][]int32, maxTokens int) {
	t.Helper()
	n := len(prompts)
	want := make([]genResult, n)
	for i := range prompts {
		want[i] = soloGenerate(t, m, prompts[i], sampling.RandomSeed, maxTokens)
	}
	m.Blocks.Truncate(0, 0)
	s := NewScheduler(m, SchedulerConfig{PrefillChunk: 8})
	defer s.Close()
	got := make([]genResult, n)
	var wg sync.WaitGroup
	for i := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := s.Generate(context.Background(), []GenRequest{{Prompt: prompts[i], Chain: newChain(t, m, prompts[i], sampling.RandomSeed), MaxTokens: maxTokens, Logprobs: true}})
			if err != nil {
				got[i].err = err
				return
			}
			got[i] = collect(g)
		}()
	}
	wg.Wait()
	for i := range got {
		compareRuns(t, fmt.Sprintf("sequence %d", i), got[i], want[i])
	}
	st := s.Stats()
	if st.Active != 0 || st.Queued != 0 {
		t.Errorf("after all finished: %d active, %d queued", st.Active, st.Queued)
	}
	if st.Steps >= int64(n*maxTokens) {
		t.Errorf("%d steps for %d sequences of %d tokens: they did not run together", st.Steps, n, maxTokens)
	}
	vktest.Check(t, m.Device())
}

// TestSchedulerCandidates runs n seeded candidates of one prompt: the
// prompt is fed once (the others copy its keys and values and feed only
// its last token) and each candidate equals the same seed run alone.
func TestSchedulerCandidates(t *testing.T) {
	m := schedModel(t, "llama", 4, 32)
	prompt := len(testPrompt(m, 1, 40))
	st := checkCandidates(t, m, testPrompt(m, 1, 40), SchedulerConfig{})
	const n = 4 // checkCandidates'
	if wantRows := int64(prompt + n - 1); st.PrefillRows != wantRows {
		t.Errorf("prompt rows fed: %d, want %d (the prompt once, then its last token per other candidate)", st.PrefillRows, wantRows)
	}
	if wantReused := int64((n - 1) * (prompt - 1)); st.ReusedTokens != wantReused {
		t.Errorf("reused prompt tokens: %d, want %d", st.ReusedTokens, wantReused)
	}
}

// checkCandidates generates 4 candidates of prompt (seeds 100..103, 10
// tokens, log-probabilities) as one request on a scheduler of cfg and
// checks each against its run alone; it returns the scheduler's stats.
func checkCandidates(t *testing.T, m *Model, prompt []int32, cfg SchedulerConfig) Stats {
	t.Helper()
	const n, maxTokens = 4, 10
	want := make([]genResult, n)
	for i := range want {
		want[i] = soloGenerate(t, m, prompt, int64(100+i), maxTokens)
	}
	// The solo runs left the prompt in slot 0's cache: Truncate empties
	// it, so the scheduler, which trusts only positions the model holds,
	// starts from nothing.
	m.Blocks.Truncate(0, 0)
	s := NewScheduler(m, cfg)
	defer s.Close()
	reqs := make([]GenRequest, n)
	for i := range reqs {
		reqs[i] = GenRequest{Prompt: prompt, Chain: newChain(t, m, prompt, int64(100+i)), MaxTokens: maxTokens, Logprobs: true}
	}
	g, err := s.Generate(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	got := collectAll(g)
	for i := range got {
		compareRuns(t, fmt.Sprintf("candidate %d", i), got[i], want[i])
	}
	vktest.Check(t, m.Device())
	return s.Stats()
}

// TestSchedulerEmbed checks an embedding that runs beside generations
// against the CPU reference's mean of the final hidden states.
func TestSchedulerEmbed(t *testing.T) {
	m := schedModel(t, "qwen2", 3, 16)
	tokens := testPrompt(m, 5, 37)
	cpuRef, err := NewCPUModel(m.Opts, mustWeights(t, m), m.CtxSize(), 1)
	if err != nil {
		t.Fatal(err)
	}
	b := seqBatch(tokens, 0, 0)
	h, err := cpuRef.Hidden(b)
	if err != nil {
		t.Fatal(err)
	}
	E := m.Opts.Embd
	want := make([]float64, E)
	for r := range len(tokens) {
		for j := range E {
			want[j] += float64(h[r*E+j]) / float64(len(tokens))
		}
	}
	s := NewScheduler(m, SchedulerConfig{PrefillChunk: 4})
	defer s.Close()
	// Two generations keep decoding while the embedding is fed.
	var gs []*Group
	for i := range 2 {
		p := testPrompt(m, i, 5)
		g, err := s.Generate(context.Background(), []GenRequest{{Prompt: p, Chain: newChain(t, m, p, sampling.RandomSeed), MaxTokens: 60}})
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	got, err := s.Embed(context.Background(), tokens)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for j := range E {
		worst = math.Max(worst, math.Abs(float64(got[j])-want[j]))
	}
	if worst > 2e-3 {
		t.Errorf("embedding differs from the CPU reference by %.3g", worst)
	}
	for _, g := range gs {
		if r := collect(g); r.err != nil {
			t.Error(r.err)
		}
	}
	vktest.Check(t, m.Device())
}

func mustWeights(t *testing.T, m *Model) *Weights {
	t.Helper()
	w, err := LoadWeights(m.File, m.Opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestSchedulerCancel cancels a queued and a running sequence: both end
// with the context's error, their slots are free for the next request, and
// a sequence's own Cancel ends only that one.
func TestSchedulerCancel(t *testing.T) {
	m := schedModel(t, "llama", 2, 16)
	s := NewScheduler(m, SchedulerConfig{})
	defer s.Close()
	gen := func(ctx context.Context, i, max int) *Group {
		p := testPrompt(m, i, 4)
		g, err := s.Generate(ctx, []GenRequest{{Prompt: p, Chain: newChain(t, m, p, sampling.RandomSeed), MaxTokens: max}})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	ctx, cancel := context.WithCancel(context.Background())
	running := []*Group{gen(ctx, 0, 90), gen(context.Background(), 1, 90)}
	queued := gen(ctx, 2, 90) // both slots are taken
	<-running[0].Events()     // running
	cancel()
	for _, g := range []*Group{running[0], queued} {
		if r := collect(g); !errors.Is(r.err, context.Canceled) {
			t.Errorf("cancelled sequence ended with %v, want context.Canceled", r.err)
		}
	}
	<-running[1].Events()
	running[1].Seqs()[0].Cancel()
	if r := collect(running[1]); !errors.Is(r.err, context.Canceled) {
		t.Errorf("Sequence.Cancel: ended with %v", r.err)
	}
	// Both slots are free again: two new sequences run to the end.
	a, b := gen(context.Background(), 3, 5), gen(context.Background(), 4, 5)
	for _, g := range []*Group{a, b} {
		if r := collect(g); r.err != nil || len(r.tokens) == 0 {
			t.Errorf("after cancellations: %d tokens, %v", len(r.tokens), r.err)
		}
	}
	if st := s.Stats(); st.Active != 0 || st.Queued != 0 {
		t.Errorf("%d active and %d queued after everything ended", st.Active, st.Queued)
	}
	vktest.Check(t, m.Device())
}

// TestSchedulerChunkedPrefill drives steps by hand: while sequences
// decode, a long prompt is fed PrefillChunk tokens per step and every
// decoding sequence gets a row in every step.
func TestSchedulerChunkedPrefill(t *testing.T) {
	m := schedModel(t, "llama", 3, 32)
	s := newScheduler(m, SchedulerConfig{PrefillChunk: 5})
	defer func() { close(s.quit); s.shutdown(); close(s.jobs) }()
	var decoding []*Group
	for i := range 2 {
		p := testPrompt(m, i, 3)
		g, err := s.Generate(context.Background(), []GenRequest{{Prompt: p, Chain: newChain(t, m, p, sampling.RandomSeed), MaxTokens: 40}})
		if err != nil {
			t.Fatal(err)
		}
		decoding = append(decoding, g)
	}
	s.admit()
	if !s.step() || s.batch.Len() != 6 {
		t.Fatalf("first step: %d rows, want both prompts (6)", s.batch.Len())
	}
	long := testPrompt(m, 9, 23)
	lg, err := s.Generate(context.Background(), []GenRequest{{Prompt: long, Chain: newChain(t, m, long, sampling.RandomSeed), MaxTokens: 3}})
	if err != nil {
		t.Fatal(err)
	}
	s.admit()
	for fed := 0; fed < len(long); fed += 5 {
		if !s.step() {
			t.Fatal("step ran nothing")
		}
		if want := 2 + min(5, len(long)-fed); s.batch.Len() != want {
			t.Fatalf("step with %d prompt tokens fed: %d rows, want %d (2 decode rows and a chunk of at most 5)", fed, s.batch.Len(), want)
		}
	}
	for _, g := range decoding {
		if n := len(g.Events()); n != 1+(len(long)+4)/5 {
			t.Errorf("decoding sequence got %d tokens over %d steps", n, 1+(len(long)+4)/5)
		}
	}
	if len(lg.Events()) != 1 {
		t.Errorf("the long prompt's first token: %d events, want 1", len(lg.Events()))
	}
}

// TestSchedulerStepAllocs holds a decode step of several sequences (the
// forward pass, sampling on the workers, the events) to zero allocations.
func TestSchedulerStepAllocs(t *testing.T) {
	m := schedModel(t, "llama", 4, 16)
	s := newScheduler(m, SchedulerConfig{})
	defer func() { close(s.quit); s.shutdown(); close(s.jobs) }()
	var qs []*Sequence
	for i := range 4 {
		p := testPrompt(m, i, 3)
		g, err := s.Generate(context.Background(), []GenRequest{{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: 80, Logprobs: true, TopLogprobs: 3}})
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, g.Seqs()...)
	}
	s.admit()
	s.step() // the prompts, and pipelines and descriptor sets are created
	s.step()
	drain := func() {
		for _, q := range qs {
			for len(q.grp.events) > 0 {
				<-q.grp.events
			}
		}
	}
	used := m.KV().Used
	// 21 steps from position 4: every sequence takes a new KV page at
	// position 16 within them.
	allocs := testing.AllocsPerRun(20, func() {
		if !s.step() || s.batch.Len() != 4 {
			t.Fatalf("a decode step ran %d rows, want 4", s.batch.Len())
		}
		drain()
	})
	if allocs != 0 {
		t.Errorf("a decode step of 4 sequences: %v allocations, want 0", allocs)
	}
	if got := m.KV().Used; got != used+4 {
		t.Errorf("KV pages in use went from %d to %d during the measured steps, want %d (a new page each)", used, got, used+4)
	}
	if len(s.active) != 4 {
		t.Errorf("%d sequences still running, want 4 (did one fail?)", len(s.active))
	}
}

// TestSchedulerSlowConsumer: a sequence whose consumer does not read sits
// out steps once its buffer is full, and the others finish.
func TestSchedulerSlowConsumer(t *testing.T) {
	m := schedModel(t, "llama", 2, 16)
	s := newScheduler(m, SchedulerConfig{})
	s.eventCap = 4
	s.run()
	defer s.Close()
	p := testPrompt(m, 0, 3)
	stalled, err := s.Generate(context.Background(), []GenRequest{{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: 50}})
	if err != nil {
		t.Fatal(err)
	}
	p2 := testPrompt(m, 1, 3)
	other, err := s.Generate(context.Background(), []GenRequest{{Prompt: p2, Chain: endlessChain(t, m, p2), MaxTokens: 30}})
	if err != nil {
		t.Fatal(err)
	}
	if r := collect(other); r.err != nil || len(r.tokens) != 30 {
		t.Fatalf("the reading sequence: %d tokens, %v; want 30", len(r.tokens), r.err)
	}
	if n := len(stalled.Events()); n != 4 {
		t.Errorf("the stalled sequence has %d events waiting, want its buffer's 4", n)
	}
	if st := s.Stats(); st.Active != 1 {
		t.Errorf("%d sequences active, want the stalled one", st.Active)
	}
	stalled.Seqs()[0].Cancel()
	deadline := time.After(time.Minute)
	for range stalled.Events() {
		select {
		case <-deadline:
			t.Fatal("the stalled sequence did not end after Cancel")
		default:
		}
	}
	if !errors.Is(stalled.Seqs()[0].Err(), context.Canceled) {
		t.Errorf("stalled sequence: %v", stalled.Seqs()[0].Err())
	}
}

// TestStepCost checks the automatic prefill chunk against step times
// given by hand.
func TestStepCost(t *testing.T) {
	var c stepCost
	if got := c.chunk(1.5); got != 0 {
		t.Errorf("chunk before any step = %d, want 0 (a decode-only step measures the decode time first)", got)
	}
	c.observe(0, 100, 50*time.Millisecond) // a prompt-only step
	if got := c.chunk(1.5); got != 0 {
		t.Errorf("chunk before any decode-only step = %d, want 0", got)
	}
	c.observe(2, 0, 10*time.Millisecond)
	if got := c.chunk(1.5); got != 10 {
		t.Errorf("chunk(1.5) after one decode-only step of 10 ms, guessing 0.5 ms per row from the prompt-only step = %d, want 10", got)
	}
	c = stepCost{}
	c.observe(2, 0, 10*time.Millisecond)
	if got := c.chunk(1.5); got != minAutoChunk {
		t.Errorf("chunk with no prompt rows seen = %d, want %d", got, minAutoChunk)
	}
	for range 50 {
		c.observe(2, 0, 10*time.Millisecond)  // decode-only steps: 10 ms
		c.observe(2, 20, 30*time.Millisecond) // 20 prompt rows add 20 ms
	}
	if got := c.chunk(1.5); got != 5 {
		t.Errorf("chunk(1.5) with 10 ms decode steps and 1 ms per prompt row = %d, want 5", got)
	}
	if got := c.chunk(3); got != 20 {
		t.Errorf("chunk(3) = %d, want 20", got)
	}
	if got := c.aloneChunk(100 * time.Millisecond); got != 0 {
		t.Errorf("aloneChunk before any prompt-only step = %d, want 0 (no bound)", got)
	}
	for range 50 {
		c.observe(0, 100, 50*time.Millisecond) // prompt-only steps: 0.5 ms a row
	}
	if got := c.chunk(1.5); got != 5 {
		t.Errorf("chunk(1.5) after prompt-only steps = %d, want 5 still (they run other kernels)", got)
	}
	if got := c.aloneChunk(100 * time.Millisecond); got != 200 {
		t.Errorf("aloneChunk(100 ms) with 0.5 ms per row = %d, want 200", got)
	}
	if got := c.aloneChunk(10 * time.Millisecond); got != minAloneChunk {
		t.Errorf("aloneChunk(10 ms) = %d, want the minimum %d", got, minAloneChunk)
	}
	if got := c.aloneChunk(-1); got != 0 {
		t.Errorf("aloneChunk(-1) = %d, want 0 (no bound)", got)
	}
	c.observe(2, 0, 10*time.Millisecond)
	for i := range refreshEvery - 1 {
		c.observe(2, 2, 18*time.Millisecond) // late rows of a long prompt: 4 ms each
		if i < 3 {
			continue // the moving average catches up
		}
		if got := c.chunk(1.5); got != minAutoChunk {
			t.Errorf("chunk(1.5) with 4 ms per prompt row = %d, want the minimum %d", got, minAutoChunk)
		}
	}
	c.observe(2, 2, 18*time.Millisecond)
	if got := c.chunk(1.5); got != 0 {
		t.Errorf("chunk(1.5) after %d steps with prompt rows = %d, want 0 (a decode-only step renews the decode time)", refreshEvery, got)
	}
	c.observe(2, 0, 14*time.Millisecond) // the decode steps grew dearer: 10.8 ms on average
	if got := c.chunk(3); got != 5 {
		t.Errorf("chunk(3) after a 14 ms decode-only step = %d, want 5 (2 x 10.8 ms / 4 ms)", got)
	}
}

// TestPrefillReserve checks how a step's prompt rows are split between
// the oldest waiting prompt and the others.
func TestPrefillReserve(t *testing.T) {
	for _, c := range []struct{ budget, room, remaining, wantBudget, wantReserve int }{
		{8, 100, 500, 8, 4},
		{7, 100, 500, 7, 4},
		{8, 100, 3, 8, 3}, // the oldest needs less than half
		{1, 100, 500, 2, 1},
		{1, 1, 500, 1, 1}, // no room in the batch for a second row
		{0, 100, 500, 0, 0},
	} {
		b, r := prefillReserve(c.budget, c.room, c.remaining)
		if b != c.wantBudget || r != c.wantReserve {
			t.Errorf("prefillReserve(%d, %d, %d) = %d, %d, want %d, %d", c.budget, c.room, c.remaining, b, r, c.wantBudget, c.wantReserve)
		}
	}
}

// TestSchedulerShortPromptFirst drives the steps by hand: a short prompt
// that arrives while a long one is being fed beside a decoding sequence
// goes first, within the step's chunk, and the long one keeps half of it.
func TestSchedulerShortPromptFirst(t *testing.T) {
	m := schedModel(t, "llama", 3, 16)
	s := newScheduler(m, SchedulerConfig{PrefillChunk: 4})
	defer func() { close(s.quit); s.shutdown(); close(s.jobs) }()
	gen := func(i, n int) *Sequence {
		t.Helper()
		p := testPrompt(m, i, n)
		g, err := s.Generate(context.Background(), []GenRequest{{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: 60}})
		if err != nil {
			t.Fatal(err)
		}
		s.admit()
		return g.Seqs()[0]
	}
	dec := gen(0, 3)
	s.step()
	if !dec.decoding {
		t.Fatal("a 3-token prompt alone was not fed in one step")
	}
	long := gen(1, 60)
	s.step()
	if long.fed != 4 {
		t.Fatalf("long prompt fed %d rows beside one decoding sequence, want the chunk of 4", long.fed)
	}
	short := gen(2, 3)
	s.step()
	if short.fed != 2 || long.fed != 6 {
		t.Errorf("after the short prompt's first step: short fed %d, long %d; want 2 and 6 (half the chunk each)", short.fed, long.fed)
	}
	s.step()
	if !short.decoding || long.fed != 9 {
		t.Errorf("after the second step: short decoding %v, long fed %d; want true and 9", short.decoding, long.fed)
	}
	for range 30 {
		s.step()
	}
	if !long.decoding || dec.Err() != nil || short.Err() != nil {
		t.Errorf("long prompt decoding %v after 32 more steps; errors %v %v", long.decoding, dec.Err(), short.Err())
	}
}

// TestSchedulerPromptStepTime checks that a step that only feeds prompts
// is bounded by PromptStepTime once a prompt-only step has been timed.
func TestSchedulerPromptStepTime(t *testing.T) {
	m := schedModel(t, "llama", 2, 80)
	s := newScheduler(m, SchedulerConfig{PromptStepTime: time.Nanosecond})
	defer func() { close(s.quit); s.shutdown(); close(s.jobs) }()
	p := testPrompt(m, 0, 90)
	g, err := s.Generate(context.Background(), []GenRequest{{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: 2}})
	if err != nil {
		t.Fatal(err)
	}
	q := g.Seqs()[0]
	s.admit()
	s.cost.alone = 1 // a second a row: the bound is the minimum chunk
	s.step()
	if q.fed != minAloneChunk {
		t.Errorf("first step fed %d prompt rows, want %d (PromptStepTime)", q.fed, minAloneChunk)
	}
	s.step()
	if q.fed != 90 || !q.decoding {
		t.Errorf("second step: fed %d, decoding %v; want the whole prompt", q.fed, q.decoding)
	}
}

// TestSchedulerCancelBeforeNextStep drives the steps by hand: a sequence
// cancelled between two steps is dropped, its slot freed and its channel
// closed before the next step runs, which then has only the other row.
func TestSchedulerCancelBeforeNextStep(t *testing.T) {
	m := schedModel(t, "llama", 2, 16)
	s := newScheduler(m, SchedulerConfig{})
	defer func() { close(s.quit); s.shutdown(); close(s.jobs) }()
	var qs []*Sequence
	for i := range 2 {
		p := testPrompt(m, i, 3)
		g, err := s.Generate(context.Background(), []GenRequest{{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: 50}})
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, g.Seqs()...)
	}
	s.admit()
	s.step()
	s.step()
	qs[0].Cancel()
	s.dropCancelled()
	for range qs[0].grp.events { // buffered events, then closed: never blocks
	}
	if !errors.Is(qs[0].Err(), context.Canceled) {
		t.Errorf("cancelled sequence ended with %v", qs[0].Err())
	}
	for slot, q := range s.slotSeq {
		if q == qs[0] {
			t.Errorf("slot %d still holds the cancelled sequence", slot)
		}
	}
	if !s.step() || s.batch.Len() != 1 {
		t.Errorf("the next step ran %d rows, want only the other sequence's", s.batch.Len())
	}
}

// TestSchedulerSlots steps a scheduler by hand and checks what Slots,
// Stats, Admission and OnStep report at each point against the sequences'
// known progress.
func TestSchedulerSlots(t *testing.T) {
	m := schedModel(t, "llama", 2, 16)
	type stepRec struct{ decode, prefill int }
	var steps []stepRec
	s := newScheduler(m, SchedulerConfig{OnStep: func(d time.Duration, decode, prefill int) {
		if d <= 0 {
			t.Errorf("OnStep duration %v, want > 0", d)
		}
		steps = append(steps, stepRec{decode, prefill})
	}})
	defer func() { close(s.quit); s.shutdown(); close(s.jobs) }()
	p := testPrompt(m, 0, 5)
	g, err := s.Generate(context.Background(), []GenRequest{{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: 3, Label: "req-a"}})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Queued != 1 || st.Active != 0 {
		t.Fatalf("before admit: Stats = %+v, want 1 queued", st)
	}
	s.admit()
	busy := func() (int, SlotState) {
		for i, v := range s.Slots() {
			if v.Phase != SlotIdle {
				return i, v
			}
		}
		return -1, SlotState{}
	}
	slot, v := busy()
	if want := (SlotState{Phase: SlotPrefill, Label: "req-a", Prompt: 5, MaxTokens: 3}); slot < 0 || v != want {
		t.Fatalf("after admit: slot %d = %+v, want %+v", slot, v, want)
	}
	s.step() // the whole prompt, and the first token
	_, v = busy()
	if want := (SlotState{Phase: SlotDecoding, Label: "req-a", Cached: 5, Prompt: 5, Fed: 5, Generated: 1, MaxTokens: 3}); v != want {
		t.Errorf("after the prompt's step: %+v, want %+v", v, want)
	}
	if st := s.Stats(); st.Decoding != 1 || st.CachedTokens != 5 || st.Active != 1 {
		t.Errorf("after the prompt's step: Stats = %+v, want 1 decoding, 5 cached, 1 active", st)
	}
	s.step()
	s.step() // the third token ends it
	if slot, v := busy(); slot >= 0 {
		t.Errorf("after the last token: slot %d = %+v, want every slot idle", slot, v)
	}
	// The finished sequence's slot keeps its prompt and the tokens fed after it.
	if st := s.Stats(); st.Decoding != 0 || st.Active != 0 || st.CachedTokens != 7 {
		t.Errorf("after the end: Stats = %+v, want none decoding or active, 7 cached", st)
	}
	if want := []stepRec{{0, 5}, {1, 0}, {1, 0}}; fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Errorf("OnStep saw %v, want %v", steps, want)
	}
	at, reused := g.Seqs()[0].Admission()
	if at.IsZero() || reused != 0 {
		t.Errorf("first sequence: Admission = %v, %d; want a time and 0 reused", at, reused)
	}

	// The same prompt again starts from the cache: all but its last token.
	g, err = s.Generate(context.Background(), []GenRequest{{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: 1}})
	if err != nil {
		t.Fatal(err)
	}
	s.admit()
	if _, v := busy(); v.Reused != 4 || v.Fed != 4 {
		t.Errorf("a repeated prompt: %+v, want 4 reused and fed", v)
	}
	s.step()
	if _, reused := g.Seqs()[0].Admission(); reused != 4 {
		t.Errorf("a repeated prompt: Admission reused %d, want 4", reused)
	}
}

// TestSchedulerPromptLogprobs: a PromptLogprobs sequence reports every
// prompt token after the first with the log-probability the model gives it
// at the position before, as a whole-prompt forward pass scored by
// Perplexity's logProb says, even when the same prompt is cached in a slot
// (nothing is reused: every row needs its logits) and when the prompt
// spans several steps.
func TestSchedulerPromptLogprobs(t *testing.T) {
	m := schedModel(t, "llama", 2, 32)
	prompt := testPrompt(m, 4, 80) // three steps of 32 rows
	// The reference: logits for every row, fed alone in slot 0.
	var want []float64
	var wantTop []float64 // the best token's log-probability at each position
	for off := 0; off < len(prompt); off += 32 {
		end := min(off+32, len(prompt))
		b := seqBatch(prompt[off:end], 0, off)
		for i := range b.Out {
			b.Out[i] = RowOut{Kind: OutLogits}
		}
		logits, err := m.Forward(b)
		if err != nil {
			t.Fatal(err)
		}
		V := m.Opts.Vocab
		for i := range end - off {
			if off+i+1 >= len(prompt) {
				break
			}
			row := logits[i*V : (i+1)*V]
			want = append(want, logProb(row, int(prompt[off+i+1])))
			best := 0
			for j, l := range row {
				if l > row[best] {
					best = j
				}
			}
			wantTop = append(wantTop, logProb(row, best))
		}
	}
	m.Blocks.Truncate(0, 0)
	s := NewScheduler(m, SchedulerConfig{})
	defer s.Close()
	// The same prompt generated first: its slot then caches it.
	g, err := s.Generate(context.Background(), []GenRequest{{Prompt: prompt, Chain: newChain(t, m, prompt, sampling.RandomSeed), MaxTokens: 1}})
	if err != nil {
		t.Fatal(err)
	}
	collect(g)
	c := newChainParams(t, m, prompt, sampling.RandomSeed, func(p *sampling.Params) { p.TopLogprobs = 2 })
	g, err = s.Generate(context.Background(), []GenRequest{{Prompt: prompt, Chain: c, MaxTokens: 2, Logprobs: true, TopLogprobs: 2, PromptLogprobs: true}})
	if err != nil {
		t.Fatal(err)
	}
	var got []PromptLogprob
	events := 0
	for ev := range g.Events() {
		if ev.End {
			continue
		}
		if events == 0 {
			got = ev.Prompt
		} else if ev.Prompt != nil {
			t.Errorf("event %d carries prompt logprobs too", events)
		}
		events++
	}
	if err := g.Seqs()[0].Err(); err != nil || events != 2 {
		t.Fatalf("scored sequence: %d events, %v; want 2, nil", events, err)
	}
	if _, reused := g.Seqs()[0].Admission(); reused != 0 {
		t.Errorf("scored sequence reused %d cached tokens, want 0", reused)
	}
	if len(got) != len(prompt)-1 {
		t.Fatalf("%d prompt logprobs for a prompt of %d tokens, want %d", len(got), len(prompt), len(prompt)-1)
	}
	for i, lp := range got {
		if lp.Token != prompt[i+1] || math.Abs(float64(lp.Logprob)-want[i]) > logprobBound {
			t.Errorf("prompt logprob %d = token %d %.5f, want token %d %.5f", i, lp.Token, lp.Logprob, prompt[i+1], want[i])
		}
		// The best token by value: a near-tie may swap ids across batch shapes.
		if len(lp.Top) != 2 || math.Abs(float64(lp.Top[0].Logprob)-wantTop[i]) > logprobBound || lp.Top[0].Logprob < lp.Top[1].Logprob {
			t.Errorf("prompt position %d: top %v, want 2 entries led by the best token's %.5f", i+1, lp.Top, wantTop[i])
		}
	}
}

// schedModelKV is schedModel with a KV pool of pages pages.
func schedModelKV(t *testing.T, arch string, slots, batch, pages int) *Model {
	t.Helper()
	path := genModel(t, modelgen.Options{Arch: arch, Embd: 64, Layers: 2, Type: gguf.TypeQ8_0})
	o, _ := openModel(t, path)
	perPage := int64(2 * o.Layers * 16 * o.KVHeads * o.HeadDim * 2) // K and V, f16, pages of 16
	m, err := Load(path, Config{CtxSize: 96, Parallel: slots, BatchSize: batch, Validation: true, KVMemory: int64(pages) * perPage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if kv := m.KV(); kv.Pages != pages || kv.PageSize != 16 {
		t.Fatalf("KV pool of %d pages of %d, want %d of 16", kv.Pages, kv.PageSize, pages)
	}
	return m
}

// TestSchedulerPreemption runs more sequences than the KV pool holds at
// full length: the most recently admitted ones are preempted and
// recomputed, and every sequence still equals its run alone.
func TestSchedulerPreemption(t *testing.T) {
	// 4 sequences of 20 + 40 tokens need 4 pages each, 16 in all; the
	// pool has 9.
	m := schedModelKV(t, "llama", 4, 32, 9)
	const n, maxTokens = 4, 40
	prompts := make([][]int32, n)
	want := make([]genResult, n)
	for i := range prompts {
		prompts[i] = testPrompt(m, 10+i, 20)
		want[i] = soloGenerateEndless(t, m, prompts[i], maxTokens)
	}
	m.Blocks.Truncate(0, 0)
	// Every request is queued before the scheduler starts: all four are
	// admitted together (8 pages of prompts), whatever the timing.
	s := newScheduler(m, SchedulerConfig{})
	got := make([]genResult, n)
	var wg sync.WaitGroup
	for i := range prompts {
		g, err := s.Generate(context.Background(), []GenRequest{{Prompt: prompts[i], Chain: endlessChain(t, m, prompts[i]), MaxTokens: maxTokens, Logprobs: true}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = collect(g) }()
	}
	s.run()
	defer s.Close()
	wg.Wait()
	for i := range got {
		compareRuns(t, fmt.Sprintf("sequence %d", i), got[i], want[i])
	}
	st := s.Stats()
	if st.Preempted == 0 {
		t.Errorf("Stats = %+v: nothing was preempted, yet 16 pages were needed of 9", st)
	}
	if st.KV.Used != 0 || st.KV.Free+st.KV.Cached != 9 {
		t.Errorf("after all ended: KV %+v, want every page free or cached", st.KV)
	}
	vktest.Check(t, m.Device())
}

// soloGenerateEndless is soloGenerate with endlessChain's sampler.
func soloGenerateEndless(t *testing.T, m *Model, prompt []int32, maxTokens int) genResult {
	t.Helper()
	if err := m.Blocks.Truncate(0, 0); err != nil {
		t.Fatal(err)
	}
	c := endlessChain(t, m, prompt)
	logits, err := m.Prefill(context.Background(), 0, 0, prompt)
	if err != nil {
		t.Fatal(err)
	}
	var r genResult
	for pos := len(prompt); ; pos++ {
		id, err := c.Sample(logits)
		if err != nil {
			t.Fatal(err)
		}
		c.Accept(id)
		lp, _ := c.Logprob(id)
		r.tokens, r.logprobs = append(r.tokens, id), append(r.logprobs, lp)
		if len(r.tokens) == maxTokens {
			return r
		}
		if logits, err = m.Step(0, pos, id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSchedulerTooBig: a prompt that needs more pages than the pool has is
// refused up front, naming the numbers; one that fits runs even when its
// generation outgrows the pool, and ends with ErrContextFull there.
func TestSchedulerTooBig(t *testing.T) {
	m := schedModelKV(t, "llama", 2, 32, 3)
	s := NewScheduler(m, SchedulerConfig{})
	defer s.Close()
	long := testPrompt(m, 1, 49)
	_, err := s.Generate(context.Background(), []GenRequest{{Prompt: long, Chain: endlessChain(t, m, long), MaxTokens: 4}})
	if !errors.Is(err, ErrKVTooSmall) || !strings.Contains(err.Error(), "49 tokens") || !strings.Contains(err.Error(), "needs 4 pages") || !strings.Contains(err.Error(), "has 3") {
		t.Fatalf("Generate(49 tokens, 3 pages of 16) = %v, want ErrKVTooSmall naming 49 tokens, 4 pages needed and 3", err)
	}
	p := testPrompt(m, 2, 40)
	g, err := s.Generate(context.Background(), []GenRequest{{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: 30}})
	if err != nil {
		t.Fatal(err)
	}
	r := collect(g)
	if !errors.Is(r.err, ErrContextFull) || len(r.tokens) != 48-40+1 {
		t.Errorf("a sequence outgrowing the pool: %d tokens, error %v; want %d and ErrContextFull", len(r.tokens), r.err, 48-40+1)
	}
}

// TestSchedulerPrefixReuse: prompts sharing a long prefix with a finished
// sequence prefill only the rest (the shared whole pages and the shared
// start of a page, which is copied before it is written), and the
// generations equal their runs alone.
func TestSchedulerPrefixReuse(t *testing.T) {
	m := schedModel(t, "llama", 2, 64)
	system := testPrompt(m, 3, 40)
	ask := func(q int) []int32 { return append(append([]int32(nil), system...), testPrompt(m, 20+q, 5+q)...) }
	const maxTokens = 6
	want := make([]genResult, 3)
	for i := range want {
		want[i] = soloGenerateEndless(t, m, ask(i), maxTokens)
	}
	m.Blocks.Truncate(0, 0)
	s := NewScheduler(m, SchedulerConfig{})
	defer s.Close()
	var prefill int64
	for i := range want {
		p := ask(i)
		g, err := s.Generate(context.Background(), []GenRequest{{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: maxTokens, Logprobs: true}})
		if err != nil {
			t.Fatal(err)
		}
		compareRuns(t, fmt.Sprintf("question %d", i), collect(g), want[i])
		_, reused := g.Seqs()[0].Admission()
		wantReused := 0
		if i > 0 {
			// Pages 0 and 1 whole, and 8 tokens of page 2 (system
			// prompt positions 32..39; the earlier question's page).
			wantReused = 40
		}
		if reused != wantReused {
			t.Errorf("question %d: %d prompt tokens reused, want %d", i, reused, wantReused)
		}
		st := s.Stats()
		if fed := st.PrefillRows - prefill; fed != int64(len(p)-wantReused) {
			t.Errorf("question %d: %d prompt rows fed, want %d", i, fed, len(p)-wantReused)
		}
		prefill = st.PrefillRows
	}
	st := s.Stats()
	if st.PromptTokens != int64(3*45+1+2) || st.ReusedTokens != 80 {
		t.Errorf("Stats = %+v, want %d prompt tokens, 80 reused", st, 3*45+3)
	}
	vktest.Check(t, m.Device())
}

// TestSchedulerEviction: with a pool too small for every finished prompt,
// the least recently used cached pages are evicted for new prompts, and a
// prompt whose prefix was evicted is fed again (and still right).
func TestSchedulerEviction(t *testing.T) {
	m := schedModelKV(t, "llama", 2, 64, 6)
	s := NewScheduler(m, SchedulerConfig{})
	defer s.Close()
	run := func(p []int32) (reused int) {
		t.Helper()
		g, err := s.Generate(context.Background(), []GenRequest{{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: 2}})
		if err != nil {
			t.Fatal(err)
		}
		if r := collect(g); r.err != nil || len(r.tokens) != 2 {
			t.Fatalf("%d tokens, %v", len(r.tokens), r.err)
		}
		_, reused = g.Seqs()[0].Admission()
		return reused
	}
	a, b := testPrompt(m, 4, 33), testPrompt(m, 5, 33) // 3 pages each with their tokens
	run(a)
	run(b)
	if kv := s.Stats().KV; kv.Cached != 6 || kv.Free != 0 {
		t.Fatalf("after two prompts of 3 pages: KV %+v, want 6 cached", kv)
	}
	if n := run(b); n != 32 {
		t.Errorf("b again: %d tokens reused, want 32 (all but the last, fed for its logits)", n)
	}
	// c needs 3 pages: the least recently used ones are a's.
	run(testPrompt(m, 6, 33))
	if n := run(b); n != 32 {
		t.Errorf("b after c: %d tokens reused, want 32 (a's pages should have gone)", n)
	}
	if n := run(a); n != 0 {
		t.Errorf("a after c: %d tokens reused, want 0 (evicted)", n)
	}
}

// TestSchedulerEncoderOldestFits drives an encoder's steps by hand: the
// oldest waiting prompt, 30 of a step's 40 rows, is read whole in the
// first step although shorter ones that arrived after it go first.
func TestSchedulerEncoderOldestFits(t *testing.T) {
	path := genModel(t, modelgen.Options{Arch: "bert", Type: gguf.TypeQ8_0, Embd: 64, Layers: 2, Heads: 4, Context: 64, Seed: 5})
	m, err := Load(path, Config{CtxSize: 64, Parallel: 3, BatchSize: 40, Validation: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s := newScheduler(m, SchedulerConfig{})
	defer func() { close(s.quit); s.shutdown(); close(s.jobs) }()
	embed := func(i, n int) *Sequence {
		t.Helper()
		tokens := testPrompt(m, i, n)
		q := &Sequence{ctx: context.Background(), prompt: tokens, embed: true, slot: -1,
			pool: newPooler(s.cfg.Pooling, n, m.Opts.Embd, m.Classifier)}
		if err := s.enqueue(newGroup(s, []*Sequence{q})); err != nil {
			t.Fatal(err)
		}
		return q
	}
	long, a, b := embed(0, 30), embed(1, 8), embed(2, 8)
	s.admit()
	s.step()
	if long.embedOut == nil || a.embedOut == nil {
		t.Fatalf("after the first step: the 30-token prompt done %v, the first 8-token one %v; want both", long.embedOut != nil, a.embedOut != nil)
	}
	if b.embedOut != nil {
		t.Error("the second 8-token prompt was read in the first step too: 46 rows in a step of 40")
	}
	s.admit()
	s.step()
	if b.embedOut == nil {
		t.Error("the second 8-token prompt was not read in the second step")
	}
}

// TestSchedulerCostSkipsCompiles: a step that dispatched a pipeline for
// the first time (on lavapipe, its compilation) is left out of the
// step-cost model; the steps after it, of shapes seen before, are learned.
func TestSchedulerCostSkipsCompiles(t *testing.T) {
	m := schedModel(t, "llama", 1, 32)
	s := newScheduler(m, SchedulerConfig{})
	defer func() { close(s.quit); s.shutdown(); close(s.jobs) }()
	p := testPrompt(m, 0, 5)
	if _, err := s.Generate(context.Background(), []GenRequest{{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: 8}}); err != nil {
		t.Fatal(err)
	}
	s.admit()
	dev := m.GPU.dev
	before := dev.FirstDispatches()
	s.step() // the prompt: the model's first pass
	if dev.FirstDispatches() == before {
		t.Fatal("the model's first pass dispatched no pipeline for the first time")
	}
	if s.cost.alone != 0 || s.cost.row != 0 {
		t.Errorf("after a compiling prompt step: cost %+v, want nothing learned", s.cost)
	}
	learned := false
	for range 4 {
		fresh, decode := dev.FirstDispatches(), s.cost.decode
		s.step()
		compiled := dev.FirstDispatches() != fresh
		switch {
		case compiled && s.cost.decode != decode:
			t.Errorf("a decode step that compiled moved the decode cost from %g to %g", decode, s.cost.decode)
		case !compiled && s.cost.decode == decode:
			t.Errorf("a decode step of a known shape left the decode cost at %g", decode)
		case !compiled:
			learned = true
		}
	}
	if !learned || s.cost.decode <= 0 {
		t.Errorf("no decode step was learned (cost %+v)", s.cost)
	}
}

// collectWithin drains g like collectAll, failing the test when it has not
// closed after a minute (a bound for a hung scheduler, not a timing
// assertion).
func collectWithin(t *testing.T, what string, g *Group) []genResult {
	t.Helper()
	done := make(chan []genResult, 1)
	go func() { done <- collectAll(g) }()
	select {
	case rs := <-done:
		return rs
	case <-time.After(time.Minute):
		t.Fatalf("%s: no end after a minute", what)
		return nil
	}
}

// TestSchedulerStalledCandidates: a request whose candidates fill every
// slot and whose consumer stops reading does not hold up a later request:
// its candidates give up their slots once their buffers are full (parked),
// and when their consumer reads again they finish with the tokens they
// generate alone.
func TestSchedulerStalledCandidates(t *testing.T) {
	m := schedModel(t, "llama", 2, 16)
	p := testPrompt(m, 0, 5)
	const maxTokens = 20
	want := soloGenerateEndless(t, m, p, maxTokens)
	m.Blocks.Truncate(0, 0)
	s := NewScheduler(m, SchedulerConfig{EventBuffer: 4})
	defer s.Close()
	reqs := make([]GenRequest, 2)
	for i := range reqs {
		reqs[i] = GenRequest{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: maxTokens, Logprobs: true}
	}
	stalled, err := s.Generate(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until both candidates' buffers are full: they hold both slots.
	for deadline := time.Now().Add(time.Minute); len(stalled.Events()) < 2*4; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled candidates sent %d events, want their buffers' 8", len(stalled.Events()))
		}
	}
	p2 := testPrompt(m, 1, 3)
	other, err := s.Generate(context.Background(), []GenRequest{{Prompt: p2, Chain: endlessChain(t, m, p2), MaxTokens: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if r := collectWithin(t, "the request behind two stalled candidates", other)[0]; r.err != nil || len(r.tokens) != 10 {
		t.Fatalf("the request behind two stalled candidates: %d tokens, %v; want 10", len(r.tokens), r.err)
	}
	if st := s.Stats(); st.Parked == 0 {
		t.Errorf("Stats = %+v: nothing parked, yet the other request ran", st)
	}
	for i, r := range collectWithin(t, "the stalled candidates, read at last", stalled) {
		compareRuns(t, fmt.Sprintf("stalled candidate %d", i), r, want)
	}
	vktest.Check(t, m.Device())
}

// TestSchedulerFairAdmission: a request of four candidates queued ahead
// of two single ones does not take every slot: with MaxRequestSeqs 2 it
// never holds more than two, and the later requests are admitted before
// its third and fourth candidates.
func TestSchedulerFairAdmission(t *testing.T) {
	m := schedModel(t, "llama", 4, 32)
	var s *Scheduler
	most := 0 // the most slots request "big" held at a step
	s = newScheduler(m, SchedulerConfig{MaxRequestSeqs: 2, OnStep: func(time.Duration, int, int) {
		n := 0
		for _, v := range s.Slots() {
			if v.Label == "big" {
				n++
			}
		}
		most = max(most, n)
	}})
	p := testPrompt(m, 2, 6)
	big := make([]GenRequest, 4)
	for i := range big {
		big[i] = GenRequest{Prompt: p, Chain: endlessChain(t, m, p), MaxTokens: 12, Label: "big"}
	}
	gBig, err := s.Generate(context.Background(), big)
	if err != nil {
		t.Fatal(err)
	}
	var small []*Group
	for i := range 2 {
		pi := testPrompt(m, 3+i, 4)
		g, err := s.Generate(context.Background(), []GenRequest{{Prompt: pi, Chain: endlessChain(t, m, pi), MaxTokens: 12, Label: "small"}})
		if err != nil {
			t.Fatal(err)
		}
		small = append(small, g)
	}
	// Everything is queued before the scheduler starts: the order of
	// admission does not depend on timing.
	s.run()
	defer s.Close()
	for i, r := range collectWithin(t, "the big request", gBig) {
		if r.err != nil || len(r.tokens) != 12 {
			t.Errorf("big candidate %d: %d tokens, %v; want 12", i, len(r.tokens), r.err)
		}
	}
	for i, g := range small {
		if r := collectWithin(t, "a small request", g)[0]; r.err != nil || len(r.tokens) != 12 {
			t.Errorf("small request %d: %d tokens, %v; want 12", i, len(r.tokens), r.err)
		}
	}
	if most != 2 {
		t.Errorf("the big request held at most %d slots at a step, want MaxRequestSeqs 2", most)
	}
	for i, g := range small {
		q := g.Seqs()[0]
		for c := 2; c < 4; c++ {
			if late := gBig.Seqs()[c]; late.order < q.order {
				t.Errorf("big candidate %d was admitted %dth, before small request %d (%dth)", c, late.order, i, q.order)
			}
		}
	}
	vktest.Check(t, m.Device())
}
