package vk_test

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/vkllm/vkllm/vk"
	"github.com/vkllm/vkllm/vk/vktest"
)

// TestKeptGraph records a graph once (a fill, then a copy of a host-written
// buffer) and submits it again after the host changed its input: each
// submit sees the new contents, without allocating. Closing a buffer that
// a descriptor set bound makes it stale.
func TestKeptGraph(t *testing.T) {
	for _, staging := range []bool{false, true} {
		name := map[bool]string{false: "uma", true: "staging"}[staging]
		t.Run(name, func(t *testing.T) {
			d := vktest.Open(t, vk.Options{ForceStaging: staging})
			p := fillPipeline(t, d)
			const n = 256
			src, dst := newBuf(t, d, 4*n), newBuf(t, d, 8*n)
			c, err := d.BeginKept()
			if err != nil {
				t.Fatal(err)
			}
			push := fillPush{N: n, Value: 7}
			c.Dispatch(p, [3]uint32{4, 1, 1}, vk.Bytes(&push), dst.Range(4*n, 4*n))
			c.NoBarrier()
			c.Copy(dst.Range(0, 4*n), src.All())
			r, err := c.Keep()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Release()
			if r.Dispatches() != 1 {
				t.Errorf("Dispatches() = %d, want 1", r.Dispatches())
			}
			for round := range 3 {
				want := make([]byte, 4*n)
				for i := range n {
					binary.LittleEndian.PutUint32(want[4*i:], math.Float32bits(float32(round*1000+i)))
				}
				if err := src.Write(0, want); err != nil {
					t.Fatal(err)
				}
				if err := dst.Write(4*n, make([]byte, 4*n)); err != nil { // the fill must run again
					t.Fatal(err)
				}
				if err := r.Submit(); err != nil {
					t.Fatalf("round %d: Submit: %v", round, err)
				}
				got := make([]byte, 8*n)
				if err := dst.Read(0, got); err != nil {
					t.Fatal(err)
				}
				for i := range n {
					if g, w := binary.LittleEndian.Uint32(got[4*i:]), binary.LittleEndian.Uint32(want[4*i:]); g != w {
						t.Fatalf("round %d: dst[%d] = %g, want %g (the input written before this submit)", round, i, math.Float32frombits(g), math.Float32frombits(w))
					}
					if v := math.Float32frombits(binary.LittleEndian.Uint32(got[4*(n+i):])); v != 7 {
						t.Fatalf("round %d: filled[%d] = %g, want 7", round, i, v)
					}
				}
			}
			if a := testing.AllocsPerRun(10, func() {
				if err := r.Submit(); err != nil {
					t.Fatal(err)
				}
			}); a != 0 {
				t.Errorf("Recording.Submit: %v allocations, want 0", a)
			}
			// One-time graphs still work between submits of the kept one.
			oc, err := d.Begin()
			if err != nil {
				t.Fatal(err)
			}
			oc.Copy(dst.Range(0, 4), src.Range(4, 4))
			if err := oc.Submit(); err != nil {
				t.Fatal(err)
			}
			if !r.Valid() {
				t.Error("Valid() = false after a one-time graph that reused no descriptor set, want true")
			}
			// Closing a buffer no graph used (a staging buffer) keeps it
			// valid; closing one bound by a dispatch does not.
			other := newBuf(t, d, 64)
			other.Close()
			if !r.Valid() {
				t.Error("Valid() = false after closing a buffer nothing used, want true")
			}
			other = newBuf(t, d, 64)
			oc, err = d.Begin()
			if err != nil {
				t.Fatal(err)
			}
			push = fillPush{N: 16, Value: 1}
			oc.Dispatch(p, [3]uint32{1, 1, 1}, vk.Bytes(&push), other.All())
			if err := oc.Submit(); err != nil {
				t.Fatal(err)
			}
			other.Close()
			if r.Valid() {
				t.Error("Valid() = true after a bound buffer was closed, want false")
			}
			if err := r.Submit(); !errors.Is(err, vk.ErrStale) {
				t.Errorf("Submit after a bound buffer was closed = %v, want ErrStale", err)
			}
		})
	}
}

// TestKeptGraphSetReuse: when the descriptor cache is recycled and a set is
// written again for other ranges, a kept graph that may bind it is stale.
func TestKeptGraphSetReuse(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	p := fillPipeline(t, d)
	buf := newBuf(t, d, 16*2200)
	c, err := d.BeginKept()
	if err != nil {
		t.Fatal(err)
	}
	push := fillPush{N: 4, Value: 1}
	c.Dispatch(p, [3]uint32{1, 1, 1}, vk.Bytes(&push), buf.Range(0, 16))
	r, err := c.Keep()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	// Over maxCachedSets (1024) distinct ranges, twice: the second Begin
	// recycles the cache and rewrites sets from the free list.
	for round := range 2 {
		oc, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 1100 {
			oc.NoBarrier()
			oc.Dispatch(p, [3]uint32{1, 1, 1}, vk.Bytes(&push), buf.Range(16*uint64(1+i+round*1100%1099), 16))
		}
		if err := oc.Submit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Submit(); !errors.Is(err, vk.ErrStale) {
		t.Errorf("Submit after the descriptor sets were rewritten = %v, want ErrStale", err)
	}
}

// TestKeptGraphErrors: Keep needs BeginKept, BeginKept refuses to run while
// profiling or recording, and a recording error keeps nothing.
func TestKeptGraphErrors(t *testing.T) {
	d := vktest.Open(t, vk.Options{})
	p := fillPipeline(t, d)
	buf := newBuf(t, d, 64)
	c, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.BeginKept(); err == nil {
		t.Error("BeginKept while recording: no error")
	}
	if _, err := c.Keep(); err == nil {
		t.Error("Keep of a Begin graph: no error")
	}
	c, err = d.BeginKept()
	if err != nil {
		t.Fatal(err)
	}
	c.Dispatch(p, [3]uint32{1, 1, 1}, []byte{1}, buf.All()) // wrong push size
	if r, err := c.Keep(); err == nil || r != nil {
		t.Errorf("Keep after a recording error = %v, %v; want nil and the error", r, err)
	}
	if err := d.Profile(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.BeginKept(); err == nil {
		t.Error("BeginKept while profiling: no error")
	}
}
