// Command kvbench measures the paged KV cache through the engine's
// scheduler (no HTTP): memory per sequence, prefix reuse of a shared system
// prompt, how many sequences fit a given pool, and the quantized caches'
// memory and decode speed. The README's KV tables come from it:
//
//	go run ./tools/kvbench -m model.gguf -case memory
//	go run ./tools/kvbench -m model.gguf -case shared
//	go run ./tools/kvbench -m model.gguf -case fit
//	go run ./tools/kvbench -m model.gguf -case types
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sampling"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "kvbench:", err)
		os.Exit(1)
	}
}

type opts struct {
	model  string
	device string
	ctx    int
	seed   uint64
}

func run() error {
	var o opts
	which := flag.String("case", "memory", "what to measure: memory, shared, fit or types")
	flag.StringVar(&o.model, "m", "", "GGUF model `file`")
	flag.StringVar(&o.device, "device", "", "Vulkan device")
	flag.IntVar(&o.ctx, "ctx-size", 4096, "most positions per sequence")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the random prompts")
	flag.Parse()
	if o.model == "" {
		return fmt.Errorf("no model: pass -m file.gguf")
	}
	switch *which {
	case "memory":
		return memory(o)
	case "shared":
		return shared(o)
	case "fit":
		return fit(o)
	case "types":
		return types(o)
	}
	return fmt.Errorf("unknown case %q", *which)
}

// load loads the model with cfg's pool settings and o's context.
func load(o opts, cfg engine.Config) (*engine.Model, error) {
	cfg.Device, cfg.CtxSize = o.device, o.ctx
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 512
	}
	return engine.Load(o.model, cfg)
}

// prompt returns n random token ids (from 3 up, past the usual controls).
func prompt(r *rand.Rand, m *engine.Model, n int) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(3 + r.IntN(m.Opts.Vocab-3))
	}
	return p
}

// request returns a greedy request that generates exactly maxTokens tokens
// (end-of-generation tokens banned).
func request(m *engine.Model, p []int32, maxTokens int) (engine.GenRequest, error) {
	sp := sampling.DefaultParams()
	sp.Temperature = 0
	sp.LogitBias = map[string]float64{}
	for _, id := range m.Tok.EOGIDs() {
		sp.LogitBias[fmt.Sprint(id)] = -1e9
	}
	c, err := sampling.NewChain(sp, sampling.Vocab{Size: m.Opts.Vocab, EOG: m.Tok.EOGIDs()}, nil)
	if err == nil {
		err = c.Prime(p)
	}
	return engine.GenRequest{Prompt: p, Chain: c, MaxTokens: maxTokens}, err
}

// result is one finished sequence as seen by its consumer.
type result struct {
	ttft, total time.Duration
	tokens      int
	err         error
}

// generate queues one request and follows it to the end.
func generate(s *engine.Scheduler, req engine.GenRequest) result {
	start := time.Now()
	g, err := s.Generate(context.Background(), []engine.GenRequest{req})
	if err != nil {
		return result{err: err}
	}
	var r result
	for ev := range g.Events() {
		if ev.End {
			continue
		}
		if r.tokens == 0 {
			r.ttft = time.Since(start)
		}
		r.tokens++
	}
	r.total, r.err = time.Since(start), g.Seqs()[0].Err()
	return r
}

// memory: 16 sequences of 100 to 2,000 prompt tokens (+32 generated) at
// once; the pages reserved against the positions the sequences hold,
// sampled at every decode-only step, and against today's --parallel x
// --ctx-size.
func memory(o opts) error {
	const n, gen = 16, 32
	m, err := load(o, engine.Config{Parallel: n})
	if err != nil {
		return err
	}
	defer m.Close()
	r := rand.New(rand.NewPCG(o.seed, 0))
	var mu sync.Mutex
	worst, sumPos, sumPages, samples := 0.0, 0, 0, 0
	var s *engine.Scheduler
	s = engine.NewScheduler(m, engine.SchedulerConfig{OnStep: func(_ time.Duration, _, prefill int) {
		// Decode-only steps: every running sequence holds what it
		// reserved (a prompt's pages are reserved when it is admitted).
		held := 0
		for _, v := range s.Slots() {
			held += v.Cached
		}
		kv := s.Stats().KV
		if held == 0 || prefill > 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		ratio := float64(kv.Used*kv.PageSize) / float64(held)
		worst = max(worst, ratio)
		sumPos += held
		sumPages += kv.Used
		samples++
	}})
	defer s.Close()
	var wg sync.WaitGroup
	lens := make([]int, n)
	for i := range n {
		lens[i] = 100 + i*1900/(n-1)
		req, err := request(m, prompt(r, m, lens[i]), gen)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); generate(s, req) }()
	}
	wg.Wait()
	kv := m.KV()
	fmt.Printf("16 sequences of %v prompt tokens + %d generated, --ctx-size %d, pages of %d\n", lens, gen, o.ctx, kv.PageSize)
	fmt.Printf("reserved/held positions while decoding: worst step %.3fx, mean %.3fx over %d steps\n", worst, float64(sumPages*kv.PageSize)/float64(sumPos), samples)
	total := 0
	for _, l := range lens {
		total += l + gen - 1
	}
	fmt.Printf("at the end: %d positions held; per-slot reservation (16 x %d) would be %d positions: %.1fx\n",
		total, o.ctx, n*o.ctx, float64(n*o.ctx)/float64(total))
	return nil
}

// shared: 16 requests with the same 1,000-token system prompt and a
// different 20-token question each, one after another: the prompt rows
// fed and the time to first token of the 2nd..16th against the first's.
func shared(o opts) error {
	const n, sys, q, gen = 16, 1000, 20, 8
	m, err := load(o, engine.Config{Parallel: 4})
	if err != nil {
		return err
	}
	defer m.Close()
	r := rand.New(rand.NewPCG(o.seed, 0))
	system := prompt(r, m, sys)
	s := engine.NewScheduler(m, engine.SchedulerConfig{})
	defer s.Close()
	var first time.Duration
	var rest []time.Duration
	for i := range n {
		p := append(append([]int32(nil), system...), prompt(r, m, q)...)
		req, err := request(m, p, gen)
		if err != nil {
			return err
		}
		res := generate(s, req)
		if res.err != nil {
			return res.err
		}
		if i == 0 {
			first = res.ttft
		} else {
			rest = append(rest, res.ttft)
		}
	}
	st := s.Stats()
	var sum time.Duration
	for _, d := range rest {
		sum += d
	}
	mean := sum / time.Duration(len(rest))
	fmt.Printf("%d requests of a %d-token system prompt + %d-token question: %d prompt tokens, %d fed, %d from the cache (%.1f%% of the shared prompt of requests 2..%d)\n",
		n, sys, q, st.PromptTokens, st.PrefillRows, st.ReusedTokens, 100*float64(st.ReusedTokens)/float64((n-1)*sys), n)
	fmt.Printf("TTFT: first %v, 2nd..%dth mean %v (%.3fx)\n", first.Round(time.Millisecond), n, mean.Round(time.Millisecond), float64(mean)/float64(first))
	return nil
}

// fit: a pool the size of today's --parallel 4 --ctx-size 4096 (16,384
// positions), 64 requests of 500 prompt tokens + 64 generated, up to 64 at
// once: how many ran together at most, and preemptions.
func fit(o opts) error {
	const n, plen, gen = 64, 500, 64
	probe, err := load(o, engine.Config{Parallel: 1, KVMemory: 1 << 20})
	if err != nil {
		return err
	}
	po := probe.Opts
	probe.Close()
	positions := 4 * 4096
	bytes := int64(positions) * int64(po.Layers) * int64(2*2*po.KVHeads*po.HeadDim)
	m, err := load(o, engine.Config{Parallel: n, KVMemory: bytes})
	if err != nil {
		return err
	}
	defer m.Close()
	r := rand.New(rand.NewPCG(o.seed, 0))
	most := 0
	var mu sync.Mutex
	var s *engine.Scheduler
	s = engine.NewScheduler(m, engine.SchedulerConfig{OnStep: func(time.Duration, int, int) {
		mu.Lock()
		most = max(most, s.Stats().Active)
		mu.Unlock()
	}})
	defer s.Close()
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		req, err := request(m, prompt(r, m, plen), gen)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); generate(s, req) }()
	}
	wg.Wait()
	st := s.Stats()
	fmt.Printf("pool of %d positions (%s; today's --parallel 4 --ctx-size 4096), %d requests of %d+%d tokens: at most %d running together (%.1fx the 4 slots), %d preemptions, %v\n",
		m.GPU.Config().Pages*m.GPU.Config().PageSize, humanBytes(bytes), n, plen, gen, most, float64(most)/4, st.Preempted, time.Since(start).Round(time.Millisecond))
	return nil
}

// types: KV memory per position and decode speed (decode-only steps) of 8
// sequences of 1,000 prompt tokens generating 64 each, for f16, q8_0 and
// q4_0 caches.
func types(o opts) error {
	const n, plen, gen = 8, 1000, 64
	for _, t := range []string{"f16", "q8_0", "q4_0"} {
		typ, _ := engine.ParseCacheType(t)
		m, err := load(o, engine.Config{Parallel: n, CacheTypeK: typ, CacheTypeV: typ})
		if err != nil {
			return err
		}
		r := rand.New(rand.NewPCG(o.seed, 0))
		var decodeRows int64
		var decodeTime time.Duration
		var mu sync.Mutex
		s := engine.NewScheduler(m, engine.SchedulerConfig{PrefillChunk: 512, OnStep: func(d time.Duration, decode, prefill int) {
			if prefill == 0 && decode > 0 { // decode-only steps
				mu.Lock()
				decodeRows += int64(decode)
				decodeTime += d
				mu.Unlock()
			}
		}})
		var wg sync.WaitGroup
		for range n {
			req, err := request(m, prompt(r, m, plen), gen)
			if err != nil {
				return err
			}
			wg.Add(1)
			go func() { defer wg.Done(); generate(s, req) }()
		}
		wg.Wait()
		s.Close()
		perPos := m.Opts.Layers * typ.RowBytes(m.Opts.KVHeads*m.Opts.HeadDim) * 2
		fmt.Printf("%-5s %6d bytes per position (all layers, K and V); decode of %d sequences at ~%d positions: %.1f tokens/s\n",
			t, perPos, n, plen, float64(decodeRows)/decodeTime.Seconds())
		m.Close()
	}
	return nil
}

func humanBytes(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
