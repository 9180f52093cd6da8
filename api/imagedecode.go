package api

import (
	"context"
	"sync"
)

// Decoding an image costs memory far beyond its file's size (a 0.4 MB PNG
// of 40 megapixels at 16 bits per sample decodes to 320 MiB) and seconds
// of a core. So each decode first reserves, from its header alone, the
// memory it holds at its peak (Projector.DecodeCost) and one of a few
// decode slots, waiting for both while the request's client stays; the
// reservation ends when the decode does. The decodes of all requests then
// hold at most Config.MaxImageDecodeBytes and use at most
// Config.MaxImageDecodes cores at once.

// Image decoding's defaults (Config: zero means these, never unlimited).
const (
	defaultMaxImageDecodes     = 2
	defaultMaxImageDecodeBytes = 1 << 30
)

// decodeGate reserves decode slots and decode memory. The zero value is
// unusable; newDecodeGate makes one.
type decodeGate struct {
	maxSlots int
	maxBytes int64

	mu      sync.Mutex
	slots   int           // slots in use
	bytes   int64         // bytes reserved
	waiting int           // acquire calls waiting
	wake    chan struct{} // closed (and replaced) when a reservation ends
}

func newDecodeGate(maxSlots int, maxBytes int64) *decodeGate {
	if maxSlots <= 0 {
		maxSlots = defaultMaxImageDecodes
	}
	if maxBytes <= 0 {
		maxBytes = defaultMaxImageDecodeBytes
	}
	return &decodeGate{maxSlots: maxSlots, maxBytes: maxBytes, wake: make(chan struct{})}
}

// acquire reserves a slot and cost bytes, waiting until both are free or
// ctx is done (then it returns ctx.Err() and holds nothing). cost must be
// at most the gate's maxBytes. Call release once the decode is over.
func (g *decodeGate) acquire(ctx context.Context, cost int64) (release func(), err error) {
	for {
		g.mu.Lock()
		if g.slots < g.maxSlots && g.bytes+cost <= g.maxBytes {
			g.slots++
			g.bytes += cost
			g.mu.Unlock()
			return sync.OnceFunc(func() { g.release(cost) }), nil
		}
		wake := g.wake
		g.waiting++
		g.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
		}
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

func (g *decodeGate) release(cost int64) {
	g.mu.Lock()
	g.slots--
	g.bytes -= cost
	close(g.wake)
	g.wake = make(chan struct{})
	g.mu.Unlock()
}

// usage returns the slots and bytes reserved and the acquire calls
// waiting.
func (g *decodeGate) usage() (slots int, bytes int64, waiting int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.slots, g.bytes, g.waiting
}
