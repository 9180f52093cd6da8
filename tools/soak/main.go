// Command soak puts a long mixed load on a vkllm server and checks that it
// stays healthy: 64 clients (-c) for 10 minutes (-d) send completions,
// chats, streams, n>1 requests and, with -image, chats with an image; a
// tenth of the requests are given up at a random moment, and one more
// client opens a stream and never reads it. It fails (exit status 1) when
// any answer is a 5xx other than a 503 (a full queue), any other status
// but 200, a request fails that was not given up, a client was served at
// less than a quarter of the median client's pace, or the server's
// resident memory grew by more than -rss-growth between the end of the
// first fifth of the run (after the warm-up) and its end. It prints the
// server's RSS and the counts every -every, and a summary at the end.
//
// It starts the server itself, given after --, on a free loopback port
// (--host and --port are appended), so it can read its RSS from /proc:
//
//	go run ./tools/soak -d 10m -image ../shared/fixtures/mmproj/gradient-64x48.png -- \
//	    bin/vkllm serve -m MODEL --mmproj PROJECTOR
//
// or it drives a running server (-url), reading the RSS of process -pid
// when given. It talks to that server only.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "soak:", err)
		}
		os.Exit(1)
	}
}

type config struct {
	url, apiKey, image, serverLog string
	pid                           int
	clients                       int
	dur, every, backoff           time.Duration
	giveUp                        float64
	rssGrowth                     float64
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	var c config
	fs.StringVar(&c.url, "url", "", "base `URL` of a running server (default: start the command given after --)")
	fs.IntVar(&c.pid, "pid", 0, "with -url, the server's process `id`, whose RSS is read (default: none)")
	fs.StringVar(&c.apiKey, "api-key", os.Getenv("VKLLM_API_KEY"), "send `key` as a Bearer token ($VKLLM_API_KEY)")
	fs.StringVar(&c.image, "image", "", "image `file` (PNG or JPEG) sent in a share of the chats (the server needs --mmproj)")
	fs.StringVar(&c.serverLog, "server-log", "", "write the started server's output to this `file` (default: discard it)")
	fs.IntVar(&c.clients, "c", 64, "concurrent `clients` (besides the one that never reads)")
	fs.DurationVar(&c.dur, "d", 10*time.Minute, "how long the load runs")
	fs.DurationVar(&c.every, "every", 30*time.Second, "print a progress line this often")
	fs.DurationVar(&c.backoff, "backoff", 500*time.Millisecond, "after a 503 a client waits a random time up to this long (the server says Retry-After: 1)")
	fs.Float64Var(&c.giveUp, "give-up", 0.1, "share of requests given up (the connection closed) at a random moment")
	fs.Float64Var(&c.rssGrowth, "rss-growth", 0.10, "most RSS growth allowed from the end of the warm-up (the first fifth) to the end, as a fraction (plus 16 MiB)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.clients < 1 || c.dur <= 0 || c.every <= 0 || c.backoff < 0 || c.giveUp < 0 || c.giveUp > 1 {
		return fmt.Errorf("-c, -d and -every must be positive, -backoff not negative and -give-up within 0..1")
	}
	var img string
	if c.image != "" {
		b, err := os.ReadFile(c.image)
		if err != nil {
			return err
		}
		mime := "image/png"
		if !bytes.HasPrefix(b, []byte("\x89PNG")) {
			mime = "image/jpeg"
		}
		img = "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.url == "" {
		if fs.NArg() == 0 {
			return fmt.Errorf("give the server command after -- (or -url)")
		}
		srv, base, err := startServer(ctx, fs.Args(), c.serverLog, w)
		if err != nil {
			return err
		}
		defer func() { srv.Process.Signal(syscall.SIGTERM); srv.Wait() }()
		c.url, c.pid = base, srv.Process.Pid
	} else if fs.NArg() > 0 {
		return fmt.Errorf("-url and a server command: give one")
	}
	if _, err := url.Parse(c.url); err != nil {
		return fmt.Errorf("-url: %w", err)
	}
	return soak(ctx, c, img, w)
}

// startServer runs args with a free loopback port appended and waits for
// its /health to answer 200.
func startServer(ctx context.Context, args []string, logFile string, w io.Writer) (*exec.Cmd, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(args[0], append(args[1:], "--host", "127.0.0.1", "--port", strconv.Itoa(port))...)
	if logFile != "" {
		f, err := os.Create(logFile)
		if err != nil {
			return nil, "", err
		}
		defer f.Close() // the child has its own descriptor
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if r, err := http.Get(base + "/health"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, "", fmt.Errorf("the server did not become ready")
		}
	}
	fmt.Fprintf(w, "server pid %d on %s\n", cmd.Process.Pid, base)
	return cmd, base, nil
}

// rss returns the resident memory of process pid in bytes (0 if unknown).
func rss(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// kind is one sort of request the clients send.
type kind struct {
	name, path string
	body       func(rng *rand.Rand) string
	stream     bool
}

func kinds(img string) []kind {
	words := []string{"river", "stone", "light", "north", "paper", "quiet", "orange", "seven", "window", "garden"}
	text := func(rng *rand.Rand, n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		return b.String()
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	ks := []kind{
		{"completion", "/v1/completions", func(r *rand.Rand) string {
			return fmt.Sprintf(`{"prompt":%s,"max_tokens":16}`, q(text(r, 20)))
		}, false},
		{"completion-stream", "/v1/completions", func(r *rand.Rand) string {
			return fmt.Sprintf(`{"prompt":%s,"max_tokens":32,"stream":true}`, q(text(r, 30)))
		}, true},
		{"chat-stream", "/v1/chat/completions", func(r *rand.Rand) string {
			return fmt.Sprintf(`{"messages":[{"role":"system","content":"You answer briefly."},{"role":"user","content":%s}],"max_tokens":24,"stream":true}`, q(text(r, 12)))
		}, true},
		{"chat-n3", "/v1/chat/completions", func(r *rand.Rand) string {
			return fmt.Sprintf(`{"messages":[{"role":"user","content":%s}],"max_tokens":12,"n":3,"temperature":0.8}`, q(text(r, 8)))
		}, false},
		{"completion-n2-stream", "/v1/completions", func(r *rand.Rand) string {
			return fmt.Sprintf(`{"prompt":%s,"max_tokens":16,"n":2,"stream":true,"temperature":0.8}`, q(text(r, 10)))
		}, true},
		{"tokenize", "/tokenize", func(r *rand.Rand) string { return fmt.Sprintf(`{"content":%s}`, q(text(r, 40))) }, false},
	}
	if img != "" {
		ks = append(ks, kind{"chat-image", "/v1/chat/completions", func(r *rand.Rand) string {
			return fmt.Sprintf(`{"messages":[{"role":"user","content":[{"type":"text","text":%s},{"type":"image_url","image_url":{"url":%s}}]}],"max_tokens":12}`, q(text(r, 5)), q(img))
		}, false})
	}
	return ks
}

// tally counts what the clients saw.
type tally struct {
	mu       sync.Mutex
	status   map[int]int
	failures []string
	failed   int
	given    int
}

func (t *tally) fail(msg string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failed++
	if len(t.failures) < 20 {
		t.failures = append(t.failures, msg)
	}
}

func soak(ctx context.Context, c config, img string, w io.Writer) error {
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: c.clients + 2}}
	ks := kinds(img)
	t := &tally{status: map[int]int{}}
	served := make([]atomic.Int64, c.clients)
	ctx, cancel := context.WithTimeout(ctx, c.dur)
	defer cancel()
	start := time.Now()

	// The client that never reads: a long stream, left unread until the end.
	if conn, err := net.Dial("tcp", strings.TrimPrefix(c.url, "http://")); err == nil {
		body := `{"prompt":"a stream nobody reads","max_tokens":100000,"stream":true}`
		auth := ""
		if c.apiKey != "" {
			auth = "Authorization: Bearer " + c.apiKey + "\r\n"
		}
		fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", auth, len(body), body)
		defer conn.Close()
	} else {
		return err
	}

	var wg sync.WaitGroup
	for id := range c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(id), 1))
			for ctx.Err() == nil {
				k := ks[rng.IntN(len(ks))]
				rctx, rcancel := context.WithCancel(ctx)
				giveUp := rng.Float64() < c.giveUp
				if giveUp {
					time.AfterFunc(time.Duration(rng.IntN(1000))*time.Millisecond, rcancel)
				}
				req, _ := http.NewRequestWithContext(rctx, "POST", c.url+k.path, strings.NewReader(k.body(rng)))
				req.Header.Set("Content-Type", "application/json")
				if c.apiKey != "" {
					req.Header.Set("Authorization", "Bearer "+c.apiKey)
				}
				resp, err := client.Do(req)
				var body []byte
				if err == nil {
					body, err = io.ReadAll(bufio.NewReader(resp.Body))
					resp.Body.Close()
				}
				rcancel()
				switch {
				case err != nil && (giveUp || ctx.Err() != nil):
					t.mu.Lock()
					t.given++
					t.mu.Unlock()
					continue
				case err != nil:
					t.fail(fmt.Sprintf("client %d %s: %v", id, k.name, err))
					continue
				}
				t.mu.Lock()
				t.status[resp.StatusCode]++
				t.mu.Unlock()
				switch {
				case resp.StatusCode == 503:
					if c.backoff > 0 {
						time.Sleep(time.Duration(rng.Int64N(int64(c.backoff))))
					}
				case resp.StatusCode != 200:
					t.fail(fmt.Sprintf("client %d %s: status %d: %.200s", id, k.name, resp.StatusCode, body))
				case k.stream && !bytes.Contains(body, []byte("data: [DONE]")) && !giveUp:
					t.fail(fmt.Sprintf("client %d %s: a stream without [DONE]: %.200s", id, k.name, body))
				case !k.stream && !json.Valid(body):
					t.fail(fmt.Sprintf("client %d %s: invalid JSON: %.200s", id, k.name, body))
				default:
					served[id].Add(1)
				}
			}
		}()
	}

	var samples []int64 // RSS, every second
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	next := c.every
	fmt.Fprintf(w, "%8s %10s %8s %6s %6s %8s\n", "time", "RSS MiB", "served", "503", "5xx", "failed")
	report := func() {
		var n int64
		for i := range served {
			n += served[i].Load()
		}
		t.mu.Lock()
		s503, s5xx, failed := t.status[503], 0, t.failed
		for s, k := range t.status {
			if s >= 500 && s != 503 {
				s5xx += k
			}
		}
		t.mu.Unlock()
		fmt.Fprintf(w, "%8s %10.1f %8d %6d %6d %8d\n", time.Since(start).Round(time.Second), float64(rss(c.pid))/(1<<20), n, s503, s5xx, failed)
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			samples = append(samples, rss(c.pid))
			if time.Since(start) >= next {
				report()
				next += c.every
			}
		}
	}
	wg.Wait()
	report()

	// The verdict.
	var problems []string
	t.mu.Lock()
	for s, k := range t.status {
		if s >= 500 && s != 503 {
			problems = append(problems, fmt.Sprintf("%d answers with status %d", k, s))
		}
	}
	if t.failed > 0 {
		problems = append(problems, fmt.Sprintf("%d failed requests", t.failed))
	}
	codes := make([]int, 0, len(t.status))
	for s := range t.status {
		codes = append(codes, s)
	}
	slices.Sort(codes)
	var st []string
	for _, s := range codes {
		st = append(st, fmt.Sprintf("%d: %d", s, t.status[s]))
	}
	fmt.Fprintf(w, "statuses      %s; %d given up by the client\n", strings.Join(st, ", "), t.given)
	for _, f := range t.failures {
		fmt.Fprintf(w, "  failure: %s\n", f)
	}
	t.mu.Unlock()
	counts := make([]int64, len(served))
	for i := range served {
		counts[i] = served[i].Load()
	}
	sorted := slices.Clone(counts)
	slices.Sort(sorted)
	med := sorted[len(sorted)/2]
	fmt.Fprintf(w, "pace          requests served per client: min %d, median %d, max %d (%.1f per minute at the median)\n",
		sorted[0], med, sorted[len(sorted)-1], float64(med)/c.dur.Minutes())
	for i, n := range counts {
		if n == 0 || 4*n < med {
			problems = append(problems, fmt.Sprintf("client %d served %d requests, under a quarter of the median %d", i, n, med))
		}
	}
	if r, err := client.Get(c.url + "/health"); err != nil || r.StatusCode != 200 {
		problems = append(problems, fmt.Sprintf("/health after the run: %v", err))
	} else {
		r.Body.Close()
	}
	if c.pid > 0 && len(samples) >= 10 {
		fifth := len(samples) / 5
		base := slices.Max(samples[fifth-1 : fifth+1])
		end := slices.Max(samples[len(samples)-max(1, len(samples)/10):])
		fmt.Fprintf(w, "RSS           %.1f MiB after the warm-up, %.1f MiB at the end, %.1f MiB at most\n",
			float64(base)/(1<<20), float64(end)/(1<<20), float64(slices.Max(samples))/(1<<20))
		if float64(end) > float64(base)*(1+c.rssGrowth)+16<<20 {
			problems = append(problems, fmt.Sprintf("RSS grew from %.1f to %.1f MiB", float64(base)/(1<<20), float64(end)/(1<<20)))
		}
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(w, "FAIL:", p)
		}
		return fmt.Errorf("%d problems", len(problems))
	}
	fmt.Fprintln(w, "ok")
	return nil
}
