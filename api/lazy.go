package api

import (
	"bytes"

	"github.com/vkllm/vkllm/sampling"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// lazyConstraint applies a grammar only from the moment the output contains
// its trigger (tool_choice "auto": the model may answer in prose, but once
// it starts a tool call the call must be valid), as llama.cpp's lazy
// grammars do. Before the trigger it masks nothing.
type lazyConstraint struct {
	trigger    []byte
	newMatcher func() *grammar.Matcher
	piece      func(id int32) []byte
	text       []byte // output before the trigger was seen
	m          *grammar.Matcher
}

var _ sampling.ConstraintChecker = (*lazyConstraint)(nil)

// Mask masks with the grammar once it is active.
func (c *lazyConstraint) Mask(logits []float32) error {
	if c.m == nil {
		return nil
	}
	return c.m.Mask(logits)
}

// Allows reports whether id may come next.
func (c *lazyConstraint) Allows(id int32) (bool, error) {
	if c.m == nil {
		return true, nil
	}
	return c.m.Allows(id)
}

// Accept advances past id; the token that completes the trigger starts the
// grammar, fed with the output from the trigger on.
func (c *lazyConstraint) Accept(id int32) error {
	if c.m != nil {
		return c.m.Accept(id)
	}
	c.text = append(c.text, c.piece(id)...)
	i := bytes.Index(c.text, c.trigger)
	if i < 0 {
		return nil
	}
	m := c.newMatcher()
	if err := m.AcceptBytes(c.text[i:]); err != nil {
		// The bytes after the trigger already left the grammar (one token
		// spanned the trigger and more): leave the output unconstrained.
		return nil
	}
	c.m = m
	return nil
}
