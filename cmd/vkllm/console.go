package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
)

// console is serve's output for people: the model, the device, the load's
// progress, the kernel compilation and the address. As text it writes lines
// to w (a progress bar and a counter when w is a terminal). With --log-json
// it writes nothing there and reports the same as log records instead, so
// that the process's output is JSON lines only.
type console struct {
	w   io.Writer // nil: log records
	tty bool
	log *slog.Logger
}

// newConsole returns the console on f, or on log when asJSON.
func newConsole(f *os.File, log *slog.Logger, asJSON bool) *console {
	if asJSON {
		return &console{log: log}
	}
	st, err := f.Stat()
	return &console{w: f, tty: err == nil && st.Mode()&os.ModeCharDevice != 0, log: log}
}

// say writes text as a line, or logs msg with args (key-value pairs).
func (c *console) say(text, msg string, args ...any) {
	if c.w == nil {
		c.log.Info(msg, args...)
		return
	}
	fmt.Fprintln(c.w, text)
}

// progress returns the reporter of an upload named label.
func (c *console) progress(label string) reporter {
	if c.w == nil {
		return &logProgress{log: c.log, label: label, lastPct: -1}
	}
	return &progress{w: c.w, label: label, tty: c.tty, lastPct: -1}
}

// counter reports a phase of total steps (the kernels compiled; total 0
// before the first): on a terminal a line redrawn at each step, otherwise
// nothing until end.
func (c *console) counter(what string, done, total int) {
	switch {
	case c.w == nil || !c.tty:
	case total == 0:
		fmt.Fprintf(c.w, "\r%s", what)
	default:
		fmt.Fprintf(c.w, "\r%s (%d of %d)", what, done, total)
	}
}

// end closes a phase counter's line with its duration (a line of its own
// when no counter was drawn), or logs msg with args.
func (c *console) end(text, msg string, args ...any) {
	switch {
	case c.w == nil:
		c.log.Info(msg, args...)
	case c.tty:
		fmt.Fprintln(c.w, " "+text)
	default:
		fmt.Fprintln(c.w, text)
	}
}

// reporter follows an upload: update with the bytes done of total, done
// once at the end.
type reporter interface {
	update(done, total int64)
	done()
}

// logProgress logs an upload at each quarter.
type logProgress struct {
	log     *slog.Logger
	label   string
	lastPct int
}

func (p *logProgress) update(done, total int64) {
	if total <= 0 {
		return
	}
	pct := int(done * 100 / total)
	if pct/25 != p.lastPct/25 || p.lastPct < 0 {
		p.log.Info(p.label, "percent", pct, "mib", float64(total)/(1<<20))
	}
	p.lastPct = pct
}

func (p *logProgress) done() {}
