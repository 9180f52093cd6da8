package api

import (
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// watchClose calls gone once the client closes (or resets) conn, until the
// returned stop is called; stop waits for the watcher to end and leaves the
// connection's read deadline cleared for fasthttp, which sets its own before
// the next read. It peeks (MSG_PEEK) without consuming anything, so a
// pipelined request that arrives meanwhile is left for fasthttp and simply
// ends the watch. Connections that are not sockets (in-memory listeners in
// tests) are not watched.
//
// A non-streaming request learns only this way that its client went away:
// nothing is written to the connection until the whole answer is ready.
func watchClose(conn net.Conn, gone func()) (stop func()) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return func() {}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	var stopping atomic.Bool
	go func() {
		defer close(done)
		var buf [1]byte
		closed := false
		err := rc.Read(func(fd uintptr) bool {
			n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR):
				return false // nothing yet: wait until the socket is readable
			case err != nil || n == 0:
				closed = true // a reset, or the orderly end of the stream
			}
			return true // closed, or bytes of a next request: stop watching
		})
		if closed || err != nil && !stopping.Load() && !errors.Is(err, net.ErrClosed) && !isTimeout(err) {
			gone()
		}
	}()
	return func() {
		stopping.Store(true)
		conn.SetReadDeadline(time.Unix(1, 0)) // wakes the watcher's wait
		<-done
		conn.SetReadDeadline(time.Time{})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
