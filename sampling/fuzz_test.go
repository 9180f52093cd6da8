package sampling

import (
	"errors"
	"math"
	"testing"
)

// FuzzSample drives every sampler with arbitrary parameters and logits
// (NaN, ±Inf, huge and tiny values included): Sample must not panic, must
// return a token whose edited logit is finite or +Inf, and may fail only
// with ErrNoCandidates when no such token exists.
func FuzzSample(f *testing.F) {
	f.Add(uint64(1), uint8(0), uint8(0), uint16(40), []byte{1, 2, 3, 4, 5})
	f.Add(uint64(2), uint8(1), uint8(3), uint16(0), []byte{0xff, 0x80, 0x7f, 0x00})
	f.Add(uint64(3), uint8(2), uint8(7), uint16(1), []byte{0x7f, 0x80, 0x00, 0x00, 0xff, 0x80, 0x00, 0x00})
	f.Add(uint64(4), uint8(0), uint8(5), uint16(3000), make([]byte, 64))
	f.Fuzz(func(t *testing.T, seed uint64, mode, knobs uint8, topK uint16, raw []byte) {
		if len(raw) == 0 {
			return
		}
		p := DefaultParams()
		p.Seed = int64(seed)
		p.MirostatMode = int(mode % 3)
		p.TopK = int(topK)
		p.Temperature = []float64{0, 0.3, 1, 2.5}[knobs&3]
		p.TopP = []float64{1, 0.9, 0.3, 0}[(knobs>>2)&3]
		p.MinP = []float64{0, 0.05, 0.5, 1}[(knobs>>4)&3]
		p.TFSZ = []float64{1, 0.5}[(knobs>>6)&1]
		p.TypicalP = []float64{1, 0.7}[(knobs>>7)&1]
		p.MinKeep = int(seed % 5)
		p.RepeatPenalty = 1.3
		p.PresencePenalty = 0.5
		p.MinTokens = int(seed % 3)
		p.Logprobs = true
		// One logit per byte: a few special values, the rest spread out.
		logits := make([]float32, len(raw))
		for i, b := range raw {
			switch b {
			case 0xff:
				logits[i] = float32(math.NaN())
			case 0xfe:
				logits[i] = float32(math.Inf(-1))
			case 0xfd:
				logits[i] = float32(math.Inf(1))
			case 0xfc:
				logits[i] = math.MaxFloat32
			case 0xfb:
				logits[i] = -math.MaxFloat32
			default:
				logits[i] = (float32(b) - 128) / 8
			}
		}
		c, err := NewChain(p, Vocab{Size: len(logits), EOG: []int32{0}}, nil)
		if err != nil {
			t.Fatalf("NewChain = %v", err)
		}
		for step := 0; step < 3; step++ {
			row := append([]float32(nil), logits...)
			id, err := c.Sample(row)
			if err != nil {
				if !errors.Is(err, ErrNoCandidates) {
					t.Fatalf("Sample() = %v", err)
				}
				for i, l := range row {
					if l == l && l > float32(math.Inf(-1)) {
						t.Fatalf("Sample() = ErrNoCandidates but token %d has logit %v", i, l)
					}
				}
				return
			}
			if id < 0 || int(id) >= len(row) || row[id] != row[id] || math.IsInf(float64(row[id]), -1) {
				t.Fatalf("Sample() = %d with edited logit %v, want a finite candidate", id, row[id])
			}
			lp, err := c.Logprob(id)
			if err != nil || (logits[id] == logits[id] && (lp != lp || lp > 0)) {
				t.Fatalf("Logprob(%d) with raw logit %v = %v, %v, want a log-probability", id, logits[id], lp, err)
			}
			if err := c.Accept(id); err != nil {
				t.Fatalf("Accept(%d) = %v", id, err)
			}
		}
	})
}
