package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vkllm/vkllm/sampling"
)

// GenRequest is one sequence to generate.
type GenRequest struct {
	// Prompt is the tokenized prompt: at least one token, shorter than the
	// context size.
	Prompt []int32
	// Chain samples the sequence's tokens: built for the model's
	// vocabulary and primed with the prompt. It belongs to the sequence
	// from Generate on, and the scheduler uses it from one goroutine at a
	// time.
	Chain *sampling.Chain
	// MaxTokens is the most tokens to generate (>= 1).
	MaxTokens int
	// Logprobs asks for Event.Logprob; TopLogprobs for that many
	// alternatives in Event.Top.
	Logprobs    bool
	TopLogprobs int
	// Label names the sequence's request in Slots (a request id); opaque.
	Label string
	// Media are the prompt's images, in prompt order (see Media): their
	// rows hold pseudo-ids. Candidates of one request share them.
	Media []*Media
	// PromptLogprobs asks for the log-probability of each prompt token
	// after the first, given the tokens before it, with TopLogprobs
	// alternatives each, in the first Event's Prompt (echo with
	// logprobs). The prompt is then fed whole, none of it taken from a
	// cache, at most promptLogitRows of it per step. It needs a Chain made
	// with Logprobs or TopLogprobs.
	PromptLogprobs bool
	// CacheScope confines the prefix cache: the sequence reuses only the
	// prompt pages that sequences of its scope (or public ones) left, and
	// what it leaves is reused only there. The zero scope shares with
	// every other zero-scope sequence.
	CacheScope CacheScope
}

// PromptLogprob is a prompt token's log-probability given the tokens
// before it, with the most likely alternatives at its position.
type PromptLogprob struct {
	Token   int32
	Logprob float32
	Top     []sampling.TokenLogprob
}

// promptLogitRows bounds the logits rows a PromptLogprobs sequence asks of
// one step (each is a vocabulary-sized read-back).
const promptLogitRows = 64

// Event is one generated token of a Sequence.
type Event struct {
	// Token is the sampled token id; EOG reports that it ends generation.
	Token int32
	EOG   bool
	// Logprob is Token's log-probability under the model distribution
	// (GenRequest.Logprobs or TopLogprobs > 0).
	Logprob float32
	// Top holds the GenRequest.TopLogprobs most likely tokens, most likely
	// first. In a group of one candidate the slice is reused for a later
	// event once this one has been received and the consumer has received
	// the sequence's next one: copy what you keep before receiving again.
	// In a group of several candidates it belongs to the receiver.
	Top []sampling.TokenLogprob
	// Prompt is set on the first event of a GenRequest.PromptLogprobs
	// sequence: its prompt tokens' log-probabilities, from the second
	// token on. It belongs to the receiver.
	Prompt []PromptLogprob
	// Admitted and Reused are set on a sequence's first event: when it
	// took its slot (after any queueing) and how many prompt tokens it
	// took from the cache there (Sequence.Admission).
	Admitted time.Time
	Reused   int
}

// GroupEvent is one event on a Group's channel: the next token of
// candidate Candidate, or with End set, that candidate's end.
type GroupEvent struct {
	// Candidate is the index of the event's sequence in Group.Seqs (and
	// of its request in Generate's reqs).
	Candidate int
	// End reports that the candidate has ended: no event of it follows
	// and its Sequence.Err is valid. Event is zero then.
	End bool
	Event
}

// Group is the sequences of one Generate call, the candidates of one
// request. Their events come on one channel, each candidate's in order.
// Receive them from one goroutine until the channel closes, which it does
// after every candidate's End event.
type Group struct {
	seqs   []*Sequence
	events <-chan GroupEvent
}

// Seqs returns the group's sequences, candidate i at index i. The slice
// must not be modified.
func (g *Group) Seqs() []*Sequence { return g.seqs }

// Events returns the group's channel of events. A candidate whose
// consumer is SchedulerConfig.EventBuffer events behind sits out the steps
// until the consumer catches up (giving its slot to waiting sequences
// meanwhile); the others go on.
func (g *Group) Events() <-chan GroupEvent { return g.events }

// eventBuffer is the default SchedulerConfig.EventBuffer.
const eventBuffer = 1024

// Sequence is one generation or embedding run by a Scheduler. Its events
// come on its Group's channel; read Err after its End event.
type Sequence struct {
	ctx    context.Context
	stop   func() bool // unregisters the wake-up on ctx
	grp    *group
	prompt []int32
	req    GenRequest
	err    error // valid once its End event is sent
	cancel atomic.Bool

	// cand is its index in grp.members (GroupEvent.Candidate), room the
	// most events it may have waiting (eventBuffer or fewer), pending
	// those sent and not yet known to be received (under grp.mu).
	cand, room, pending int

	embed    bool
	pool     pooler
	embedOut []float32

	// Owned by the scheduler goroutine (and the sampling worker during a
	// step).
	slot      int
	fed       int   // prompt tokens whose keys and values the slot holds
	pos       int   // the next position to write
	last      int32 // the token to feed next, once decoding
	decoding  bool
	generated int
	// top is a ring of TopLogprobs rows for Event.Top, room+3 of them
	// (groups of one candidate; nil otherwise): the group's channel holds
	// room+1 events, so the consumer's receive of the event after one
	// happens before the send that precedes its row's reuse.
	top     []sampling.TokenLogprob
	topNext int
	// promptLP holds the scored prompt tokens (PromptLogprobs) until the
	// first event carries them.
	promptLP []PromptLogprob
	done     bool // finish at the end of the step (with doneErr)
	doneErr  error

	// Set when the sequence takes its slot, before its first event.
	admitted time.Time
	reused   int
	order    uint64 // admission order (the most recent is preempted first)
	resumed  bool   // preempted at least once: prompt holds its generated tokens too
}

// Err returns why the sequence ended, once its End event has been
// received: nil after an EOG token or MaxTokens tokens, ErrContextFull,
// the context's error, or the model's or sampler's error.
func (q *Sequence) Err() error { return q.err }

// Admission returns when the sequence took its slot and how many prompt
// tokens it took from the cache there. It is valid once the first event has
// been received (zero when the sequence never got a slot).
func (q *Sequence) Admission() (at time.Time, reused int) { return q.admitted, q.reused }

// Cancel ends the sequence at the scheduler's next step (its error is then
// context.Canceled). It is safe from any goroutine and at any time.
func (q *Sequence) Cancel() {
	q.cancel.Store(true)
	if q.grp != nil {
		q.grp.s.poke()
	}
}

func (q *Sequence) cancelled() error {
	if err := q.ctx.Err(); err != nil {
		return err
	}
	if q.cancel.Load() {
		return context.Canceled
	}
	return nil
}

// group is the unit of the queue: the candidates of one request, which
// share the prompt. The first is prefilled; the others are admitted once
// its prompt is in the cache and share its pages.
type group struct {
	s       *Scheduler
	members []*Sequence
	next    int // members admitted (or dropped) so far

	// events carries the members' events (Group.Events). It has room for
	// every member's room and End event, so a send never blocks. sent
	// records the candidate of each event sent and not yet known to be
	// received, oldest at head: the consumer has received the oldest
	// n-len(events) of them. mu orders the sends of the sampling workers
	// with sent. (A preempted sequence is queued again in a group of its
	// own without these; it keeps sending through its grp.)
	events  chan GroupEvent
	mu      sync.Mutex
	sent    []int32
	head, n int
	open    int // members not ended yet (scheduler goroutine)

	// Scheduler goroutine: slots counts the members holding a slot; held
	// the slots admit keeps for members waiting for their leader's prompt
	// (during one admission pass).
	slots, held int
}

// newGroup makes the group of members, each of which has its room set.
func newGroup(s *Scheduler, members []*Sequence) *group {
	size := len(members)
	for _, q := range members {
		size += q.room
	}
	g := &group{s: s, members: members, events: make(chan GroupEvent, size), sent: make([]int32, size), open: len(members)}
	for i, q := range members {
		q.grp, q.cand = g, i
	}
	return g
}

// send puts ev on the group's channel; it never blocks (see events).
func (g *group) send(ev GroupEvent) {
	g.mu.Lock()
	g.sent[(g.head+g.n)%len(g.sent)] = int32(ev.Candidate)
	g.n++
	g.members[ev.Candidate].pending++
	g.events <- ev
	g.mu.Unlock()
}

// end sends q's End event, and closes the channel after the last member's.
func (g *group) end(q *Sequence) {
	g.send(GroupEvent{Candidate: q.cand, End: true})
	if g.open--; g.open == 0 {
		close(g.events)
	}
}

// backlogged reports whether q's consumer has q.room of its events still
// to receive: q then sits out the steps until the consumer catches up.
func (q *Sequence) backlogged() bool {
	g := q.grp
	g.mu.Lock()
	defer g.mu.Unlock()
	for ; g.n > len(g.events); g.n-- { // received since the last look
		g.members[g.sent[g.head]].pending--
		g.head = (g.head + 1) % len(g.sent)
	}
	return q.pending >= q.room
}

// leaderReady reports whether the followers may be admitted: the leader's
// prompt (all but its last token) is in the cache, or the leader is gone.
func (g *group) leaderReady() bool {
	l := g.members[0]
	return l.slot < 0 && g.next > 0 || l.fed >= len(l.prompt)-1
}

// mediaAt returns the image that covers prompt row p, or nil.
func (q *Sequence) mediaAt(p int) *Media {
	for _, md := range q.req.Media {
		if p >= md.Start && p < md.Start+md.N {
			return md
		}
	}
	return nil
}

// mediaInput returns prompt row p's input embedding (nil for a token) and
// the last position it attends to.
func (q *Sequence) mediaInput(p, embd int) ([]float32, int) {
	md := q.mediaAt(p)
	if md == nil {
		return nil, p
	}
	i := p - md.Start
	attn := p
	if md.NonCausal {
		attn = md.Start + md.N - 1
	}
	return md.embd[i*embd : (i+1)*embd], attn
}
