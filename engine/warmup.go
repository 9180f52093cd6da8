package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/vkllm/vkllm/engine/ops"
	"github.com/vkllm/vkllm/sampling"
)

// Warm-up. Some drivers build a pipeline's machine code only at its first
// dispatch (lavapipe runs LLVM then, for up to seconds per variant), and a
// scheduler step that meets a new variant stalls every sequence of the
// step. The variants a step uses depend on its shape: the rows' count in
// column buckets (1, 2, 4, 8, 16 and passes of ops.MatVecMaxCols), and
// what the rows ask for (argmax, top k, logits, hidden states). WarmUp runs one short
// request group per shape through the scheduler before the server says it
// is ready, so that no request pays for a compile: after it, prompts of any
// length and any number of streams dispatch no pipeline for the first time
// (TestWarmUpCoversShapes counts them with vk.Device.FirstDispatches).

// warmBuckets returns the row counts 1, 2, 4, ... up to most, and most
// itself: the column buckets of passes of up to most rows (a batch of more
// rows than ops.MatVecMaxCols is passes that wide and a bucket).
func warmBuckets(most int) []int {
	var bs []int
	for b := 1; b <= most; b *= 2 {
		bs = append(bs, b)
	}
	if last := bs[len(bs)-1]; last < most {
		bs = append(bs, most)
	}
	return bs
}

// WarmUp compiles the kernel variants the scheduler's steps use by running
// short requests through it: for each stream-count bucket, that many
// sequences of a short prompt, generating two tokens, once with greedy
// sampling (argmax rows), once sampling from the top k (top-k rows where
// the device selects them) and once with logprobs (whole logits rows);
// then one prompt of ops.MatVecMaxCols + b rows for each bucket b and one
// of a whole batch. An encoder embeds as many sequences instead, and one sequence of
// each power-of-two length up to the batch. progress, when not nil, is
// called with the groups done and their total. It must run before the
// scheduler serves requests; the prompts it leaves in the prefix cache are
// evicted as any other.
func (s *Scheduler) WarmUp(ctx context.Context, progress func(done, total int)) error {
	type group struct {
		n, plen int
		edit    func(*sampling.Params)
	}
	var groups []group
	kinds := []func(*sampling.Params){
		func(p *sampling.Params) { p.Temperature = 0 },
		func(p *sampling.Params) { p.Temperature, p.TopK = 0.8, 40 },
		func(p *sampling.Params) { p.Temperature, p.TopK, p.Logprobs = 0.8, 0, true },
	}
	if s.m.Opts.Encoder {
		kinds = kinds[:1]
	}
	for _, n := range warmBuckets(min(s.m.Slots(), ops.MatVecMaxCols)) {
		for _, edit := range kinds {
			groups = append(groups, group{n, min(3, s.m.CtxSize()-2), edit})
		}
	}
	// A product of more than ops.MatVecMaxCols rows runs in passes that
	// wide and one of the rest, whose variants differ from a lone pass of
	// as many rows: one prompt chunk of MatVecMaxCols + b rows for each
	// bucket b. A whole batch of one prompt takes the tiled attention
	// kernel where the device has it. (Their one output row is a shape the
	// groups above have met.)
	most := min(s.m.GPU.Config().BatchSize, s.m.CtxSize()-2)
	var long []int
	for _, b := range warmBuckets(ops.MatVecMaxCols) {
		long = append(long, ops.MatVecMaxCols+b)
	}
	for _, l := range append(long, most) {
		if l <= most {
			groups = append(groups, group{1, l, kinds[0]})
		}
	}
	if s.m.Opts.Encoder {
		// An encoder attends within each sequence, which a batch holds
		// whole: its attention takes other variants as sequences grow.
		most := min(s.m.GPU.Config().BatchSize, s.m.CtxSize())
		for l := 1; ; l *= 2 {
			groups = append(groups, group{1, min(l, most), kinds[0]})
			if l >= most {
				break
			}
		}
	}
	seqs := 0
	for i, g := range groups {
		if err := s.warmGroup(ctx, g.n, g.plen, g.edit, &seqs); err != nil {
			return fmt.Errorf("engine: warm-up with %d sequences of %d tokens: %w", g.n, g.plen, err)
		}
		if progress != nil {
			progress(i+1, len(groups))
		}
	}
	return nil
}

// warmGroup runs n sequences of a prompt of plen tokens together
// (embeddings for an encoder), each generating two tokens sampled as edit
// says; seqs counts the warm-up's sequences.
func (s *Scheduler) warmGroup(ctx context.Context, n, plen int, edit func(*sampling.Params), seqs *int) error {
	// Each prompt starts with a token of its own, from the end of the
	// vocabulary, so that no prompt shares a prefix with another (the
	// prefix cache would feed fewer rows than the shape asks) or with a
	// request's (BOS opens most).
	prompt := func(int) []int32 {
		p := make([]int32, plen)
		*seqs++
		for j := range p {
			p[j] = int32(s.m.Opts.Vocab - 1 - (*seqs+13*j)%max(s.m.Opts.Vocab/2, 1))
		}
		return p
	}
	if s.m.Opts.Encoder {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { _, errs[i] = s.Embed(ctx, prompt(i)) })
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	groups := make([]*Group, n)
	for i := range n {
		p := sampling.DefaultParams()
		// min_tokens 1: the first token (from the prompt's last row)
		// cannot end the sequence, so the decode step runs; the second
		// one is chosen as edit's sampling chooses it (a pending
		// min_tokens mask would read whole logits rows instead of the
		// device's argmax or top k).
		p.Seed, p.MinTokens = int64(i), 1
		edit(&p)
		chain, err := sampling.NewChain(p, sampling.Vocab{Size: s.m.Opts.Vocab, EOG: s.m.Tok.EOGIDs()}, nil)
		if err != nil {
			return err
		}
		req := GenRequest{Prompt: prompt(i), MaxTokens: 2, Chain: chain, Logprobs: p.Logprobs}
		if groups[i], err = s.Generate(ctx, []GenRequest{req}); err != nil {
			return err
		}
	}
	var err error
	for _, g := range groups {
		for range g.Events() {
		}
		if e := g.Seqs()[0].Err(); e != nil && !errors.Is(e, ErrContextFull) {
			err = errors.Join(err, e)
		}
	}
	return err
}
