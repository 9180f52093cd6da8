package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/vkllm/vkllm/engine"
)

// cmdPerplexity measures perplexity over a text file the way the reference
// implementation's perplexity tool does.
func cmdPerplexity(args []string) error {
	fs := newFlagSet("perplexity")
	var mf modelFlags
	mf.register(fs, 512, false)
	file := fs.StringShort('f', "", "text `file` to score")
	chunks := fs.IntLong("chunks", -1, "score only the first `K` windows (-1 = all)")
	if err := parseFlags(fs, args, false, "vkllm perplexity -m FILE -f TEXT [flags]"); err != nil {
		return err
	}
	if len(fs.GetArgs()) > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.GetArgs())
	}
	if *file == "" {
		return fmt.Errorf("no text: pass -f file.txt")
	}
	raw, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	model, err := mf.load(1)
	if err != nil {
		return err
	}
	defer model.Close()
	defer saveCache(os.Stderr, model)
	start := time.Now()
	res, err := engine.Perplexity(context.Background(), model, string(raw), model.CtxSize(), *chunks, func(i, n int, ppl float64) {
		fmt.Fprintf(os.Stderr, "[%d/%d] %.4f\n", i, n, ppl)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d windows of %d tokens, %d tokens scored in %.2fs\n", res.Chunks, res.Ctx, res.Count, time.Since(start).Seconds())
	fmt.Printf("PPL = %.4f +/- %.5f\n", res.PPL, res.Err)
	return nil
}
