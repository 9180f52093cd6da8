package sampling

// penalties holds the token history of the penalty window and applies the
// repeat, frequency and presence penalties the way llama.cpp does.
type penalties struct {
	lastN    int     // window length; -1 whole history
	repeat   float32 // 1 off
	freq     float32
	presence float32

	// hist holds the window in arrival order as a ring once full
	// (lastN > 0); for lastN == -1 nothing leaves the window and hist
	// stays empty.
	hist []int32
	head int // index of the oldest entry once len(hist) == lastN

	counts   []int32 // occurrences of each token id in the window
	distinct []int32 // ids with counts > 0, in no particular order
}

// newPenalties returns nil when the penalties cannot change any logit.
func newPenalties(p *Params, vocabSize int) *penalties {
	if p.PenaltyLastN == 0 || (p.RepeatPenalty == 1 && p.FrequencyPenalty == 0 && p.PresencePenalty == 0) {
		return nil
	}
	pen := &penalties{
		lastN:    p.PenaltyLastN,
		repeat:   float32(p.RepeatPenalty),
		freq:     float32(p.FrequencyPenalty),
		presence: float32(p.PresencePenalty),
		counts:   make([]int32, vocabSize),
	}
	// Reserve the usual window up front; a window longer than this grows
	// the slices by doubling, a handful of times per sequence at most.
	reserve := 4096
	if pen.lastN > 0 && pen.lastN < reserve {
		reserve = pen.lastN
	}
	if pen.lastN > 0 {
		pen.hist = make([]int32, 0, reserve)
	}
	pen.distinct = make([]int32, 0, min(reserve, vocabSize))
	return pen
}

func (pen *penalties) clone() *penalties {
	c := *pen
	c.hist = append(make([]int32, 0, cap(pen.hist)), pen.hist...)
	c.counts = append([]int32(nil), pen.counts...)
	c.distinct = append(make([]int32, 0, cap(pen.distinct)), pen.distinct...)
	return &c
}

func (pen *penalties) reset() {
	for _, id := range pen.distinct {
		pen.counts[id] = 0
	}
	pen.distinct = pen.distinct[:0]
	pen.hist = pen.hist[:0]
	pen.head = 0
}

// accept appends id to the window, dropping the oldest token when full.
func (pen *penalties) accept(id int32) {
	if pen.lastN > 0 {
		if len(pen.hist) < pen.lastN {
			pen.hist = append(pen.hist, id)
		} else {
			old := pen.hist[pen.head]
			pen.hist[pen.head] = id
			pen.head++
			if pen.head == len(pen.hist) {
				pen.head = 0
			}
			pen.counts[old]--
			if pen.counts[old] == 0 {
				pen.removeDistinct(old)
			}
		}
	}
	pen.counts[id]++
	if pen.counts[id] == 1 {
		pen.distinct = append(pen.distinct, id)
	}
}

func (pen *penalties) removeDistinct(id int32) {
	for i, d := range pen.distinct {
		if d == id {
			last := len(pen.distinct) - 1
			pen.distinct[i] = pen.distinct[last]
			pen.distinct = pen.distinct[:last]
			return
		}
	}
	panic("BUG: sampling: penalty window lost track of a token")
}

// apply penalizes every token in the window. A positive logit is divided by
// the repeat penalty and a non-positive one multiplied, so a penalty above 1
// always makes the token less likely (dividing a negative logit would raise
// it); then count*frequency + presence is subtracted.
func (pen *penalties) apply(logits []float32) {
	for _, id := range pen.distinct {
		l := logits[id]
		if l <= 0 {
			l *= pen.repeat
		} else {
			l /= pen.repeat
		}
		l -= float32(pen.counts[id])*pen.freq + pen.presence
		logits[id] = l
	}
}
