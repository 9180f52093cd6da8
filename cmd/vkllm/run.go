package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/peterbourgon/ff/v4/ffval"
	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sampling"
)

// cmdRun generates a continuation of a prompt and prints it as it comes,
// then the prompt and generation speeds.
func cmdRun(args []string) error {
	fs := newFlagSet("run")
	var mf modelFlags
	mf.register(fs, 0, false)
	prompt := fs.StringShort('p', "", "prompt `text` (read from stdin when empty)")
	n := fs.IntShort('n', 64, "`tokens` to generate at most")
	sp := sampling.DefaultParams()
	fs.Float64Var(&sp.Temperature, 0, "temp", sp.Temperature, "temperature (0 = greedy)")
	fs.IntVar(&sp.TopK, 0, "top-k", sp.TopK, "top-k (0 = off)")
	fs.Float64Var(&sp.TopP, 0, "top-p", sp.TopP, "top-p (1 = off)")
	fs.Float64Var(&sp.MinP, 0, "min-p", sp.MinP, "min-p (0 = off)")
	fs.Float64Var(&sp.RepeatPenalty, 0, "repeat-penalty", sp.RepeatPenalty, "repeat penalty (1 = off)")
	fs.Value(0, "seed", ffval.NewValueDefault(&sp.Seed, sampling.RandomSeed), "random seed (-1 = random)")
	if err := parseFlags(fs, args, false, "vkllm run -m FILE [-p TEXT] [-n N] [flags]"); err != nil {
		return err
	}
	if len(fs.GetArgs()) > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.GetArgs())
	}
	text := *prompt
	if text == "" {
		raw, err := io.ReadAll(os.Stdin)
		if err != nil {
			return err
		}
		text = string(raw)
	}
	model, err := mf.load(1)
	if err != nil {
		return err
	}
	defer model.Close()
	defer saveCache(os.Stderr, model)
	tok := model.Tok
	ids, err := tok.Encode(text, true, false)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return fmt.Errorf("the prompt has no tokens")
	}
	if len(ids) >= model.CtxSize() {
		return fmt.Errorf("the prompt has %d tokens; the context holds %d", len(ids), model.CtxSize())
	}
	chain, err := sampling.NewChain(sp, sampling.Vocab{Size: model.Opts.Vocab, EOG: tok.EOGIDs()}, nil)
	if err != nil {
		return err
	}
	// The prompt and the tokens go through the scheduler, the path every
	// request of the server takes.
	// The prompt's time runs to the end of its last step, the
	// generation's from there (the first token is sampled after it).
	var prefilled time.Time
	s := engine.NewScheduler(model, engine.SchedulerConfig{PromptStepTime: -1, OnStep: func(_ time.Duration, _, prefillRows int) {
		if prefillRows > 0 {
			prefilled = time.Now()
		}
	}})
	defer s.Close()
	t0 := time.Now()
	g, err := s.Generate(context.Background(), []engine.GenRequest{{Prompt: ids, MaxTokens: *n, Chain: chain}})
	if err != nil {
		return err
	}
	fmt.Print(text)
	dec := tok.NewDecoder()
	generated := 0
	for ev := range g.Events() { // closed after the last step
		if ev.End {
			continue
		}
		generated++
		if !ev.EOG {
			os.Stdout.Write(dec.Add(ev.Token))
		}
	}
	if err := g.Seqs()[0].Err(); err != nil && !errors.Is(err, engine.ErrContextFull) {
		return err
	}
	os.Stdout.Write(dec.Flush())
	promptTime, genTime := prefilled.Sub(t0), time.Since(prefilled)
	fmt.Println()
	fmt.Fprintf(os.Stderr, "prompt: %d tokens in %.3fs (%.2f tokens/s)\n", len(ids), promptTime.Seconds(), float64(len(ids))/promptTime.Seconds())
	fmt.Fprintf(os.Stderr, "generation: %d tokens in %.3fs (%.2f tokens/s)\n", generated, genTime.Seconds(), float64(generated)/genTime.Seconds())
	return nil
}
