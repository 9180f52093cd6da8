package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vkllm/vkllm/sampling"
)

// SchedulerConfig tunes a Scheduler. The zero value is a safe default.
type SchedulerConfig struct {
	// Pooling is how embeddings reduce a sequence's hidden states
	// (PoolNone: mean).
	Pooling Pooling
	// Workers is the number of goroutines that sample the rows of a step
	// in parallel (0: GOMAXPROCS, at most 8).
	Workers int
	// PrefillChunk bounds the prompt tokens one step feeds while other
	// sequences are decoding, so a long prompt that arrives stretches their
	// inter-token latency by a bounded amount. 0 chooses it from measured
	// step times: as many prompt tokens as keep a step within
	// StepLatencyFactor times a decode-only step. When nothing decodes,
	// PromptStepTime bounds the step instead.
	PrefillChunk int
	// StepLatencyFactor is how much longer than a decode-only step a step
	// that also feeds prompts may take, with PrefillChunk 0 (0: 1.25).
	StepLatencyFactor float64
	// PromptStepTime bounds a step that only feeds prompts (nothing
	// decodes), so that a request arriving during a long prompt joins
	// within about that time (0: 100 ms; negative: no bound). It feeds as
	// many prompt tokens as the measured cost per token allows, at least
	// minAloneChunk (so a slow device keeps its matrix products wide) and
	// at most the batch size.
	PromptStepTime time.Duration
	// DeviceTopK says whether a row whose sampler draws from its top k
	// logits alone asks the model for those (OutTopK) instead of the
	// whole row; PathAuto: where the model recommends it
	// (GPUModel.DeviceTopK).
	DeviceTopK Path
	// MaxRequestSeqs bounds the sequences of one Generate call (the
	// candidates of one request) that hold slots at once; its others wait
	// in the queue until one of its sequences ends (0: every slot).
	MaxRequestSeqs int
	// EventBuffer bounds the events a sequence may have waiting for its
	// consumer (0: 1024); see Group.Events.
	EventBuffer int
	// OnStep, when set, is called after each forward pass with its
	// duration and its decode and prompt rows (metrics). It runs on the
	// scheduler goroutine between steps: it must be quick and not block.
	OnStep func(d time.Duration, decodeRows, prefillRows int)
}

// ErrContextFull ends a sequence that has used every position of its slot.
var ErrContextFull = errors.New("engine: context full")

// ErrClosed ends the sequences still queued or running when the scheduler
// closes.
var ErrClosed = errors.New("engine: the scheduler is closed")

// ErrCannotGenerate is Generate's error on an encoder (an embedding or
// rerank model), which gives hidden states, not next-token logits.
var ErrCannotGenerate = errors.New("engine: the model is an encoder (embeddings and rerank only); it cannot generate text")

// Stats are a Scheduler's counters.
type Stats struct {
	Queued, Active int   // sequences waiting and running now
	Decoding       int   // running sequences past their prompt (as of the last step)
	CachedTokens   int   // KV positions held: by running sequences and by the prefix cache
	Steps          int64 // forward passes run
	DecodeRows     int64 // rows that fed a generated token
	PrefillRows    int64 // rows that fed a prompt token
	ReusedTokens   int64 // prompt tokens taken from the prefix cache instead of being fed
	PromptTokens   int64 // prompt tokens of admitted sequences (ReusedTokens / PromptTokens: the hit rate)
	Preempted      int64 // sequences preempted for want of KV pages (recomputed later)
	// Parked counts the sequences that gave up their slot to waiting
	// ones because their consumer was behind (recomputed later).
	Parked int64
	// ArgmaxRows counts the tokens chosen from the GPU's argmax of their
	// row (greedy sequences) rather than by sampling a read-back row.
	ArgmaxRows int64
	// TopKRows counts the tokens drawn from the GPU's top k logits of
	// their row rather than from a read-back row.
	TopKRows int64
	// ReadBytes counts the bytes of results read back from the device
	// (logits rows, argmax ids, top logits, hidden states) over all steps.
	ReadBytes int64
	// KV describes the page pool, as of the last step.
	KV KVStats
}

// SlotPhase is what a KV-cache slot is doing.
type SlotPhase int

// The phases of a slot.
const (
	SlotIdle      SlotPhase = iota // no sequence (it may keep a cached prompt)
	SlotPrefill                    // a generation feeding its prompt
	SlotDecoding                   // a generation past its prompt
	SlotEmbedding                  // an embedding feeding its tokens
)

// String returns "idle", "prefill", "decoding" or "embedding".
func (p SlotPhase) String() string {
	switch p {
	case SlotPrefill:
		return "prefill"
	case SlotDecoding:
		return "decoding"
	case SlotEmbedding:
		return "embedding"
	}
	return "idle"
}

// SlotState describes one KV-cache slot, as of the scheduler's last step.
type SlotState struct {
	Phase     SlotPhase
	Label     string // GenRequest.Label of the sequence in it
	Cached    int    // positions whose keys and values it holds
	Prompt    int    // prompt tokens of the sequence in it
	Fed       int    // of which in the cache (reused or fed)
	Reused    int    // of which taken from the cache
	Generated int    // tokens generated so far
	MaxTokens int    // the sequence's budget (0 for embeddings)
	// StatePos is how many positions the slot's recurrent state holds (a
	// hybrid model's; 0 otherwise), whether a sequence is in it or not:
	// a prompt that starts with those tokens continues from it.
	StatePos int
}

// Scheduler runs every sequence of a Model: one goroutine owns the model
// and builds each step's batch from one decode row per generating sequence
// plus chunks of the prompts being prefilled (within the batch size), runs
// one forward pass, and samples every sequence's next token in parallel on
// a small pool of workers.
//
// The KV cache is one pool of pages (see Model). Requests wait in a queue
// and are admitted when a slot (a page-table row) is free and the pages of
// their prompt are: the free ones and those of cached prefixes,
// which are evicted least recently used first. A prompt starts from the
// longest prefix the prefix cache holds (whole pages shared, the last
// partial one copied when written) and prefills only the rest; running and
// finished sequences leave their pages there. When a decoding sequence
// needs a page and none is left, the most recently admitted sequence is
// preempted: its pages go back (to the prefix cache), it returns to the
// front of the queue and is recomputed when admitted again, its generated
// tokens kept, so its consumer sees only a delay.
//
// Admission is fair between requests (Generate calls): the next slot goes
// to the waiting request with the fewest sequences in slots, the oldest
// first among equals, and no request holds more than
// SchedulerConfig.MaxRequestSeqs. A sequence whose consumer is a full
// buffer behind sits out the steps; when others wait for a slot it gives
// its slot up the way a preempted one does (parked), and waits in the
// queue until its consumer catches up, so a client that stops reading
// stalls only its own request, whatever its number of candidates.
//
// Its methods are safe from any goroutine. The Model must not be used by
// anything else until Close returns.
type Scheduler struct {
	m    *Model
	cfg  SchedulerConfig
	wake chan struct{}
	quit chan struct{}
	done chan struct{}

	eventCap int // events a sequence may have waiting (SchedulerConfig.EventBuffer)

	mu     sync.Mutex
	queue  []*group
	closed bool
	queued atomic.Int32

	steps, decodeRows, prefillRows, reused atomic.Int64
	promptTokens, preempted, parked        atomic.Int64
	argmaxRows, topKRows, readBytes        atomic.Int64
	nActive, nDecoding, nCached            atomic.Int32

	viewMu sync.Mutex
	view   []SlotState // what Slots reports, refreshed by publish
	kv     KVStats     // what Stats reports of the pool, refreshed by publish

	// Owned by the scheduler goroutine.
	active  []*Sequence
	slotSeq []*Sequence // the sequence running in each slot, nil when free
	cache   [][]int32   // the tokens each slot holds keys and values of
	clock   uint64      // admissions so far (Sequence.order)
	batch   Batch
	// stepMedia says the current step feeds input embeddings (media.go):
	// the batch then carries Embeds and AttnPos.
	stepMedia bool
	embeds    [][]float32 // the step's Batch.Embeds and AttnPos
	attnPos   []int32
	out       Output
	// stepSeqs is the current step's table (step.go): the sequences in
	// row order, with their rows and outputs; outCount counts the step's
	// output rows of each kind so far.
	stepSeqs []stepSeq
	outCount [OutHidden + 1]int
	waiting  []*Sequence // step's scratch: the prompts to feed, in feeding order
	sampled  []*stepSeq
	gone     []*Sequence // retire's scratch
	jobs     chan *stepSeq
	wg       sync.WaitGroup
	idle     *time.Timer
	cost     stepCost
}

// NewScheduler starts the scheduler goroutine and the sampling workers of
// m. Close stops them.
func NewScheduler(m *Model, cfg SchedulerConfig) *Scheduler {
	s := newScheduler(m, cfg)
	s.run()
	return s
}

// run starts the scheduler goroutine.
func (s *Scheduler) run() { go s.loop() }

func newScheduler(m *Model, cfg SchedulerConfig) *Scheduler {
	if cfg.Pooling == PoolNone {
		cfg.Pooling = PoolMean
	}
	if cfg.Workers <= 0 {
		cfg.Workers = min(runtime.GOMAXPROCS(0), 8)
	}
	B := m.GPU.Config().BatchSize
	if cfg.PrefillChunk > B {
		cfg.PrefillChunk = B
	}
	if cfg.PromptStepTime == 0 {
		cfg.PromptStepTime = 100 * time.Millisecond
	}
	if cfg.DeviceTopK == PathAuto {
		cfg.DeviceTopK = PathOff
		if m.GPU.DeviceTopK() {
			cfg.DeviceTopK = PathOn
		}
	}
	if cfg.StepLatencyFactor <= 1 {
		cfg.StepLatencyFactor = 1.25
	}
	n := m.Slots()
	if cfg.MaxRequestSeqs <= 0 || cfg.MaxRequestSeqs > n {
		cfg.MaxRequestSeqs = n
	}
	if cfg.EventBuffer <= 0 {
		cfg.EventBuffer = eventBuffer
	}
	s := &Scheduler{m: m, cfg: cfg, wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		slotSeq: make([]*Sequence, n), cache: make([][]int32, n),
		batch: Batch{Tokens: make([]int32, 0, B), Slots: make([]int32, 0, B), Pos: make([]int32, 0, B), Out: make([]RowOut, 0, B)},
		// Sampling reads the step's results where the model left them
		// (valid until the next forward pass, which waits for it).
		out:      Output{Borrow: true},
		stepSeqs: make([]stepSeq, 0, n), sampled: make([]*stepSeq, 0, n), gone: make([]*Sequence, 0, n), active: make([]*Sequence, 0, n),
		jobs: make(chan *stepSeq, n), idle: time.NewTimer(time.Hour), eventCap: cfg.EventBuffer, view: make([]SlotState, n)}
	for i := range s.cache {
		s.cache[i] = make([]int32, 0, m.CtxSize())
	}
	for range cfg.Workers {
		go s.worker()
	}
	return s
}

// Stats returns the scheduler's counters.
func (s *Scheduler) Stats() Stats {
	st := Stats{Queued: int(s.queued.Load()), Active: int(s.nActive.Load()), Steps: s.steps.Load(),
		Decoding: int(s.nDecoding.Load()), CachedTokens: int(s.nCached.Load()),
		DecodeRows: s.decodeRows.Load(), PrefillRows: s.prefillRows.Load(), ReusedTokens: s.reused.Load(),
		PromptTokens: s.promptTokens.Load(), Preempted: s.preempted.Load(), Parked: s.parked.Load(),
		ArgmaxRows: s.argmaxRows.Load(), TopKRows: s.topKRows.Load(), ReadBytes: s.readBytes.Load()}
	s.viewMu.Lock()
	st.KV = s.kv
	s.viewMu.Unlock()
	return st
}

// Slots returns what each KV-cache slot is doing, as of the last step.
func (s *Scheduler) Slots() []SlotState {
	s.viewMu.Lock()
	defer s.viewMu.Unlock()
	return append([]SlotState(nil), s.view...)
}

// publish refreshes what Stats and Slots report from the scheduler
// goroutine's state; it allocates nothing.
func (s *Scheduler) publish() {
	decoding, cached := 0, 0
	s.viewMu.Lock()
	kv := s.m.KV()
	cached = kv.CachedTokens
	for t, q := range s.slotSeq {
		n := min(len(s.cache[t]), s.m.Blocks.Len(t))
		if q != nil {
			cached += n
		}
		v := SlotState{}
		if q != nil {
			v = SlotState{Phase: SlotPrefill, Label: q.req.Label, Cached: n, Prompt: len(q.prompt), Fed: q.fed,
				Reused: q.reused, Generated: q.generated, MaxTokens: q.req.MaxTokens}
			switch {
			case q.embed:
				v.Phase = SlotEmbedding
			case q.decoding:
				v.Phase = SlotDecoding
				decoding++
			}
		}
		v.StatePos = s.m.Blocks.StatePos(t)
		s.view[t] = v
	}
	s.kv = kv
	s.viewMu.Unlock()
	s.nDecoding.Store(int32(decoding))
	s.nCached.Store(int32(cached))
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Generate queues the candidates reqs of one request, which must share
// their prompt, and returns their group. They run together: the prompt is
// prefilled once and copied to the others' slots. Cancelling ctx ends them
// all at the next step; Sequence.Cancel ends one. It fails when the
// scheduler is closed, reqs is empty or larger than the number of slots,
// or a request is malformed.
func (s *Scheduler) Generate(ctx context.Context, reqs []GenRequest) (*Group, error) {
	if s.m.Opts.Encoder {
		return nil, ErrCannotGenerate
	}
	if len(reqs) == 0 || len(reqs) > s.m.Slots() {
		return nil, fmt.Errorf("engine: %d candidates for %d slots", len(reqs), s.m.Slots())
	}
	members := make([]*Sequence, len(reqs))
	for i, r := range reqs {
		if err := s.checkMediaPrompt(r.Prompt, r.Media); err != nil {
			return nil, err
		}
		if err := s.checkFits(len(r.Prompt), len(reqs)); err != nil {
			return nil, err
		}
		if i > 0 && !equalTokens(r.Prompt, reqs[0].Prompt) {
			return nil, fmt.Errorf("engine: candidate %d has another prompt than candidate 0", i)
		}
		if r.Chain == nil || r.MaxTokens < 1 || r.TopLogprobs < 0 {
			return nil, fmt.Errorf("engine: candidate %d: no sampling chain, %d max tokens or %d top logprobs", i, r.MaxTokens, r.TopLogprobs)
		}
		q := &Sequence{ctx: ctx, prompt: r.Prompt, req: r, slot: -1,
			room: min(r.MaxTokens+1, s.eventCap)}
		if r.TopLogprobs > 0 && len(reqs) == 1 {
			q.top = make([]sampling.TokenLogprob, (q.room+3)*r.TopLogprobs)
		}
		members[i] = q
	}
	g := newGroup(s, members)
	if err := s.enqueue(g); err != nil {
		return nil, err
	}
	return &Group{seqs: g.members, events: g.events}, nil
}

// Embed runs tokens through the model and returns their pooled final
// hidden state (after the output norm; pooled as SchedulerConfig.Pooling
// says), [Embd]. It waits in the same queue and joins the same steps as
// the generations. It returns ctx's error when cancelled.
func (s *Scheduler) Embed(ctx context.Context, tokens []int32) ([]float32, error) {
	if err := s.m.checkEmbed(tokens, s.cfg.Pooling); err != nil {
		return nil, err
	}
	if err := s.checkPrompt(tokens); err != nil {
		return nil, err
	}
	if err := s.checkFits(len(tokens), 1); err != nil {
		return nil, err
	}
	q := &Sequence{ctx: ctx, prompt: tokens, embed: true, slot: -1,
		pool: newPooler(s.cfg.Pooling, len(tokens), s.m.Opts.Embd, s.m.Classifier)}
	g := newGroup(s, []*Sequence{q})
	if err := s.enqueue(g); err != nil {
		return nil, err
	}
	for range g.events {
	}
	if q.err != nil {
		return nil, q.err
	}
	return q.embedOut, nil
}

func (s *Scheduler) checkPrompt(p []int32) error {
	if len(p) == 0 || len(p) > s.m.CtxSize() {
		return fmt.Errorf("engine: a prompt of %d tokens for a context of %d", len(p), s.m.CtxSize())
	}
	for i, id := range p {
		if id < 0 || int(id) >= s.m.Opts.Vocab {
			return fmt.Errorf("engine: prompt token %d (index %d) outside the vocabulary of %d", id, i, s.m.Opts.Vocab)
		}
	}
	return nil
}

// ErrKVTooSmall is the error of a request whose prompt cannot fit the KV
// page pool even with nothing else running.
var ErrKVTooSmall = errors.New("engine: the KV cache is too small for the request")

// checkFits fails with ErrKVTooSmall when a prompt of n tokens, plus the
// first page of each of its candidates' own tokens, needs more pages than
// the whole pool.
func (s *Scheduler) checkFits(n, candidates int) error {
	kv := s.m.GPU.Config() // fixed at load: safe from any goroutine
	if kv.Pages == 0 {
		return nil // an encoder: no cache
	}
	need := (n+kv.PageSize-1)/kv.PageSize + candidates - 1
	if need > kv.Pages {
		return fmt.Errorf("%w: a prompt of %d tokens for %d candidates needs %d pages of %d positions; the pool has %d (%d positions; raise --kv-memory)",
			ErrKVTooSmall, n, candidates, need, kv.PageSize, kv.Pages, kv.Pages*kv.PageSize)
	}
	return nil
}

func equalTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (s *Scheduler) enqueue(g *group) error {
	for _, q := range g.members {
		q.stop = context.AfterFunc(q.ctx, s.poke)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		for _, q := range g.members {
			q.stop()
		}
		return ErrClosed
	}
	s.queue = append(s.queue, g)
	s.queued.Add(int32(len(g.members)))
	s.mu.Unlock()
	s.poke()
	return nil
}

// Close ends every queued and running sequence with ErrClosed and stops
// the scheduler. The Model is free for other use once it returns.
func (s *Scheduler) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.quit)
	<-s.done
}

func (s *Scheduler) loop() {
	defer close(s.done)
	defer close(s.jobs)
	for {
		select {
		case <-s.quit:
			s.shutdown()
			return
		default:
		}
		s.dropCancelled()
		s.admit()
		if len(s.active) == 0 && s.queued.Load() == 0 {
			select {
			case <-s.wake:
			case <-s.quit:
			}
			continue
		}
		if len(s.active) == 0 || !s.step() {
			// Every running or parked sequence waits for its consumer
			// (whose reads do not wake the loop): look again soon (or
			// when something new arrives).
			s.idle.Reset(2 * time.Millisecond)
			select {
			case <-s.wake:
			case <-s.idle.C:
			case <-s.quit:
			}
			s.idle.Stop()
		}
	}
}

// shutdown ends everything with ErrClosed.
func (s *Scheduler) shutdown() {
	s.retire(func(*Sequence) (bool, error) { return true, ErrClosed })
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.queue {
		for _, q := range g.members[g.next:] {
			s.queued.Add(-1)
			s.finish(q, ErrClosed)
		}
	}
	s.queue = nil
}

// finish ends q with err and frees its slot.
func (s *Scheduler) finish(q *Sequence, err error) {
	if q.slot >= 0 && s.slotSeq[q.slot] == q {
		s.release(q)
	}
	q.slot = -1
	q.err = err
	if q.stop != nil {
		q.stop()
	}
	q.grp.end(q)
}

// dropCancelled ends the running sequences whose context is done or that
// were cancelled.
func (s *Scheduler) dropCancelled() {
	s.retire(func(q *Sequence) (bool, error) {
		err := q.cancelled()
		return err != nil, err
	})
}

// retire ends the running sequences for which ended reports true, with the
// error it gives, and drops them from the active list.
//
// The counts Stats and Slots report are updated before the sequences' End
// events are sent, so a consumer that has received one never sees its
// sequence still counted.
func (s *Scheduler) retire(ended func(q *Sequence) (bool, error)) {
	kept, gone := s.active[:0], s.gone[:0]
	for _, q := range s.active {
		if end, err := ended(q); end {
			q.err = err
			gone = append(gone, q)
			continue
		}
		kept = append(kept, q)
	}
	clear(s.active[len(kept):])
	s.active = kept
	s.nActive.Store(int32(len(s.active)))
	for _, q := range gone {
		if q.slot >= 0 && s.slotSeq[q.slot] == q {
			s.release(q)
		}
	}
	s.publish()
	for _, q := range gone {
		s.finish(q, q.err)
	}
	clear(gone)
	s.gone = gone[:0]
}

// release leaves the pages of q's slot in the prefix cache (the tokens
// whose keys and values it holds) and frees the slot.
func (s *Scheduler) release(q *Sequence) {
	t := q.slot
	if toks := s.cache[t]; len(toks) > 0 && len(toks) <= s.m.Blocks.Len(t) && !q.embed {
		s.m.Blocks.CachePrefix(t, toks, true)
	}
	s.m.Blocks.Truncate(t, 0)
	s.cache[t] = s.cache[t][:0]
	s.slotSeq[t] = nil
	q.grp.slots--
}

// admit moves queued sequences into free slots while the KV pool has the
// pages of their prompts. Each free slot goes to the waiting request
// (group) with the fewest sequences in slots, the oldest first among
// equals, within SchedulerConfig.MaxRequestSeqs. A group's followers wait
// for their leader's prompt; a slot they win is kept for them meanwhile.
// A sequence whose consumer is behind is not admitted; when slots are
// wanted and none is free, running ones whose consumer is behind are
// parked for them. When the pool lacks the pages of the sequence whose
// turn it is, nothing passes it.
func (s *Scheduler) admit() {
	free := 0
	for _, q := range s.slotSeq {
		if q == nil {
			free++
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.queue {
		g.held = 0
	}
	for {
		g := s.nextTurn()
		if g == nil {
			break
		}
		if free == 0 {
			if !s.park() {
				break
			}
			free = 1
		}
		if g.next > 0 && !g.leaderReady() {
			g.held++ // kept for a follower
			free--
			continue
		}
		q := g.members[g.next]
		if !s.start(q) {
			break
		}
		g.next++
		s.queued.Add(-1)
		free--
		if g.next == len(g.members) {
			s.unqueue(g)
		}
	}
	for _, g := range s.queue {
		g.held = 0
	}
	s.nActive.Store(int32(len(s.active)))
	s.publish()
}

// nextTurn returns the queued group whose next sequence (or kept slot)
// comes next, nil when none may take a slot now: of the groups under
// MaxRequestSeqs whose next sequence's consumer is not behind, the one
// whose request holds the fewest slots, the oldest first among equals.
// It ends the cancelled sequences it meets. It runs under s.mu.
func (s *Scheduler) nextTurn() *group {
	var best *group
	bestN := 0
	for gi := 0; gi < len(s.queue); {
		g := s.queue[gi]
		for g.next < len(g.members) {
			q := g.members[g.next]
			err := q.cancelled()
			if err == nil {
				break
			}
			g.next++
			s.queued.Add(-1)
			s.finish(q, err)
		}
		if g.next == len(g.members) {
			s.unqueue(g)
			continue
		}
		gi++
		q := g.members[g.next]
		// A parked sequence waits in a queue group of its own; its
		// request is its Generate call's group.
		req := q.grp
		n := req.slots + req.held
		if g.next+g.held >= len(g.members) || n >= s.cfg.MaxRequestSeqs || q.resumed && q.backlogged() {
			continue
		}
		if best == nil || n < bestN {
			best, bestN = g, n
		}
	}
	return best
}

// unqueue removes g from the queue (under s.mu).
func (s *Scheduler) unqueue(g *group) {
	if i := slices.Index(s.queue, g); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
	}
	g.held = 0
}

// park frees a slot for a waiting sequence by parking the most recently
// admitted running sequence whose consumer is behind: it gives up its slot
// and pages as a preempted one does and waits in the queue until its
// consumer catches up. False when no running sequence is behind. It runs
// under s.mu.
func (s *Scheduler) park() bool {
	for i := len(s.active) - 1; i >= 0; i-- {
		q := s.active[i]
		if q.embed || !q.backlogged() {
			continue
		}
		s.vacate(q)
		s.queue = slices.Insert(s.queue, 0, &group{s: s, members: []*Sequence{q}})
		s.queued.Add(1)
		s.parked.Add(1)
		return true
	}
	return false
}

// start binds q to a free slot holding the longest cached prefix of its
// prompt and reserves the pages of the rest, and makes it active; false
// (nothing changed) when the pool lacks the pages. A follower shares its
// leader's prompt pages.
func (s *Scheduler) start(q *Sequence) bool {
	slot := 0
	for s.slotSeq[slot] != nil {
		slot++
	}
	// Every row of an embedding needs its hidden state, and every row of
	// a scored prompt its logits: nothing is reused. A follower shares
	// its leader's prompt while the leader holds it.
	a := Admission{Prompt: q.prompt, Fresh: q.embed || q.req.PromptLogprobs, Leader: -1, Scope: q.req.CacheScope}
	if l := q.grp.members[0]; l != q && l.slot >= 0 && !l.resumed && l.fed >= len(q.prompt)-1 && !q.resumed {
		a.Leader = l.slot
	}
	if !q.embed && len(q.req.Media) > 0 {
		a.Boundary = func(n int) int { return mediaBoundary(q.req.Media, n) } // never half an image
	}
	reuse, ok := s.m.Blocks.Admit(slot, a)
	if !ok {
		return false
	}
	s.slotSeq[slot] = q
	q.grp.slots++
	q.slot = slot
	s.cache[slot] = append(s.cache[slot][:0], q.prompt[:reuse]...)
	s.reused.Add(int64(reuse))
	s.promptTokens.Add(int64(len(q.prompt)))
	if q.admitted.IsZero() {
		q.admitted = time.Now()
	}
	q.reused += reuse
	s.clock++
	q.order = s.clock
	q.fed, q.pos = reuse, reuse
	s.active = append(s.active, q)
	return true
}

// reserveDecode gives every decoding sequence that will feed a row this
// step the page of its next position, preempting the most recently
// admitted sequences while the pool has none; a sequence that needs a page
// when it runs alone ends with ErrContextFull.
func (s *Scheduler) reserveDecode() (ended bool) {
	for i := 0; i < len(s.active); i++ {
		q := s.active[i]
		if !q.decoding || q.backlogged() {
			continue
		}
		for s.m.Blocks.Reserve(q.slot, q.pos, q.pos+1) != nil {
			v := s.active[len(s.active)-1] // the most recently admitted
			if v == q && len(s.active) == 1 {
				q.done, q.doneErr, ended = true, ErrContextFull, true
				break
			}
			s.preempt(v)
			if v == q {
				break
			}
		}
	}
	return ended
}

// preempt takes q's slot and pages (they stay in the prefix cache until
// evicted) and puts it back at the front of the queue, to be recomputed:
// its prompt becomes the prompt and the tokens generated so far, whose
// prefill ends in the logits of its next token.
func (s *Scheduler) preempt(q *Sequence) {
	s.vacate(q)
	s.preempted.Add(1)
	g := &group{s: s, members: []*Sequence{q}}
	s.mu.Lock()
	s.queue = slices.Insert(s.queue, 0, g)
	s.queued.Add(1)
	s.mu.Unlock()
}

// vacate takes q's slot and pages (they stay in the prefix cache until
// evicted) and drops it from the active list; its prompt becomes the
// prompt and the tokens generated so far, to be recomputed when it takes a
// slot again (preempt, park).
func (s *Scheduler) vacate(q *Sequence) {
	t := q.slot
	if q.decoding {
		q.prompt = append(append(make([]int32, 0, len(s.cache[t])+1), s.cache[t]...), q.last)
		q.resumed = true
	}
	if q.embed {
		q.pool = newPooler(s.cfg.Pooling, len(q.prompt), s.m.Opts.Embd, s.m.Classifier)
	}
	s.release(q)
	q.slot, q.fed, q.pos, q.decoding = -1, 0, 0, false
	if i := slices.Index(s.active, q); i >= 0 {
		s.active = slices.Delete(s.active, i, i+1)
	}
	s.nActive.Store(int32(len(s.active)))
}

// reap ends the sequences marked done in this step.
func (s *Scheduler) reap() {
	s.retire(func(q *Sequence) (bool, error) { return q.done, q.doneErr })
}

// checkMediaPrompt checks a prompt with images: pseudo-ids (negative) only
// on image rows, images inside the prompt, in order, each fitting one batch
// (an image is one prefill unit), and the prompt ending in text.
func (s *Scheduler) checkMediaPrompt(p []int32, media []*Media) error {
	if len(media) == 0 {
		return s.checkPrompt(p)
	}
	if len(p) == 0 || len(p) > s.m.CtxSize() {
		return fmt.Errorf("engine: a prompt of %d tokens for a context of %d", len(p), s.m.CtxSize())
	}
	next := 0
	for i, md := range media {
		switch {
		case md == nil || md.Encode == nil && md.embd == nil:
			return fmt.Errorf("engine: image %d has no encoder", i)
		case md.N <= 0 || md.Start < next || md.Start+md.N >= len(p):
			return fmt.Errorf("engine: image %d at prompt rows %d..%d of %d: out of order or not followed by text", i, md.Start, md.Start+md.N-1, len(p))
		case md.N > s.m.GPU.Config().BatchSize:
			return fmt.Errorf("engine: image %d has %d tokens, more than the batch size %d (an image is fed in one batch)", i, md.N, s.m.GPU.Config().BatchSize)
		}
		for j := next; j < md.Start; j++ {
			if p[j] < 0 || int(p[j]) >= s.m.Opts.Vocab {
				return fmt.Errorf("engine: prompt token %d (index %d) outside the vocabulary of %d", p[j], j, s.m.Opts.Vocab)
			}
		}
		next = md.Start + md.N
	}
	for j := next; j < len(p); j++ {
		if p[j] < 0 || int(p[j]) >= s.m.Opts.Vocab {
			return fmt.Errorf("engine: prompt token %d (index %d) outside the vocabulary of %d", p[j], j, s.m.Opts.Vocab)
		}
	}
	return nil
}
