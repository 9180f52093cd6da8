package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// reqStats follows one generation request for its log line (issue 17 item
// 14): the tokens it processed and generated, when its first token came,
// and how it ended when that is not its status.
type reqStats struct {
	start      time.Time
	prompt     int       // prompt tokens processed (all prompts and candidates' shared prompt)
	completion int       // tokens generated, counted as they come
	firstToken time.Time // when the first token was generated
	lastToken  time.Time
	clientGone atomic.Bool // the client closed the connection before the answer
}

type statsKey struct{}

// withStats returns ctx carrying st, which generateAll fills.
func withStats(ctx context.Context, st *reqStats) context.Context {
	return context.WithValue(ctx, statsKey{}, st)
}

func statsFrom(ctx context.Context) *reqStats {
	st, _ := ctx.Value(statsKey{}).(*reqStats)
	return st
}

// token records a generated token.
func (st *reqStats) token() {
	if st == nil {
		return
	}
	now := time.Now()
	if st.completion == 0 {
		st.firstToken = now
	}
	st.completion++
	st.lastToken = now
}

// attrs returns the log attributes of the request's work: token counts and
// the prompt and generation speeds (tokens/s; prompt processing is timed
// up to the first token, generation from there to the last).
func (st *reqStats) attrs() []any {
	out := []any{"prompt_tokens", st.prompt, "completion_tokens", st.completion}
	if !st.firstToken.IsZero() {
		if d := st.firstToken.Sub(st.start).Seconds(); d > 0 && st.prompt > 0 {
			out = append(out, "prompt_tps", round1(float64(st.prompt)/d))
		}
		if d := st.lastToken.Sub(st.firstToken).Seconds(); d > 0 && st.completion > 1 {
			out = append(out, "gen_tps", round1(float64(st.completion-1)/d))
		}
	}
	return out
}

func round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }

// logGeneration writes the log line of a generation request: status is
// what the client got (for a stream, 200 and then the events); outcome
// says what happened ("ok", "error", "client_gone", "timeout",
// "shutdown").
func (s *Server) logGeneration(route, method, path string, status int, stream bool, st *reqStats, outcome string, e *Error) {
	attrs := []any{"route", route, "method", method, "path", path, "status", status, "stream", stream, "outcome", outcome}
	attrs = append(attrs, st.attrs()...)
	attrs = append(attrs, "tokens", st.prompt+st.completion, "duration", time.Since(st.start))
	if e != nil {
		attrs = append(attrs, "error_status", e.Status, "error", e.Error())
	}
	s.cfg.Logger.Log(context.Background(), slog.LevelInfo, "request", attrs...)
}

// ErrWorkInFlight is returned (wrapped) by Shutdown when generations were
// still running at its deadline, though cancelled: the caller must not
// release the model they use (exiting the process is safe).
var ErrWorkInFlight = errors.New("api: work still in flight")

// connSet tracks the server's open connections so that Shutdown can close
// those still open at its deadline.
type connSet struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (c *connSet) state(conn net.Conn, st fasthttp.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch st {
	case fasthttp.StateNew:
		if c.conns == nil {
			c.conns = map[net.Conn]struct{}{}
		}
		c.conns[conn] = struct{}{}
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		delete(c.conns, conn)
	}
}

func (c *connSet) closeAll() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.conns)
	for conn := range c.conns {
		conn.Close()
	}
	return n
}

// Shutdown stops accepting connections and lets the requests in flight
// finish; ctx's deadline bounds the whole shutdown. The grace period ends a
// reserve before the deadline (a quarter of the time, at most 5 s): then
// the generations still running are cancelled (they stop at their next
// step and their streams end with an error event), and halfway through the
// reserve the connections still open are closed. Shutdown returns once no
// request runs, or at the deadline with an error wrapping
// ErrWorkInFlight if some still do, in which case the caller must not
// release the model. A ctx without a deadline ends the grace period when
// it is done and leaves drainTimeout for the rest.
func (s *Server) Shutdown(ctx context.Context) error {
	grace := ctx
	var end time.Time
	if dl, ok := ctx.Deadline(); ok {
		reserve := min(time.Until(dl)/4, 5*time.Second)
		var cancel context.CancelFunc
		grace, cancel = context.WithDeadline(ctx, dl.Add(-reserve))
		defer cancel()
		end = dl
	}
	stop := context.AfterFunc(grace, s.cancel)
	defer stop()
	err := s.srv.ShutdownWithContext(grace)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = nil // the grace period is over: on to cancelling
	}
	s.cancel()
	if end.IsZero() {
		end = time.Now().Add(drainTimeout)
	}
	drained := func(until time.Time) bool {
		for s.waiting.Load() > 0 || s.bodyBytes.Load() > 0 {
			if !time.Now().Before(until) {
				return false
			}
			time.Sleep(5 * time.Millisecond)
		}
		return true
	}
	if !drained(time.Now().Add(time.Until(end) / 2)) {
		if n := s.conns.closeAll(); n > 0 {
			s.cfg.Logger.Warn("shutdown: closed connections still open", "connections", n)
		}
	}
	if !drained(end) {
		return errors.Join(err, fmt.Errorf("%w: %d requests still running at the shutdown deadline, though cancelled (%d body bytes)", ErrWorkInFlight, s.waiting.Load(), s.bodyBytes.Load()))
	}
	s.conns.closeAll()
	return err
}
