package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config says what load Run puts on a server. Zero values are safe
// defaults; nothing is unlimited.
type Config struct {
	// URL is the server's base URL (default http://127.0.0.1:8080). Run
	// sends requests to this server and nowhere else.
	URL string
	// Chat posts to /v1/chat/completions (one user message) instead of
	// /v1/completions.
	Chat bool
	// Model, when set, is sent as the request's "model".
	Model string
	// Concurrency is the number of streams open at once (default 1).
	Concurrency int
	// Requests is the number of ordinary requests in all (default
	// Concurrency); each worker takes the next one until none is left.
	Requests int
	// MaxTokens is each request's max_tokens (default 64).
	MaxTokens int
	// Prompt is every request's prompt when PromptWords is 0 (default
	// "Once upon a time").
	Prompt string
	// PromptWords, when positive, gives ordinary request i its own prompt
	// of PromptWords words drawn from a fixed list with seed i+1: the same
	// prompts every run, different from one request to the next, so a
	// server's prompt cache does not skip their prefill.
	PromptWords int
	// PrefixWords, when positive, puts the same prompt of PrefixWords
	// words (seeded by Seed alone) before every ordinary request's
	// prompt: a shared system prompt, which a server's prompt cache
	// serves to all requests after the first.
	PrefixWords int
	// Temperature is sent as the request's temperature.
	Temperature float64
	// APIKey, when set, is sent as "Authorization: Bearer APIKey".
	APIKey string
	// Timeout bounds the whole run (default 5 minutes): requests still
	// streaming then are cancelled and counted as errors, and requests not
	// yet sent are counted as not started.
	Timeout time.Duration
	// InjectWords, when positive, adds one request with a prompt of
	// InjectWords words, sent InjectAfter after the start unless every
	// ordinary request has finished by then. It measures the inter-token
	// latency of the ordinary streams while a long prompt is prefilled; its
	// own numbers are reported apart from theirs.
	InjectWords int
	// InjectAfter is when the injected request is sent, from the start.
	InjectAfter time.Duration
	// Seed varies the prompts of -prompt-words and the injected one, so
	// that a run does not find the previous run's prompts in the server's
	// prompt cache (0: the same prompts every run).
	Seed uint64
	// Client sends the requests; nil means a client that uses no proxy and
	// keeps Concurrency+1 connections.
	Client *http.Client

	now func() time.Time // clock of chunk arrivals (nil = time.Now); tests replace it
}

func (c *Config) fill() error {
	if c.URL == "" {
		c.URL = "http://127.0.0.1:8080"
	}
	u, err := url.Parse(c.URL)
	if err != nil {
		return fmt.Errorf("loadtest: URL %q: %w", c.URL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("loadtest: URL %q: want http://host:port or https://host:port", c.URL)
	}
	switch {
	case c.Concurrency < 0, c.Requests < 0, c.MaxTokens < 0, c.PromptWords < 0, c.PrefixWords < 0, c.InjectWords < 0, c.Timeout < 0, c.InjectAfter < 0:
		return fmt.Errorf("loadtest: negative setting in %+v", *c)
	case c.PrefixWords > 1<<20:
		return fmt.Errorf("loadtest: prefix of %d words out of range", c.PrefixWords)
	case c.Concurrency > 4096 || c.Requests > 1<<20 || c.PromptWords > 1<<20 || c.InjectWords > 1<<20:
		return fmt.Errorf("loadtest: concurrency %d, requests %d or prompt words %d/%d out of range", c.Concurrency, c.Requests, c.PromptWords, c.InjectWords)
	}
	if c.Concurrency == 0 {
		c.Concurrency = 1
	}
	if c.Requests == 0 {
		c.Requests = c.Concurrency
	}
	if c.MaxTokens == 0 {
		c.MaxTokens = 64
	}
	if c.Prompt == "" {
		c.Prompt = "Once upon a time"
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Minute
	}
	if c.now == nil {
		c.now = time.Now
	}
	return nil
}

func (c *Config) endpoint() string {
	path := "/v1/completions"
	if c.Chat {
		path = "/v1/chat/completions"
	}
	return strings.TrimSuffix(c.URL, "/") + path
}

// Latency summarizes durations in milliseconds. Percentiles are
// nearest-rank: P50 is the smallest value that at least half the values
// do not exceed.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Result is what Run measured. Tokens are counted as stream chunks with
// non-empty text (choices[].text, or choices[].delta.content for chat): a
// server that holds back an incomplete UTF-8 character or a possible stop
// sequence sends several tokens in one chunk, so Tokens can be below the
// number of generated tokens; UsageTokens is the server's own count where
// it reports one.
type Result struct {
	URL         string `json:"url"`
	Concurrency int    `json:"concurrency"`
	Requests    int    `json:"requests"`
	MaxTokens   int    `json:"max_tokens"`
	// Completed counts ordinary requests whose stream ended with [DONE].
	Completed int `json:"completed"`
	// Errors counts ordinary requests that failed: HTTP status, transport
	// error, an error event, a stream cut short, or the timeout.
	Errors int `json:"errors"`
	// ErrorSamples holds the first few error messages.
	ErrorSamples []string `json:"error_samples,omitempty"`
	// NotStarted counts ordinary requests the timeout kept from being sent.
	NotStarted int  `json:"not_started"`
	TimedOut   bool `json:"timed_out"`
	// Elapsed is the time from the start until the last ordinary request
	// ended, in seconds.
	Elapsed float64 `json:"elapsed_s"`
	// Tokens counts the content chunks of the ordinary requests.
	Tokens int `json:"tokens"`
	// UsageTokens sums the completion_tokens of the usage chunks the server
	// sent (0 when it sends none).
	UsageTokens    int     `json:"usage_tokens"`
	TokensPerSec   float64 `json:"tokens_per_s"`   // Tokens / Elapsed
	RequestsPerSec float64 `json:"requests_per_s"` // Completed / Elapsed
	// TTFT is the time from sending a request to its first content chunk,
	// over the ordinary requests that got one.
	TTFT Latency `json:"ttft"`
	// ITL is the gap between consecutive content chunks of one stream,
	// over every ordinary stream.
	ITL Latency `json:"itl"`
	// Inject is the injected request's report, nil without one.
	Inject *InjectResult `json:"inject,omitempty"`
}

// InjectResult reports the injected long-prompt request.
type InjectResult struct {
	PromptWords int `json:"prompt_words"`
	// Sent is false when every ordinary request ended before InjectAfter.
	Sent bool `json:"sent"`
	// At is when it was sent, in seconds from the start.
	At     float64 `json:"at_s"`
	TTFT   float64 `json:"ttft_ms"` // 0 without a content chunk
	Tokens int     `json:"tokens"`
	Error  string  `json:"error,omitempty"`
	// ITLUntilFirstToken holds the gaps of the ordinary streams that
	// overlap the time from sending the injected request to its first
	// content chunk (or its end, without one): its prefill, and its wait
	// in the server's queue before that.
	ITLUntilFirstToken Latency `json:"itl_until_first_token"`
}

// stream is what one request received.
type stream struct {
	sent   time.Time
	times  []time.Time // arrival of each content chunk
	usage  int         // completion_tokens of the usage chunk, 0 without one
	err    error
	ended  time.Time
	issued bool
}

// Run drives the server of cfg.URL with cfg.Concurrency concurrent
// streaming requests until cfg.Requests are done or cfg.Timeout passes, and
// returns what it measured. Failed requests are counted in the Result; the
// error is for a Config Run cannot use. Cancelling ctx ends the run like
// the timeout.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.fill(); err != nil {
		return Result{}, err
	}
	client := cfg.Client
	if client == nil {
		tr := &http.Transport{
			Proxy:               nil, // only the given URL: never a proxy from the environment
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			MaxIdleConnsPerHost: cfg.Concurrency + 1,
			DisableCompression:  true, // a compressed stream would arrive in bursts
		}
		defer tr.CloseIdleConnections()
		client = &http.Client{Transport: tr}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	streams := make([]stream, cfg.Requests)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := cfg.now()
	for range min(cfg.Concurrency, cfg.Requests) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.Requests || ctx.Err() != nil {
					return
				}
				prompt := requestPrompt(&cfg, i)
				streams[i] = doRequest(ctx, client, &cfg, prompt)
			}
		}()
	}
	ordinaryDone := make(chan struct{})
	var injected stream
	var injectWG sync.WaitGroup
	if cfg.InjectWords > 0 {
		injectWG.Add(1)
		go func() {
			defer injectWG.Done()
			t := time.NewTimer(cfg.InjectAfter)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ordinaryDone:
				return
			case <-ctx.Done():
				return
			}
			injected = doRequest(ctx, client, &cfg, promptWords(cfg.InjectWords, promptSeed(cfg.Seed, 1<<32)))
		}()
	}
	wg.Wait()
	end := cfg.now()
	close(ordinaryDone)
	injectWG.Wait()

	r := summarize(&cfg, streams, start, end)
	r.TimedOut = ctx.Err() != nil
	if cfg.InjectWords > 0 {
		r.Inject = summarizeInject(&cfg, &injected, streams, start)
	}
	return r, nil
}

// doRequest sends one streaming request and reads its stream to the end.
func doRequest(ctx context.Context, client *http.Client, cfg *Config, prompt string) stream {
	body := map[string]any{
		"max_tokens":     cfg.MaxTokens,
		"temperature":    cfg.Temperature,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
	}
	if cfg.Chat {
		body["messages"] = []map[string]string{{"role": "user", "content": prompt}}
	} else {
		body["prompt"] = prompt
	}
	if cfg.Model != "" {
		body["model"] = cfg.Model
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return stream{issued: true, err: fmt.Errorf("BUG: request body: %w", err)}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.endpoint(), bytes.NewReader(raw))
	if err != nil {
		return stream{issued: true, err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	if cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	s := stream{issued: true, sent: cfg.now()}
	resp, err := client.Do(req)
	if err != nil {
		s.err, s.ended = err, cfg.now()
		return s
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		s.err, s.ended = fmt.Errorf("POST %s: HTTP %d: %s", req.URL.Path, resp.StatusCode, bytes.TrimSpace(msg)), cfg.now()
		return s
	}
	s.times, s.usage, s.err = readStream(resp.Body, cfg.now)
	if s.err != nil {
		s.err = fmt.Errorf("POST %s: %w", req.URL.Path, s.err)
	}
	s.ended = cfg.now()
	return s
}

// maxLine bounds one SSE line.
const maxLine = 1 << 20

// readStream reads Server-Sent Events until "data: [DONE]". It returns the
// arrival time (now()) of each chunk with non-empty text, the
// completion_tokens of a usage chunk, and an error for an error event, a
// chunk that is not JSON, or a stream that ends without [DONE].
func readStream(r io.Reader, now func() time.Time) (times []time.Time, usage int, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			event = ""
			continue
		case strings.HasPrefix(line, ":"): // comment
			continue
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(line[len("event:"):])
			continue
		case !strings.HasPrefix(line, "data:"):
			continue
		}
		data := strings.TrimPrefix(line[len("data:"):], " ")
		if event == "error" {
			return times, usage, fmt.Errorf("error event after %d content chunks: %s", len(times), data)
		}
		if data == "[DONE]" {
			return times, usage, nil
		}
		var c struct {
			Choices []struct {
				Text  string `json:"text"`
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return times, usage, fmt.Errorf("chunk %d is not JSON: %w: %.100q", len(times)+1, err, data)
		}
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return times, usage, fmt.Errorf("error chunk after %d content chunks: %s", len(times), c.Error)
		}
		if c.Usage != nil {
			usage = c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			if ch.Text != "" || ch.Delta.Content != "" {
				times = append(times, now())
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return times, usage, fmt.Errorf("after %d content chunks: %w", len(times), err)
	}
	return times, usage, fmt.Errorf("stream ended without [DONE] after %d content chunks", len(times))
}

// maxErrorSamples bounds Result.ErrorSamples.
const maxErrorSamples = 5

func summarize(cfg *Config, streams []stream, start, end time.Time) Result {
	r := Result{URL: cfg.endpoint(), Concurrency: cfg.Concurrency, Requests: cfg.Requests, MaxTokens: cfg.MaxTokens}
	var ttft, itl []time.Duration
	for i := range streams {
		s := &streams[i]
		if !s.issued {
			r.NotStarted++
			continue
		}
		if s.err != nil {
			r.Errors++
			if len(r.ErrorSamples) < maxErrorSamples {
				r.ErrorSamples = append(r.ErrorSamples, s.err.Error())
			}
		} else {
			r.Completed++
		}
		r.Tokens += len(s.times)
		r.UsageTokens += s.usage
		if len(s.times) > 0 {
			ttft = append(ttft, s.times[0].Sub(s.sent))
		}
		for j := 1; j < len(s.times); j++ {
			itl = append(itl, s.times[j].Sub(s.times[j-1]))
		}
	}
	r.Elapsed = end.Sub(start).Seconds()
	if r.Elapsed > 0 {
		r.TokensPerSec = float64(r.Tokens) / r.Elapsed
		r.RequestsPerSec = float64(r.Completed) / r.Elapsed
	}
	r.TTFT, r.ITL = latencyOf(ttft), latencyOf(itl)
	return r
}

func summarizeInject(cfg *Config, s *stream, streams []stream, start time.Time) *InjectResult {
	r := &InjectResult{PromptWords: cfg.InjectWords, Sent: s.issued}
	if !s.issued {
		return r
	}
	r.At = s.sent.Sub(start).Seconds()
	r.Tokens = len(s.times)
	if s.err != nil {
		r.Error = s.err.Error()
	}
	firstToken := s.ended
	if len(s.times) > 0 {
		firstToken = s.times[0]
		r.TTFT = ms(s.times[0].Sub(s.sent))
	}
	var arrivals [][]time.Time
	for i := range streams {
		arrivals = append(arrivals, streams[i].times)
	}
	r.ITLUntilFirstToken = latencyOf(gapsOverlapping(arrivals, s.sent, firstToken))
	return r
}

// gapsOverlapping returns the gaps between consecutive arrivals of each
// stream that overlap the interval from..to: a gap from a to b counts when
// b > from and a < to.
func gapsOverlapping(streams [][]time.Time, from, to time.Time) []time.Duration {
	var gaps []time.Duration
	for _, times := range streams {
		for j := 1; j < len(times); j++ {
			if times[j].After(from) && times[j-1].Before(to) {
				gaps = append(gaps, times[j].Sub(times[j-1]))
			}
		}
	}
	return gaps
}

// latencyOf sorts d and summarizes it.
func latencyOf(d []time.Duration) Latency {
	slices.Sort(d)
	l := Latency{Count: len(d)}
	if len(d) > 0 {
		l.P50, l.P99, l.Max = ms(percentile(d, 50)), ms(percentile(d, 99)), ms(d[len(d)-1])
	}
	return l
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted: the smallest value such that at least p% of the values are at
// most it. It returns 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// wordList is the vocabulary of generated prompts.
const wordList = `the of and to in a is that for it as was with be by on not he this are or his from at which
but have an they you were her she there one all we their been has when who will more no if out so said what up its
about into than them can only other new some could time these two may then do first any my now such like our over man
me even most made after also did many before must through back years where much your way well down should because
each just those people how too little state good very make world still own see men work long get here between both life
being under never day same another know while last might us great old year off come since against go came right used
take three`

// promptWords returns n words from wordList, chosen with seed: the same
// text for the same arguments.
// promptSeed is the seed of prompt i (1-based; 1<<32 for the injected one)
// in a run seeded with seed.
func promptSeed(seed, i uint64) uint64 { return seed<<40 ^ i }

func promptWords(n int, seed uint64) string {
	words := strings.Fields(wordList)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()
}

// requestPrompt is ordinary request i's prompt: Prompt, or its own of
// PromptWords words, after the shared PrefixWords words.
func requestPrompt(cfg *Config, i int) string {
	prompt := cfg.Prompt
	if cfg.PromptWords > 0 {
		prompt = promptWords(cfg.PromptWords, promptSeed(cfg.Seed, uint64(i)+1))
	}
	if cfg.PrefixWords > 0 {
		prompt = promptWords(cfg.PrefixWords, promptSeed(cfg.Seed, 0)) + " " + prompt
	}
	return prompt
}
