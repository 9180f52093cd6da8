package vk

import (
	"errors"
	"fmt"

	gv "github.com/goki/vulkan"
)

// ErrStale is returned by Recording.Submit when the graph may no longer be
// submitted: a descriptor set it binds was rewritten for other buffers, or
// a buffer or pipeline it uses was closed. Record it again.
var ErrStale = errors.New("vk: the kept graph is stale (its descriptor sets, buffers or pipelines changed); record it again")

// Recording is a graph kept for submitting again (Cmd.Keep). Its commands,
// bindings and push constants are fixed; what changes between submits is
// the contents of the buffers it reads, which the host writes before
// Submit. A Recording is valid until a descriptor set it may bind is
// rewritten, or a buffer or pipeline is closed (Valid); the Device frees
// its command buffer at Close, or Release gives it back sooner.
type Recording struct {
	d          *Device
	cb         gv.CommandBuffer
	epoch      uint64
	dispatches int
}

// Keep ends the recording begun by BeginKept without submitting it and
// returns it, for Recording.Submit. It returns the first recording error
// (nothing is kept then).
func (c *Cmd) Keep() (*Recording, error) {
	if c.recording && !c.kept {
		c.Abort()
		return nil, fmt.Errorf("vk: Keep: the graph was begun with Begin, not BeginKept")
	}
	if err := c.end("Keep"); err != nil {
		return nil, err
	}
	r := &Recording{d: c.d, cb: c.cb, epoch: c.d.setEpoch, dispatches: c.groups}
	c.cb, c.kept = c.d.cmdBuf, false
	return r, nil
}

// Valid reports whether Submit may run the graph: none of the descriptor
// sets, buffers and pipelines it was recorded with changed since.
func (r *Recording) Valid() bool {
	return r.cb != nil && !r.d.closed && r.epoch == r.d.setEpoch
}

// Dispatches is the number of dispatches the graph holds.
func (r *Recording) Dispatches() int { return r.dispatches }

// Submit runs the kept graph once and waits for it, like Cmd.Submit: its
// writes are visible to the host when it returns. ErrStale when it is no
// longer Valid; an error while a Cmd is recording (one graph runs at a
// time).
func (r *Recording) Submit() error {
	if !r.Valid() {
		return ErrStale
	}
	if r.d.cmd.recording {
		return fmt.Errorf("vk: Recording.Submit: a graph is being recorded")
	}
	return r.d.run(r.cb)
}

// Release gives the graph's command buffer back to the Device for a later
// BeginKept. The Recording must not be used afterwards.
func (r *Recording) Release() {
	if r.cb == nil {
		return
	}
	if !r.d.closed {
		r.d.keptFree = append(r.d.keptFree, r.cb)
	}
	r.cb = nil
}
