package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sampling"
	"github.com/vkllm/vkllm/vk"
)

// benchResult is one test of cmdBench.
type benchResult struct {
	Model   string    `json:"model"`
	Device  string    `json:"device"`
	Test    string    `json:"test"` // "pp512" or "tg128"
	Tokens  int       `json:"n_tokens"`
	Reps    int       `json:"repetitions"`
	Mean    float64   `json:"avg_ts"`
	StdDev  float64   `json:"stddev_ts"`
	Samples []float64 `json:"samples_ts"`
}

// cmdBench measures prompt processing and generation speed like the
// reference implementation's bench tool: random tokens, an empty context
// each repetition, mean and standard deviation of tokens per second.
func cmdBench(args []string) error { return bench(os.Stdout, args) }

// bench is cmdBench writing its table or JSON to w.
func bench(w io.Writer, args []string) error {
	fs := newFlagSet("bench")
	var mf modelFlags
	mf.register(fs, 0, false)
	pp := fs.IntShort('p', 512, "prompt `tokens` to process (0 = skip)")
	tg := fs.IntShort('n', 128, "`tokens` to generate (0 = skip)")
	reps := fs.IntShort('r', 5, "`repetitions`")
	asJSON := fs.BoolLong("json", "print JSON instead of a table")
	parallel := fs.StringLong("parallel", "", "comma-separated `counts` of sequences run together (e.g. 1,2,4,8,16): each prefills its prompt of -p tokens, then all decode -n tokens in one batch per step")
	profile := fs.BoolLong("profile", "with --parallel: time every kernel of the decode steps with timestamp queries and print where a step's time goes, and how fast each weight kind's matrix products read it against the memory bandwidth (measured first with a device-to-device copy)")
	if err := parseFlags(fs, args, false, "vkllm bench -m FILE [-p N] [-n N] [-r N] [--parallel COUNTS] [flags]"); err != nil {
		return err
	}
	if len(fs.GetArgs()) > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.GetArgs())
	}
	if *reps < 1 {
		return fmt.Errorf("-r must be at least 1")
	}
	if *pp < 0 || *tg < 0 {
		return fmt.Errorf("-p %d and -n %d must not be negative", *pp, *tg)
	}
	if *parallel != "" {
		seqs, err := parseCounts(*parallel)
		if err != nil {
			return fmt.Errorf("--parallel: %w", err)
		}
		return benchParallel(w, &mf, seqs, *pp, *tg, *reps, *asJSON, *profile)
	}
	if *profile {
		return fmt.Errorf("--profile needs --parallel")
	}
	if mf.ctxSize == 0 {
		mf.ctxSize = max(*pp, *tg) + 1
	}
	model, err := mf.load(1)
	if err != nil {
		return err
	}
	defer model.Close()
	defer saveCache(os.Stderr, model)
	rng := rand.New(rand.NewPCG(1, 2))
	randomTokens := func(n int) []int32 {
		t := make([]int32, n)
		for i := range t {
			t[i] = int32(rng.IntN(model.Opts.Vocab))
		}
		return t
	}
	ctx := context.Background()
	var results []benchResult
	run := func(test string, n int, once func() error) error {
		if n <= 0 {
			return nil
		}
		if err := once(); err != nil { // warm-up: pipelines, caches
			return err
		}
		r := benchResult{Model: filepath.Base(mf.model), Device: model.Device().Info().Name, Test: test, Tokens: n, Reps: *reps}
		for range *reps {
			t0 := time.Now()
			if err := once(); err != nil {
				return err
			}
			r.Samples = append(r.Samples, float64(n)/time.Since(t0).Seconds())
		}
		r.Mean, r.StdDev = meanSD(r.Samples)
		results = append(results, r)
		return nil
	}
	// Both tests go through the scheduler, as the server's requests do:
	// pp feeds a random prompt in batch-size chunks and samples one token,
	// tg feeds one random token and generates the rest (end-of-generation
	// tokens masked), tg forward passes in all.
	s := engine.NewScheduler(model, engine.SchedulerConfig{PromptStepTime: -1})
	defer s.Close()
	generate := func(prompt []int32, tokens int) error {
		p := sampling.DefaultParams()
		p.Temperature, p.MinTokens = 0, tokens
		chain, err := sampling.NewChain(p, sampling.Vocab{Size: model.Opts.Vocab, EOG: model.Tok.EOGIDs()}, nil)
		if err != nil {
			return err
		}
		g, err := s.Generate(ctx, []engine.GenRequest{{Prompt: prompt, MaxTokens: tokens, Chain: chain}})
		if err != nil {
			return err
		}
		for range g.Events() {
		}
		return g.Seqs()[0].Err()
	}
	if err := run(fmt.Sprintf("pp%d", *pp), *pp, func() error { return generate(randomTokens(*pp), 1) }); err != nil {
		return err
	}
	if err := run(fmt.Sprintf("tg%d", *tg), *tg, func() error { return generate(randomTokens(1), *tg) }); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	fmt.Fprintf(w, "| %-34s | %-32s | %6s | %18s |\n", "model", "device", "test", "t/s")
	fmt.Fprintf(w, "|%s|%s|%s|%s|\n", dashes(36), dashes(34), dashes(8), dashes(20))
	for _, r := range results {
		fmt.Fprintf(w, "| %-34s | %-32s | %6s | %9.2f ± %6.2f |\n", r.Model, r.Device, r.Test, r.Mean, r.StdDev)
	}
	return nil
}

// parseCounts parses a comma-separated list of sequence counts, each at
// least 1, such as "1,2,4,8,16".
func parseCounts(s string) ([]int, error) {
	var out []int
	for i, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("item %d %q of %q is not a count of at least 1", i, f, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// tokenRate is tokens per second over repetitions, named like the
// reference's bench JSON.
type tokenRate struct {
	Tokens  int       `json:"n_tokens"` // tokens of one repetition
	Mean    float64   `json:"avg_ts"`
	StdDev  float64   `json:"stddev_ts"`
	Samples []float64 `json:"samples_ts"`
}

func newTokenRate(tokens int, samples []float64) *tokenRate {
	r := &tokenRate{Tokens: tokens, Samples: samples}
	r.Mean, r.StdDev = meanSD(samples)
	return r
}

// parallelResult is one sequence count of `bench --parallel`.
type parallelResult struct {
	Model    string `json:"model"`
	Device   string `json:"device"`
	Parallel int    `json:"n_parallel"` // sequences run together
	Prompt   int    `json:"n_prompt"`   // prompt tokens per sequence
	Gen      int    `json:"n_gen"`      // generated tokens per sequence
	Reps     int    `json:"repetitions"`
	// PP is the prompt processing of all Parallel prompts (Parallel*Prompt
	// tokens in chunks of the batch size); nil with -p 0.
	PP *tokenRate `json:"pp,omitempty"`
	// TG is the aggregate generation rate, Parallel*Gen tokens over the
	// time of Gen steps of Parallel rows; nil with -n 0.
	TG *tokenRate `json:"tg,omitempty"`
	// TGSeq is the generation rate one sequence sees (TG / Parallel).
	TGSeq *tokenRate `json:"tg_per_seq,omitempty"`
	// Profile is where a decode step's device time goes (--profile), the
	// most first.
	Profile []kernelShare `json:"profile,omitempty"`
	// Bandwidth is the device's memory bandwidth measured before the
	// first count (--profile).
	Bandwidth *copyBandwidth `json:"mem_bandwidth,omitempty"`
	// Weights is the rate at which a decode step's matrix products read
	// their weights, per weight kind, the most time first (--profile).
	Weights []weightRate `json:"weights,omitempty"`
}

// kernelShare is one pipeline's part of a decode step (--profile):
// Weights names the weight kind its dispatches multiplied by, if any.
type kernelShare struct {
	Kernel     string  `json:"kernel"`
	Weights    string  `json:"weights,omitempty"`
	Calls      float64 `json:"calls_per_step"`
	Micros     float64 `json:"us_per_step"`
	Percentage float64 `json:"percent"`
}

// copyBandwidth is the memory bandwidth vk.Device.CopyBandwidth measured:
// the bytes read plus written per second by the fastest of Reps copies of
// a buffer of Bytes bytes.
type copyBandwidth struct {
	Bytes  uint64  `json:"copy_bytes"`
	Reps   int     `json:"repetitions"`
	Micros float64 `json:"best_us"`
	GBps   float64 `json:"gb_per_s"`
}

// weightRate is how fast one weight kind's matrix products read it in a
// decode step: every layer's copy of the weight, read once per step (the
// least a step must read), over the device time of the kernels labelled
// with it.
type weightRate struct {
	Weights string   `json:"weights"`
	Kernels []string `json:"kernels"`
	Bytes   int64    `json:"bytes_per_step"`
	Micros  float64  `json:"us_per_step"`
	GBps    float64  `json:"gb_per_s"`
	// Percent is GBps as a percentage of the measured bandwidth.
	Percent float64 `json:"percent_of_bandwidth"`
}

// benchParallel measures prompt processing and batched generation for each
// count of sequences in seqs, like the reference's batched bench. The model
// is loaded once with max(seqs) KV slots.
func benchParallel(w io.Writer, mf *modelFlags, seqs []int, pp, tg, reps int, asJSON, profile bool) error {
	if profile && tg == 0 {
		return fmt.Errorf("--profile times decode steps: -n must be at least 1")
	}
	if pp+tg == 0 {
		return fmt.Errorf("--parallel: -p and -n are both 0: nothing to measure")
	}
	most := 0
	for _, n := range seqs {
		most = max(most, n)
	}
	if mf.ctxSize == 0 {
		mf.ctxSize = pp + tg
	}
	if mf.ctxSize < pp+tg {
		return fmt.Errorf("--parallel: --ctx-size %d cannot hold -p %d plus -n %d tokens per sequence", mf.ctxSize, pp, tg)
	}
	model, err := mf.load(most)
	if err != nil {
		return err
	}
	defer model.Close()
	defer saveCache(os.Stderr, model)
	batchSize := model.GPU.Config().BatchSize
	if most > batchSize {
		return fmt.Errorf("--parallel: %d sequences decode %d rows per step, more than --batch-size %d", most, most, batchSize)
	}
	b := newBatchBench(model, pp, tg, most, batchSize)
	var bw *copyBandwidth
	if profile {
		if bw, err = measureBandwidth(model.Device()); err != nil {
			return err
		}
	}
	var results []parallelResult
	for _, n := range seqs {
		if _, _, err := b.run(n); err != nil { // warm-up
			return fmt.Errorf("--parallel %d: %w", n, err)
		}
		if profile {
			if err := model.Device().Profile(); err != nil {
				return err
			}
			b.profile = true
		}
		var ppS, tgS []float64
		for range reps {
			ppT, tgT, err := b.run(n)
			if err != nil {
				return fmt.Errorf("--parallel %d: %w", n, err)
			}
			if pp > 0 {
				ppS = append(ppS, float64(n*pp)/ppT.Seconds())
			}
			if tg > 0 {
				tgS = append(tgS, float64(n*tg)/tgT.Seconds())
			}
		}
		r := parallelResult{Model: filepath.Base(mf.model), Device: model.Device().Info().Name, Parallel: n, Prompt: pp, Gen: tg, Reps: reps}
		if pp > 0 {
			r.PP = newTokenRate(n*pp, ppS)
		}
		if tg > 0 {
			perSeq := make([]float64, len(tgS))
			for i, v := range tgS {
				perSeq[i] = v / float64(n)
			}
			r.TG, r.TGSeq = newTokenRate(n*tg, tgS), newTokenRate(tg, perSeq)
		}
		if profile {
			r.Profile = shares(b.kernels, b.steps)
			r.Bandwidth, r.Weights = bw, weightRates(b.kernels, b.steps, model.GPU.MatrixBytes(), bw)
			b.kernels, b.steps = nil, 0
		}
		results = append(results, r)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	writeParallelTable(w, results)
	for _, r := range results {
		if r.Profile == nil {
			continue
		}
		var total float64
		for _, k := range r.Profile {
			total += k.Micros
		}
		fmt.Fprintf(w, "\n%d sequences: %.0f µs of device time per decode step\n", r.Parallel, total)
		fmt.Fprintf(w, "| %-36s | %-16s | %12s | %10s | %6s |\n", "kernel", "weights", "calls/step", "µs/step", "%")
		fmt.Fprintf(w, "|%s|%s|%s|%s|%s|\n", dashes(38), dashes(18), dashes(14), dashes(12), dashes(8))
		for _, k := range r.Profile {
			fmt.Fprintf(w, "| %-36s | %-16s | %12.1f | %10.1f | %6.1f |\n", k.Kernel, k.Weights, k.Calls, k.Micros, k.Percentage)
		}
		writeWeightRates(w, r)
	}
	return nil
}

// measureBandwidth times device-to-device copies of 256 MiB (less where
// that does not fit: halved down to 16 MiB), best of 5.
func measureBandwidth(dev *vk.Device) (*copyBandwidth, error) {
	size := min(uint64(256<<20), dev.Limits().MaxAllocation&^255)
	for {
		r, err := dev.CopyBandwidth(size, 5)
		if errors.Is(err, vk.ErrOutOfMemory) && size > 16<<20 {
			size /= 2
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("--profile: measuring the memory bandwidth: %w", err)
		}
		return &copyBandwidth{Bytes: r.Bytes, Reps: r.Reps, Micros: float64(r.Best.Nanoseconds()) / 1e3, GBps: r.BytesPerSecond() / 1e9}, nil
	}
}

// weightRates turns the labelled kernel times summed over steps decode
// steps into each weight kind's read rate (bytes: MatrixBytes).
func weightRates(kernels map[string]*vk.KernelTime, steps int, bytes map[string]int64, bw *copyBandwidth) []weightRate {
	byKind := map[string]*weightRate{}
	var out []weightRate
	for _, k := range kernels {
		if k.Label == "" || bytes[k.Label] == 0 {
			continue
		}
		r := byKind[k.Label]
		if r == nil {
			r = &weightRate{Weights: k.Label, Bytes: bytes[k.Label]}
			byKind[k.Label] = r
		}
		r.Kernels = append(r.Kernels, k.Name)
		r.Micros += float64(k.Time.Nanoseconds()) / 1e3 / float64(max(steps, 1))
	}
	for _, r := range byKind {
		slices.Sort(r.Kernels)
		r.Kernels = slices.Compact(r.Kernels)
		if r.Micros > 0 {
			r.GBps = float64(r.Bytes) / r.Micros / 1e3
		}
		if bw != nil && bw.GBps > 0 {
			r.Percent = 100 * r.GBps / bw.GBps
		}
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b weightRate) int {
		if c := cmp.Compare(b.Micros, a.Micros); c != 0 {
			return c
		}
		return cmp.Compare(a.Weights, b.Weights)
	})
	return out
}

// writeWeightRates prints the measured bandwidth and r's weight read rates.
func writeWeightRates(w io.Writer, r parallelResult) {
	if r.Bandwidth == nil || len(r.Weights) == 0 {
		return
	}
	bw := r.Bandwidth
	fmt.Fprintf(w, "\n%d sequences: weights read per decode step against the memory bandwidth, %.1f GB/s (a %d MiB device-to-device copy, bytes read + written, best of %d)\n",
		r.Parallel, bw.GBps, bw.Bytes>>20, bw.Reps)
	fmt.Fprintf(w, "| %-16s | %-40s | %10s | %10s | %9s | %6s |\n", "weights", "kernels", "MiB/step", "µs/step", "GB/s", "% bw")
	fmt.Fprintf(w, "|%s|%s|%s|%s|%s|%s|\n", dashes(18), dashes(42), dashes(12), dashes(12), dashes(11), dashes(8))
	var bytes int64
	var micros float64
	for _, x := range r.Weights {
		fmt.Fprintf(w, "| %-16s | %-40s | %10.2f | %10.1f | %9.2f | %6.1f |\n", x.Weights, strings.Join(x.Kernels, ","), float64(x.Bytes)/(1<<20), x.Micros, x.GBps, x.Percent)
		bytes += x.Bytes
		micros += x.Micros
	}
	if micros > 0 {
		gbps := float64(bytes) / micros / 1e3
		fmt.Fprintf(w, "| %-16s | %-40s | %10.2f | %10.1f | %9.2f | %6.1f |\n", "all", "", float64(bytes)/(1<<20), micros, gbps, 100*gbps/bw.GBps)
	}
}

// shares turns kernel times summed over steps decode steps into per-step
// figures.
func shares(kernels map[string]*vk.KernelTime, steps int) []kernelShare {
	var total time.Duration
	for _, k := range kernels {
		total += k.Time
	}
	out := []kernelShare{}
	for _, k := range kernels {
		out = append(out, kernelShare{Kernel: k.Name, Weights: k.Label, Calls: float64(k.Calls) / float64(steps),
			Micros: float64(k.Time.Microseconds()) / float64(steps), Percentage: 100 * float64(k.Time) / float64(max(total, 1))})
	}
	slices.SortFunc(out, func(a, b kernelShare) int {
		if c := cmp.Compare(b.Micros, a.Micros); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Kernel, b.Kernel), cmp.Compare(a.Weights, b.Weights))
	})
	return out
}

func writeParallelTable(w io.Writer, results []parallelResult) {
	rate := func(r *tokenRate) string {
		if r == nil {
			return "-"
		}
		return fmt.Sprintf("%9.2f ± %6.2f", r.Mean, r.StdDev)
	}
	fmt.Fprintf(w, "| %-34s | %-32s | %-13s | %4s | %18s | %18s | %18s |\n", "model", "device", "test", "seqs", "pp t/s", "tg t/s", "tg t/s per seq")
	fmt.Fprintf(w, "|%s|%s|%s|%s|%s|%s|%s|\n", dashes(36), dashes(34), dashes(15), dashes(6), dashes(20), dashes(20), dashes(20))
	for _, r := range results {
		fmt.Fprintf(w, "| %-34s | %-32s | %-13s | %4d | %18s | %18s | %18s |\n", r.Model, r.Device,
			fmt.Sprintf("pp%d+tg%d", r.Prompt, r.Gen), r.Parallel, rate(r.PP), rate(r.TG), rate(r.TGSeq))
	}
}

// batchBench runs the batched-bench workload on one model: its batches and
// random prompts are reserved once for the largest sequence count.
type batchBench struct {
	model     *engine.Model
	pp, tg    int
	batchSize int
	rng       *rand.Rand
	prompt    engine.Batch // every sequence's prompt rows, sequence after sequence
	step      engine.Batch // one decode row per sequence
	// profile: sum the device's kernel times of decode steps into kernels
	// (steps counts them); the device profiles from the first run on.
	profile bool
	kernels map[string]*vk.KernelTime // by pipeline name and label
	steps   int
}

func newBatchBench(model *engine.Model, pp, tg, most, batchSize int) *batchBench {
	rows := most * pp
	return &batchBench{
		model: model, pp: pp, tg: tg, batchSize: batchSize,
		rng:    rand.New(rand.NewPCG(1, 2)),
		prompt: engine.Batch{Tokens: make([]int32, rows), Slots: make([]int32, rows), Pos: make([]int32, rows), Out: make([]engine.RowOut, rows)},
		step:   engine.Batch{Tokens: make([]int32, most), Slots: make([]int32, most), Pos: make([]int32, most), Out: make([]engine.RowOut, most)},
	}
}

// run clears n slots, prefills a random prompt of pp tokens into each (all
// prompts together, cut into chunks of the batch size, logits for each
// prompt's last token), then decodes tg steps of n rows, each row taking
// the greedy token of its sequence's last logits. It returns the time of
// the prefill and of the decode.
func (b *batchBench) run(n int) (prefill, decode time.Duration, err error) {
	m, vocab := b.model, b.model.Opts.Vocab
	for s := range n {
		if err := m.Blocks.Truncate(s, 0); err != nil {
			return 0, 0, err
		}
		b.step.Tokens[s] = int32(b.rng.IntN(vocab)) // the first decode token when there is no prompt
	}
	rows := n * b.pp
	for i := range rows {
		b.prompt.Tokens[i] = int32(b.rng.IntN(vocab))
		b.prompt.Slots[i] = int32(i / b.pp)
		b.prompt.Pos[i] = int32(i % b.pp)
		b.prompt.Out[i] = engine.RowOut{}
		if i%b.pp == b.pp-1 {
			b.prompt.Out[i].Kind = engine.OutLogits
		}
	}
	t0 := time.Now()
	seq := 0 // the sequence whose prompt logits come next
	for off := 0; off < rows; off += b.batchSize {
		end := min(off+b.batchSize, rows)
		chunk := engine.Batch{Tokens: b.prompt.Tokens[off:end], Slots: b.prompt.Slots[off:end], Pos: b.prompt.Pos[off:end], Out: b.prompt.Out[off:end]}
		logits, err := m.Forward(chunk)
		if err != nil {
			return 0, 0, fmt.Errorf("prefill rows %d..%d: %w", off, end-1, err)
		}
		for r := 0; r < len(logits)/vocab; r++ {
			b.step.Tokens[seq] = argmax(logits[r*vocab : (r+1)*vocab])
			seq++
		}
	}
	prefill = time.Since(t0)
	if seq != n && b.pp > 0 {
		return 0, 0, fmt.Errorf("BUG: prefill returned logits for %d of %d sequences", seq, n)
	}
	step := engine.Batch{Tokens: b.step.Tokens[:n], Slots: b.step.Slots[:n], Pos: b.step.Pos[:n], Out: b.step.Out[:n]}
	dev := m.Device()
	if b.profile {
		if err := dev.Profile(); err != nil { // only the decode steps count
			return 0, 0, err
		}
	}
	for s := range n {
		step.Slots[s] = int32(s)
		step.Out[s] = engine.RowOut{Kind: engine.OutLogits}
	}
	t0 = time.Now()
	for i := range b.tg {
		for s := range n {
			step.Pos[s] = int32(b.pp + i)
		}
		logits, err := m.Forward(step)
		if err != nil {
			return 0, 0, fmt.Errorf("decode step %d: %w", i, err)
		}
		for s := range n {
			step.Tokens[s] = argmax(logits[s*vocab : (s+1)*vocab])
		}
	}
	decode = time.Since(t0)
	if b.profile {
		got, graphs := dev.Profiled()
		if b.kernels == nil {
			b.kernels = map[string]*vk.KernelTime{}
		}
		for _, k := range got {
			key := k.Name + "\x00" + k.Label
			if b.kernels[key] == nil {
				b.kernels[key] = &vk.KernelTime{Name: k.Name, Label: k.Label}
			}
			b.kernels[key].Calls += k.Calls
			b.kernels[key].Time += k.Time
		}
		b.steps += graphs
	}
	return prefill, decode, nil
}

// argmax returns the index of the largest value of x (the first of equal
// ones).
func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

func dashes(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '-'
	}
	return string(b)
}

func meanSD(x []float64) (mean, sd float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	if len(x) < 2 {
		return mean, 0
	}
	for _, v := range x {
		sd += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(sd / float64(len(x)-1))
}
