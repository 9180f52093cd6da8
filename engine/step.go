package engine

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/vkllm/vkllm/sampling"

	"github.com/vkllm/vkllm/engine/ops"
)

// A scheduler step builds one batch from the sequences that can advance
// (one decode row each, then prompt chunks), writes down in a table
// (stepSeq) which rows each sequence has and where their outputs land,
// runs the forward pass, and commits from the table: the slots' tokens,
// the pooled embeddings, and the sampling, which runs on the workers.

// stepSeq is one sequence's part of the current step: the rows it feeds
// and where their outputs land in the step's Output.
type stepSeq struct {
	q    *Sequence
	rows int // rows it feeds: its decode row, or its prompt from fed on
	fed  int // prompt tokens fed before this step
	// next is what the row of its next token asks for (Kind OutNone: it
	// samples nothing this step) and at that row's index among the step's
	// outputs of that kind.
	next RowOut
	at   int
	// hid and hidN are its hidden-state rows (embeddings): the first's
	// index in Output.Hidden and how many.
	hid, hidN int
	// prompt and promptN are its scored prompt rows (PromptLogprobs): the
	// first's index in Output.Logits and how many; the first predicts the
	// prompt token at fed+1.
	prompt, promptN int
}

// step runs one forward pass over every sequence that can advance and
// samples their tokens; false means none could (every consumer is behind).
func (s *Scheduler) step() bool {
	if s.reserveDecode() {
		s.reap()
	}
	b := &s.batch
	b.Reset()
	clear(s.embeds)
	s.embeds, s.attnPos, s.stepMedia = s.embeds[:0], s.attnPos[:0], false
	s.stepSeqs, s.outCount = s.stepSeqs[:0], [OutHidden + 1]int{}
	budget := s.m.GPU.Config().BatchSize
	for _, q := range s.active {
		if !q.decoding || q.backlogged() || budget == 0 {
			continue
		}
		e := s.addSeq(q)
		e.next = s.sampleOut(q)
		e.at = s.addRow(e, q.last, nil, q.pos, q.pos, e.next)
		budget--
	}
	decodeRows := len(s.stepSeqs)
	s.feedPrompts(s.promptBudget(budget, decodeRows))
	if b.Len() == 0 {
		s.reap() // sequences whose image failed to encode
		return false
	}
	if s.stepMedia {
		b.Embeds, b.AttnPos = s.embeds, s.attnPos
	}
	s.steps.Add(1)
	s.decodeRows.Add(int64(decodeRows))
	s.prefillRows.Add(int64(b.Len() - decodeRows))
	fresh := s.m.GPU.dev.FirstDispatches()
	start := time.Now()
	err := s.m.ForwardInto(*b, &s.out)
	took := time.Since(start)
	if err == nil {
		s.argmaxRows.Add(int64(s.outCount[OutArgmax]))
		s.topKRows.Add(int64(s.outCount[OutTopK]))
		s.readBytes.Add(int64(s.out.ReadBytes))
	}
	if s.m.GPU.dev.FirstDispatches() == fresh {
		// A step that ran a pipeline for the first time may have paid
		// for its compilation (lavapipe compiles then): it says nothing
		// about what the next steps of its shape cost.
		s.cost.observe(decodeRows, b.Len()-decodeRows, took)
	}
	if s.cfg.OnStep != nil {
		s.cfg.OnStep(took, decodeRows, b.Len()-decodeRows)
	}
	if err != nil {
		for _, e := range s.stepSeqs {
			e.q.done, e.q.doneErr = true, err
		}
	} else {
		s.commit()
	}
	s.reap()
	return true
}

// addSeq adds q to the step's table and returns its entry.
func (s *Scheduler) addSeq(q *Sequence) *stepSeq {
	s.stepSeqs = append(s.stepSeqs, stepSeq{q: q, fed: q.fed})
	return &s.stepSeqs[len(s.stepSeqs)-1]
}

// addRow appends one row of e's sequence to the step's batch: tok or,
// when embd is not nil, that input embedding, at position pos of its slot,
// attending up to position attnPos, asking for out. It returns the row's
// index among the step's outputs of out's kind.
func (s *Scheduler) addRow(e *stepSeq, tok int32, embd []float32, pos, attnPos int, out RowOut) int {
	s.batch.Add(tok, e.q.slot, pos, out)
	s.embeds = append(s.embeds, embd)
	s.attnPos = append(s.attnPos, int32(attnPos))
	s.stepMedia = s.stepMedia || embd != nil || attnPos != pos
	at := s.outCount[out.Kind]
	s.outCount[out.Kind]++
	e.rows++
	return at
}

// sampleOut is what the row of q's next token asks for: the argmax alone
// (a greedy chain), its k largest logits (a chain that draws from its top
// k, k up to ops.MaxTopK, where the model selects them on the device:
// SchedulerConfig.DeviceTopK), or the whole row. It runs on the scheduler
// goroutine between steps, when no worker holds q's chain.
func (s *Scheduler) sampleOut(q *Sequence) RowOut {
	if q.embed || q.req.Logprobs || q.req.TopLogprobs > 0 {
		return RowOut{Kind: OutLogits}
	}
	c := q.req.Chain
	if c.Greedy() {
		return RowOut{Kind: OutArgmax}
	}
	if k := c.TopK(); k > 0 && k <= ops.MaxTopK && s.cfg.DeviceTopK == PathOn {
		return RowOut{Kind: OutTopK, K: int32(k)}
	}
	return RowOut{Kind: OutLogits}
}

// promptBudget bounds the prompt rows of a step that has decodeRows
// decode rows and room for budget more: a chunk sized so that the step
// stays within the latency the decoding sequences allow (or the fixed
// PrefillChunk), or, with no decode rows, one of about PromptStepTime.
func (s *Scheduler) promptBudget(budget, decodeRows int) int {
	if decodeRows > 0 {
		chunk := s.cfg.PrefillChunk
		if chunk == 0 {
			chunk = s.cost.chunk(s.cfg.StepLatencyFactor)
		}
		return min(budget, chunk)
	}
	if chunk := s.cost.aloneChunk(s.cfg.PromptStepTime); chunk > 0 && !s.m.Opts.Encoder {
		// An encoder reads a prompt whole in one step: no bound.
		return min(budget, chunk)
	}
	return budget
}

// feedPrompts adds up to budget prompt rows to the step. Prompts are fed
// shortest remaining first, so that a short prompt arriving behind a long
// one is not held for the whole long prefill. The oldest waiting prompt
// keeps half of every step's prompt rows (prefillReserve), so no prompt
// starves.
func (s *Scheduler) feedPrompts(budget int) {
	s.waiting = s.waiting[:0]
	for _, q := range s.active {
		if !q.decoding && !(q.resumed && q.backlogged()) {
			s.waiting = append(s.waiting, q)
		}
	}
	var head *Sequence
	reserve := 0
	if len(s.waiting) > 1 {
		head = s.waiting[0]
		if s.m.Opts.Encoder {
			// An encoder reads a prompt whole: the oldest keeps room for
			// all of it, or shorter ones arriving all the time would
			// leave it waiting forever.
			reserve = min(len(head.prompt)-head.fed, budget)
		} else {
			budget, reserve = prefillReserve(budget, s.m.GPU.Config().BatchSize-s.batch.Len(), len(head.prompt)-head.fed)
		}
		slices.SortStableFunc(s.waiting, func(a, b *Sequence) int {
			return cmp.Compare(len(a.prompt)-a.fed, len(b.prompt)-b.fed)
		})
	}
	for _, q := range s.waiting {
		room := budget - reserve
		if q == head {
			room, reserve = budget, 0
		}
		if room <= 0 {
			continue
		}
		n := min(len(q.prompt)-q.fed, room)
		if s.m.Opts.Encoder && n < len(q.prompt) {
			continue // an encoder reads a sequence whole: wait for room
		}
		if len(q.req.Media) > 0 {
			// An image is one prefill unit (media.go).
			if n = s.mediaChunk(q, n); n == 0 {
				continue
			}
		}
		if every := s.m.Blocks.CheckpointEvery(); every > 0 {
			// A hybrid model's chunk ends on the last checkpoint position
			// it reaches before the prompt's last token, where commit
			// saves the recurrent state for later prompts.
			if end := min(q.fed+n, len(q.prompt)-1) / every * every; end > q.fed && end < q.fed+n {
				n = end - q.fed
			}
		}
		n = s.feedPrompt(q, n)
		budget = max(budget-n, 0) // an image may go past the chunk (mediaChunk)
	}
}

// feedPrompt adds the next n rows of q's prompt to the step, fewer when it
// scores them (at most promptLogitRows), and returns how many. Its last
// prompt row asks for what its first token's sampling needs, a row an
// embedding pools asks for its hidden state, and a scored row for its
// logits.
func (s *Scheduler) feedPrompt(q *Sequence, n int) int {
	e := s.addSeq(q)
	e.hid = s.outCount[OutHidden]
	score := q.req.PromptLogprobs && !q.embed
	if score {
		n = min(n, promptLogitRows)
		e.prompt = s.outCount[OutLogits]
	}
	next := s.sampleOut(q)
	for p := q.fed; p < q.fed+n; p++ {
		last := p == len(q.prompt)-1
		var out RowOut
		switch {
		case q.embed && q.pool.wants(p):
			out.Kind = OutHidden
		case q.embed:
		case last:
			out = next
		case score:
			out.Kind = OutLogits
		}
		embd, attnPos := []float32(nil), p
		if len(q.req.Media) > 0 {
			embd, attnPos = q.mediaInput(p, s.m.Opts.Embd)
		}
		at := s.addRow(e, q.prompt[p], embd, p, attnPos, out)
		switch {
		case last && !q.embed:
			e.next, e.at = out, at
		case out.Kind == OutLogits:
			e.promptN++
		}
	}
	e.hidN = s.outCount[OutHidden] - e.hid
	return n
}

// commit records what the step fed in each sequence's slot, pools the
// embeddings' hidden states, and samples the sequences whose next token's
// output (or scored prompt rows) the step computed, on the workers.
func (s *Scheduler) commit() {
	E := s.m.Opts.Embd
	s.sampled = s.sampled[:0]
	for i := range s.stepSeqs {
		e := &s.stepSeqs[i]
		q := e.q
		switch {
		case q.decoding:
			s.cache[q.slot] = append(s.cache[q.slot], q.last)
			q.pos++
		case q.embed:
			s.cache[q.slot] = append(s.cache[q.slot], q.prompt[q.fed:q.fed+e.rows]...)
			q.pool.add(s.out.Hidden[e.hid*E : (e.hid+e.hidN)*E])
			q.fed += e.rows
			q.pos = q.fed
			if q.fed == len(q.prompt) {
				q.embedOut = q.pool.result(make([]float32, E))
				q.done = true
			}
			continue
		default:
			s.cache[q.slot] = append(s.cache[q.slot], q.prompt[q.fed:q.fed+e.rows]...)
			q.fed += e.rows
			q.pos = q.fed
			// Later prompts may share the full pages fed so far, and a
			// hybrid model's state at a checkpoint position.
			s.m.Blocks.CachePrefix(q.slot, s.cache[q.slot], false)
			if every := s.m.Blocks.CheckpointEvery(); every > 0 && q.fed%every == 0 && q.fed < len(q.prompt) {
				s.m.Blocks.Checkpoint(q.slot, s.cache[q.slot])
			}
		}
		if e.next.Kind != OutNone || e.promptN > 0 {
			s.sampled = append(s.sampled, e)
		}
	}
	// Sampling (grammar masks included) runs on the workers, never here.
	s.wg.Add(len(s.sampled))
	for _, e := range s.sampled {
		s.jobs <- e
	}
	s.wg.Wait()
}

func (s *Scheduler) worker() {
	for e := range s.jobs {
		s.sample(e)
		s.wg.Done()
	}
}

// scorePrompt records the log-probabilities of the prompt tokens that e's
// scored prompt rows predict; false when that failed (its sequence is
// done).
func (s *Scheduler) scorePrompt(e *stepSeq) bool {
	q, V := e.q, s.m.Opts.Vocab
	c, k := q.req.Chain, q.req.TopLogprobs
	for i := range e.promptN {
		r := e.prompt + i
		tok := q.prompt[e.fed+i+1]
		err := c.Score(s.out.Logits[r*V : (r+1)*V])
		var lp PromptLogprob
		lp.Token = tok
		if err == nil {
			lp.Logprob, err = c.Logprob(tok)
		}
		if err == nil && k > 0 {
			lp.Top, err = c.TopLogprobs(make([]sampling.TokenLogprob, 0, k), k)
		}
		if err != nil {
			q.done, q.doneErr = true, err
			return false
		}
		q.promptLP = append(q.promptLP, lp)
	}
	return true
}

// sample picks the next token of e's sequence from its logits row, or
// takes the GPU's argmax or top logits of the row, and sends it; for a
// scored prompt it first scores the step's prompt rows.
func (s *Scheduler) sample(e *stepSeq) {
	q := e.q
	if e.promptN > 0 && !s.scorePrompt(e) || e.next.Kind == OutNone {
		return
	}
	c := q.req.Chain
	var id int32
	var err error
	switch r := e.at; e.next.Kind {
	case OutArgmax:
		id, err = c.SampleArgmax(s.out.Tokens[r])
	case OutTopK:
		k := s.out.TopN
		id, err = c.SampleTopK(s.out.TopIDs[r*k:(r+1)*k], s.out.TopLogits[r*k:(r+1)*k])
	default:
		V := s.m.Opts.Vocab
		id, err = c.Sample(s.out.Logits[r*V : (r+1)*V])
	}
	if err == nil {
		err = c.Accept(id)
	}
	if err != nil {
		q.done, q.doneErr = true, err
		return
	}
	ev := Event{Token: id, EOG: s.m.Tok.IsEOG(id)}
	if q.generated == 0 {
		ev.Prompt, q.promptLP = q.promptLP, nil
		ev.Admitted, ev.Reused = q.admitted, q.reused
	}
	if q.req.Logprobs || q.req.TopLogprobs > 0 {
		if ev.Logprob, err = c.Logprob(id); err != nil {
			q.done, q.doneErr = true, err
			return
		}
		if k := q.req.TopLogprobs; k > 0 {
			// A group of one reuses a ring of rows (no allocation per
			// token). A group of several candidates shares a channel
			// of more events than one candidate's ring has rows, so
			// nothing orders the consumer's reads of an old event
			// before a reuse of its row: each event gets rows of its
			// own.
			var dst []sampling.TokenLogprob
			if q.top != nil {
				dst = q.top[q.topNext*k : q.topNext*k : (q.topNext+1)*k]
				q.topNext = (q.topNext + 1) % (len(q.top) / k)
			} else {
				dst = make([]sampling.TokenLogprob, 0, k)
			}
			if ev.Top, err = c.TopLogprobs(dst, k); err != nil {
				q.done, q.doneErr = true, err
				return
			}
		}
	}
	q.grp.send(GroupEvent{Candidate: q.cand, Event: ev}) // never blocks: a step feeds only sequences with room
	q.generated++
	q.last, q.decoding = id, true
	switch {
	case ev.EOG || q.generated >= q.req.MaxTokens:
		q.done = true
	case q.pos >= s.m.CtxSize():
		q.done, q.doneErr = true, ErrContextFull
	}
}

// mediaChunk cuts n prompt rows from q.fed so that no image is split: the
// rows stop before an image that does not fit, and an image that starts at
// q.fed is fed whole when the batch has room for it, even past the prefill
// chunk (0: wait for a step with room). It encodes the images the rows
// cover; an encoder error ends q.
func (s *Scheduler) mediaChunk(q *Sequence, n int) int {
	room := s.m.GPU.Config().BatchSize - s.batch.Len()
	for _, md := range q.req.Media {
		end := md.Start + md.N
		switch {
		case end <= q.fed || md.Start >= q.fed+n && md.Start > q.fed:
			continue
		case md.Start > q.fed:
			if end > q.fed+n {
				n = md.Start - q.fed // stop before the image
			}
		case md.Start == q.fed:
			if md.N > room {
				return 0
			}
			n = max(n, md.N)
		default:
			// q.fed inside an image: only a cache reuse could do that, and
			// start() rounds reuse down to an image's start.
			q.done, q.doneErr = true, fmt.Errorf("BUG: engine: prompt row %d inside an image (rows %d..%d)", q.fed, md.Start, end-1)
			return 0
		}
	}
	for _, md := range q.req.Media {
		if md.Start >= q.fed && md.Start < q.fed+n && md.embd == nil {
			e, err := md.Encode()
			if err == nil && len(e) != md.N*s.m.Opts.Embd {
				err = fmt.Errorf("engine: an image encoder gave %d values for %d tokens of %d", len(e), md.N, s.m.Opts.Embd)
			}
			if err != nil {
				q.done, q.doneErr = true, fmt.Errorf("engine: encoding image at prompt row %d: %w", md.Start, err)
				return 0
			}
			md.embd = e
		}
	}
	return n
}

// stepCost learns what steps cost, for the automatic prefill chunks:
// moving averages of decode-only steps, of the extra time per prompt row
// in steps that decode too, and of the time per row of prompt-only steps
// (which on GPUs run other kernels: tiled matrix products instead of
// matvec passes).
type stepCost struct {
	decode float64 // seconds per decode-only step
	row    float64 // seconds per prompt row beside decode rows
	alone  float64 // seconds per prompt row in prompt-only steps
	// mixed counts the steps with decode and prompt rows since the last
	// decode-only one (see refreshEvery).
	mixed int
}

// refreshEvery is how many steps that feed prompts beside decode rows may
// follow each other: then one decode-only step renews the decode-only
// time, which a stream of prompts would otherwise leave stale (decode
// steps grow dearer as the sequences' contexts grow, and the machine's
// speed changes), and with it every chunk. It costs a long prompt about
// one step in refreshEvery.
const refreshEvery = 16

// minAutoChunk is the smallest automatic prefill chunk beside decode rows:
// a long prompt always makes progress. Late rows of a long prompt attend
// to many keys and may each cost a good part of a decode step (on
// lavapipe, a row at position 800 of the 256x4 fixture about a third of a
// step of 8 decode rows), so the floor is one row.
const minAutoChunk = 1

// minAloneChunk is the smallest prompt-only step PromptStepTime leaves:
// narrower matrix products waste a GPU's width.
const minAloneChunk = 64

// observe records a step of decodeRows decode rows and prefillRows prompt
// rows that took d.
func (c *stepCost) observe(decodeRows, prefillRows int, d time.Duration) {
	const w = 0.2 // weight of the newest step
	sec := d.Seconds()
	switch {
	case prefillRows == 0:
		c.decode = ewma(c.decode, sec, w)
		c.mixed = 0
	case decodeRows == 0:
		c.alone = ewma(c.alone, sec/float64(prefillRows), w)
		if c.row == 0 {
			c.row = c.alone // a first guess until a mixed step is seen
		}
	case c.decode > 0:
		c.row = ewma(c.row, max(sec-c.decode, 0)/float64(prefillRows), w)
		c.mixed++
	}
}

func ewma(avg, v, w float64) float64 {
	if avg == 0 {
		return v
	}
	return avg + w*(v-avg)
}

// chunk returns how many prompt rows keep a step within factor times a
// decode-only step: 0 when the decode-only time is unknown (no decode-only
// step yet: on a server that starts under load, prompts keep arriving and
// one would otherwise never come, leaving every chunk at its minimum) or
// due for renewal (refreshEvery).
func (c *stepCost) chunk(factor float64) int {
	if c.decode == 0 || c.mixed >= refreshEvery {
		return 0
	}
	if c.row == 0 {
		return minAutoChunk
	}
	return max(minAutoChunk, int((factor-1)*c.decode/c.row))
}

// prefillReserve splits a step's prompt budget between the oldest waiting
// prompt, which has remaining rows left, and the others, when several
// wait: the oldest keeps half of it (rounded up), and a budget of one row
// grows to two where room (the rows the batch has left) allows, so that
// neither a long oldest prompt nor the short ones behind it stall.
func prefillReserve(budget, room, remaining int) (newBudget, reserve int) {
	if budget == 1 && room >= 2 {
		budget = 2
	}
	return budget, min((budget+1)/2, remaining)
}

// aloneChunk returns how many prompt rows a prompt-only step may feed to
// take about d, at least minAloneChunk; 0 means no bound (d <= 0 or
// nothing measured yet).
func (c *stepCost) aloneChunk(d time.Duration) int {
	if d <= 0 || c.alone == 0 {
		return 0
	}
	return max(minAloneChunk, int(d.Seconds()/c.alone))
}
