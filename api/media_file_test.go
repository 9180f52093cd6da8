package api

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// TestMediaDirSpecialFiles: a FIFO, a directory or a symlink to one under
// --media-dir is a 400 "not a regular file" at once, with no descriptor
// left open (a FIFO used to block the request in open until a writer came,
// holding a thread and a descriptor); regular files are read whole.
func TestMediaDirSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.png"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.png"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("pipe.png", filepath.Join(dir, "link.png")); err != nil {
		t.Fatal(err)
	}
	want := []byte("\x89PNG not really, but bytes")
	if err := os.WriteFile(filepath.Join(dir, "ok.png"), want, 0o644); err != nil {
		t.Fatal(err)
	}
	s := NewServer(Config{MediaDir: dir})
	const field = "messages[0].content[0].image_url"
	for _, name := range []string{"pipe.png", "link.png", "sub.png", "file://" + filepath.Join(dir, "pipe.png")} {
		t.Run(name, func(t *testing.T) {
			fds := openFDs(t)
			type result struct {
				data []byte
				e    *Error
			}
			done := make(chan result, 1)
			go func() {
				data, e := s.imageBytes(context.Background(), name, field, 1<<20)
				done <- result{data, e}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second): // a guard against a hang, not a timing
				t.Fatalf("imageBytes(%q) blocked on a special file", name)
			}
			if r.e == nil || r.e.Status != 400 || r.e.Param != field || !strings.Contains(r.e.Message, "not a regular file") {
				t.Fatalf("imageBytes(%q) = %d bytes, %v; want a 400 naming %s: not a regular file", name, len(r.data), r.e, field)
			}
			if got := openFDs(t); got != fds {
				t.Errorf("open descriptors %d after the request, %d before", got, fds)
			}
		})
	}
	t.Run("regular file", func(t *testing.T) {
		got, e := s.imageBytes(context.Background(), "ok.png", field, 1<<20)
		if e != nil || string(got) != string(want) {
			t.Fatalf("imageBytes(ok.png) = %q, %v; want %q", got, e, want)
		}
		if _, e := s.imageBytes(context.Background(), "ok.png", field, 4); e == nil || !strings.Contains(e.Message, "--max-image-bytes") {
			t.Errorf("imageBytes(ok.png) with a 4-byte limit = %v, want a 400 naming --max-image-bytes", e)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, e := s.imageBytes(ctx, "ok.png", field, 1<<20); e != errImageCancelled {
			t.Errorf("imageBytes(ok.png) after its request ended = %v, want %v", e, errImageCancelled)
		}
	})
}
