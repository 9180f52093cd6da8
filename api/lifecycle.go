package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/vkllm/vkllm/sampling/grammar"
)

// attrs returns the log attributes of the request's work: prompt tokens
// computed and taken from the cache, tokens generated, and the prompt and
// generation speeds in tokens/s (as in timings: prompt from admission to
// the first token, generation from the first token to the last).
func (rs *reqStats) attrs() []any {
	t := rs.timings()
	return []any{"prompt_tokens", t.PromptN, "cached_tokens", t.CacheN, "completion_tokens", t.PredictedN,
		"prompt_tps", round1(t.PromptPerSecond), "gen_tps", round1(t.PredictedPerSecond)}
}

func round1(x float64) float64 { return math.Round(x*10) / 10 }

// logGeneration writes the log line of a generation request: status is
// what the client got (for a stream, 200 and then the events); outcome
// says what happened ("ok", "error", "client_gone", "timeout",
// "shutdown").
func (s *Server) logGeneration(route, method, path string, status int, stream bool, rs *reqStats, outcome string, e *Error) {
	attrs := []any{"route", route, "method", method, "path", path, "status", status, "stream", stream, "outcome", outcome}
	attrs = append(attrs, rs.attrs()...)
	attrs = append(attrs, "tokens", rs.promptN+rs.cacheN+rs.predictedN, "duration", time.Since(rs.start))
	if e != nil {
		attrs = append(attrs, "error_status", e.Status, "error", e.Error())
	}
	s.cfg.Logger.Log(context.Background(), slog.LevelInfo, "request", attrs...)
	s.metrics.request(route, status, time.Since(rs.start))
}

// ErrWorkInFlight is returned (wrapped) by Shutdown when generations were
// still running at its deadline, though cancelled: the caller must not
// release the model they use (exiting the process is safe).
var ErrWorkInFlight = errors.New("api: work still in flight")

// connSet tracks the server's open connections and their states, so that
// Shutdown can wait for the answers in progress and then close the rest.
type connSet struct {
	mu    sync.Mutex
	conns map[net.Conn]fasthttp.ConnState
}

func (c *connSet) state(conn net.Conn, st fasthttp.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch st {
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		delete(c.conns, conn)
	default:
		if c.conns == nil {
			c.conns = map[net.Conn]fasthttp.ConnState{}
		}
		c.conns[conn] = st
	}
}

// active returns the number of connections reading a request or writing
// its answer.
func (c *connSet) active() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, st := range c.conns {
		if st == fasthttp.StateActive {
			n++
		}
	}
	return n
}

// closeAll closes every open connection and returns how many were active.
func (c *connSet) closeAll() (active int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for conn, st := range c.conns {
		if st == fasthttp.StateActive {
			active++
		}
		conn.Close()
	}
	return active
}

// Shutdown stops accepting connections and lets the requests in flight
// finish; ctx's deadline bounds the whole shutdown. The grace period ends a
// reserve before the deadline (a quarter of the time, at most 5 s): then
// the generations still running are cancelled (they stop at their next
// step and their streams end with an error event). Once the answers in
// progress are written, or halfway through the reserve, every connection
// still open is closed. Shutdown returns once no request runs, or at the
// deadline with an error wrapping ErrWorkInFlight if some still do, in
// which case the caller must not release the model. A ctx without a
// deadline ends the grace period when it is done and leaves drainTimeout
// for the rest.
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
	quiet := waitUntil(time.Now().Add(time.Until(end)/2), func() bool {
		return s.waiting.Load() == 0 && s.bodyBytes.Load() == 0 && s.conns.active() == 0
	})
	if n := s.conns.closeAll(); !quiet && n > 0 {
		s.cfg.Logger.Warn("shutdown: closed connections still reading a request or writing an answer", "connections", n)
	}
	if !waitUntil(end, func() bool { return s.waiting.Load() == 0 }) {
		return errors.Join(err, fmt.Errorf("%w: %d requests still running at the shutdown deadline, though cancelled", ErrWorkInFlight, s.waiting.Load()))
	}
	return err
}

// waitUntil polls done until it holds (true) or deadline passes (false).
func waitUntil(deadline time.Time, done func() bool) bool {
	for !done() {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// trackingListener wraps the server's listener so that each connection
// remembers whether a write of it failed by its deadline: a stream's
// events are written to the connection by fasthttp's goroutine, and the
// stream learns only that its pipe closed, not why.
type trackingListener struct{ net.Listener }

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &trackedConn{Conn: c}, nil
}

// trackedConn is a connection that records a write timeout.
type trackedConn struct {
	net.Conn
	writeTimedOut atomic.Bool
}

func (c *trackedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil && isTimeout(err) {
		c.writeTimedOut.Store(true)
	}
	return n, err
}

// SyscallConn gives watchClose the socket underneath.
func (c *trackedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("api: the connection has no file descriptor")
	}
	return sc.SyscallConn()
}

// writeTimedOut reports whether a write to conn failed by its deadline.
func writeTimedOut(conn net.Conn) bool {
	tc, ok := conn.(*trackedConn)
	return ok && tc.writeTimedOut.Load()
}

// validationBudget returns the budget of a request's grammar and schema
// compiles: Config.GrammarSteps of work, and a context done when the client
// closes its connection or the server shuts down. Call stop once
// validation is over, before the request waits for the model.
func (s *Server) validationBudget(rc *fasthttp.RequestCtx) (b grammar.Budget, stop func()) {
	ctx, cancel := context.WithCancel(s.baseCtx)
	ctx = context.WithValue(ctx, chargeKey{}, s.charger(rc))
	unwatch := watchClose(rc.Conn(), cancel)
	// Once only: a second unwatch would wake the watcher that serve
	// starts on the same connection.
	return grammar.Budget{Ctx: ctx, Steps: s.cfg.GrammarSteps}, sync.OnceFunc(func() { unwatch(); cancel() })
}
