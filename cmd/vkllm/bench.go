package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
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
func cmdBench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var mf modelFlags
	mf.register(fs, 0)
	pp := fs.Int("p", 512, "prompt tokens to process (0 = skip)")
	tg := fs.Int("n", 128, "tokens to generate (0 = skip)")
	reps := fs.Int("r", 5, "repetitions")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *reps < 1 {
		return fmt.Errorf("-r must be at least 1")
	}
	if mf.ctxSize == 0 {
		mf.ctxSize = max(*pp, *tg) + 1
	}
	model, err := mf.load(1)
	if err != nil {
		return err
	}
	defer model.Close()
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
	if err := run(fmt.Sprintf("pp%d", *pp), *pp, func() error {
		_, err := model.Prefill(ctx, 0, 0, randomTokens(*pp))
		return err
	}); err != nil {
		return err
	}
	if err := run(fmt.Sprintf("tg%d", *tg), *tg, func() error {
		toks := randomTokens(*tg)
		for i, t := range toks {
			if _, err := model.Step(0, i, t); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	fmt.Printf("| %-34s | %-32s | %6s | %18s |\n", "model", "device", "test", "t/s")
	fmt.Printf("|%s|%s|%s|%s|\n", dashes(36), dashes(34), dashes(8), dashes(20))
	for _, r := range results {
		fmt.Printf("| %-34s | %-32s | %6s | %9.2f ± %6.2f |\n", r.Model, r.Device, r.Test, r.Mean, r.StdDev)
	}
	return nil
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
