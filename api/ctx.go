package api

import (
	"context"

	"github.com/vkllm/vkllm/sampling"
)

type contextT = context.Context

type constraintFactory = func() (sampling.Constraint, error)

// contextWithCancel derives a request context from the server's, so
// Shutdown cancels every generation.
func contextWithCancel(s *Server) (context.Context, context.CancelFunc) {
	return context.WithCancel(s.baseCtx)
}
