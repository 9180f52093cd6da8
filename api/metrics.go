package api

import (
	"context"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"github.com/vkllm/vkllm/engine"
)

// metrics are the server's Prometheus metrics, served at /metrics in the
// text exposition format. Counters kept elsewhere (the scheduler's) are read
// when scraped; the rest are updated as requests run. Every update is
// lock-free and allocation-free except the per-request labels.
type metrics struct {
	reg *prometheus.Registry

	requests        *prometheus.CounterVec   // route, status
	requestDuration *prometheus.HistogramVec // route
	promptTokens    prometheus.Counter
	generatedTokens prometheus.Counter
	ttft            prometheus.Histogram
	itl             prometheus.Histogram
	promptTime      prometheus.Histogram
}

// latencyBuckets span a fast GPU's decode step to a long prompt on a CPU
// driver, in seconds.
var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vkllm_requests_total",
		Help: "HTTP requests answered, by route and status (a stream counts with the status it ended with: 200, 499 when the client left, or its error event's status).",
	}, []string{"route", "status"})
	m.requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vkllm_request_duration_seconds",
		Help:    "Time from receiving a request to its last byte, by route.",
		Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
	}, []string{"route"})
	m.promptTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vkllm_prompt_tokens_total",
		Help: "Prompt tokens of generations (those taken from the prompt cache included; see vkllm_prompt_cache_reused_tokens_total).",
	})
	m.generatedTokens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vkllm_generation_tokens_total",
		Help: "Tokens generated (end-of-generation tokens not counted).",
	})
	m.ttft = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "vkllm_time_to_first_token_seconds",
		Help:    "Time from a generation's start (queueing included) to its first token.",
		Buckets: latencyBuckets,
	})
	m.itl = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "vkllm_inter_token_latency_seconds",
		Help:    "Time between two consecutive tokens of one sequence.",
		Buckets: latencyBuckets,
	})
	m.promptTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "vkllm_prompt_processing_seconds",
		Help:    "Time from a generation's admission into a KV-cache slot to its first token (its prompt's forward passes).",
		Buckets: latencyBuckets,
	})
	m.reg.MustRegister(m.requests, m.requestDuration, m.promptTokens, m.generatedTokens, m.ttft, m.itl, m.promptTime,
		serverCollector{s},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// request counts one answered request.
func (m *metrics) request(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.requestDuration.WithLabelValues(route).Observe(d.Seconds())
}

// handler serves the registry in the exposition format the scraper asks
// for (Prometheus text by default, OpenMetrics on request).
func (m *metrics) handler() fasthttp.RequestHandler {
	return fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
}

// MetricsHandler returns a handler for a listener of its own (serve
// --metrics-addr) that answers only GET and HEAD /metrics, without the API
// key: the address is meant for the scraper alone (a pod port that no
// Service exposes, a firewalled interface). Any other path is a 404.
// Scrapes are logged at debug level, like /health.
func (s *Server) MetricsHandler() fasthttp.RequestHandler {
	h := s.metrics.handler()
	return func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		switch {
		case string(ctx.Path()) != "/metrics":
			s.writeError(ctx, errorf(404, "", "no route %s %s: this listener serves only /metrics", ctx.Method(), ctx.Path()))
		case !ctx.IsGet() && !ctx.IsHead():
			ctx.Response.Header.Set("Allow", "GET, HEAD")
			s.writeError(ctx, errorf(405, "", "%s /metrics: only GET and HEAD", ctx.Method()))
		default:
			h(ctx)
		}
		s.logRequest(ctx, "metrics", start, 0)
	}
}

// serverCollector reports the values read at scrape time: the load state,
// the queue, the slots and the scheduler's counters. It describes nothing
// up front (an unchecked collector), as what it reports depends on the
// backend, known only once the model is loaded.
type serverCollector struct{ s *Server }

func (serverCollector) Describe(chan<- *prometheus.Desc) {}

var (
	descReady       = prometheus.NewDesc("vkllm_model_ready", "1 once the model is loaded and requests are served, 0 while loading or after a failed load.", nil, nil)
	descLoad        = prometheus.NewDesc("vkllm_model_load_progress_ratio", "Fraction of the weights uploaded to the device.", nil, nil)
	descQueue       = prometheus.NewDesc("vkllm_queue_depth", "Sequences (prompts times candidates) waiting for a KV-cache slot: the autoscaling signal.", nil, nil)
	descAdmitted    = prometheus.NewDesc("vkllm_requests_in_flight", "Sequences admitted by the HTTP queue: waiting or running.", nil, nil)
	descRunning     = prometheus.NewDesc("vkllm_sequences_running", "Sequences holding a KV-cache slot (prefilling or decoding).", nil, nil)
	descDecoding    = prometheus.NewDesc("vkllm_sequences_decoding", "Sequences past their prompt, generating a token each step.", nil, nil)
	descSlots       = prometheus.NewDesc("vkllm_kv_cache_slots", "KV-cache slots (--parallel): sequences decoded together.", nil, nil)
	descPosUsed     = prometheus.NewDesc("vkllm_kv_cache_used_tokens", "KV-cache positions holding keys and values: of running sequences and of the prefix cache.", nil, nil)
	descPosTotal    = prometheus.NewDesc("vkllm_kv_cache_capacity_tokens", "KV-cache positions of the page pool (--kv-memory).", nil, nil)
	descPages       = prometheus.NewDesc("vkllm_kv_pages", "KV-cache pages by state: used (held by running sequences), cached (prefix cache only; evicted when needed) and free.", []string{"state"}, nil)
	descPageSize    = prometheus.NewDesc("vkllm_kv_page_size_tokens", "Positions per KV-cache page.", nil, nil)
	descPreempted   = prometheus.NewDesc("vkllm_preemptions_total", "Sequences preempted for want of KV pages (recomputed when readmitted).", nil, nil)
	descParked      = prometheus.NewDesc("vkllm_parked_total", "Sequences that gave their slot up to waiting ones because their client was not reading (recomputed when it reads again).", nil, nil)
	descUsage       = prometheus.NewDesc("vkllm_kv_cache_usage_ratio", "vkllm_kv_cache_used_tokens / vkllm_kv_cache_capacity_tokens.", nil, nil)
	descReused      = prometheus.NewDesc("vkllm_prompt_cache_reused_tokens_total", "Prompt tokens taken from the KV cache (a previous turn, a shared prefix) instead of being computed.", nil, nil)
	descSteps       = prometheus.NewDesc("vkllm_steps_total", "Forward passes run by the scheduler.", nil, nil)
	descRows        = prometheus.NewDesc("vkllm_step_rows_total", "Rows fed to forward passes: decode (one generated token each) or prompt.", []string{"kind"}, nil)
	descArgmaxRows  = prometheus.NewDesc("vkllm_gpu_argmax_tokens_total", "Tokens chosen from the device's argmax of their logits (greedy sequences), their logits row never read back.", nil, nil)
	descTopKRows    = prometheus.NewDesc("vkllm_gpu_topk_tokens_total", "Tokens drawn from the device's top k logits of their row (top_k sampling without penalties, bias, grammar or logprobs), only k ids and logits read back.", nil, nil)
	descReadBytes   = prometheus.NewDesc("vkllm_readback_bytes_total", "Bytes of logits, argmax ids, top-k logits and hidden states read back from the device.", nil, nil)
	descContextSize = prometheus.NewDesc("vkllm_context_size_tokens", "Positions one sequence may use (prompt plus generated tokens).", nil, nil)
	descUtil        = prometheus.NewDesc("vkllm_kv_cache_utilization_ratio", "Fraction (0 to 1) of the KV-cache pages that running sequences hold; pages only the prefix cache holds count as free, as they are evicted when needed (the Gateway API Inference Extension's KVCacheUtilization).", nil, nil)
	descStateBytes  = prometheus.NewDesc("vkllm_recurrent_state_bytes", "A hybrid model's recurrent-state memory (fixed, whatever the sequences' lengths): for the slots and for the prefix cache's checkpoints (--ctx-checkpoints).", []string{"for"}, nil)
	descCheckpoints = prometheus.NewDesc("vkllm_recurrent_checkpoints", "A hybrid model's recurrent-state checkpoints: holding a saved state (used) or not (free).", []string{"state"}, nil)
	descKVInfo      = prometheus.NewDesc("vkllm_kv_cache_config_info", "Always 1; its labels give the KV-cache page size in positions (block_size) and the page count (num_gpu_blocks).", []string{"block_size", "num_gpu_blocks"}, nil)
)

// The Gateway API Inference Extension's endpoint picker reads these series
// by default (its model-server protocol, as vLLM names them): the same
// values as vkllm_queue_depth, vkllm_sequences_running,
// vkllm_kv_cache_utilization_ratio and vkllm_kv_cache_config_info, so that
// an InferencePool of vkllm pods needs no metric settings.
var (
	descGIEWaiting  = prometheus.NewDesc("vllm:num_requests_waiting", "Sequences waiting for a KV-cache slot (= vkllm_queue_depth).", nil, nil)
	descGIERunning  = prometheus.NewDesc("vllm:num_requests_running", "Sequences holding a KV-cache slot (= vkllm_sequences_running).", nil, nil)
	descGIEUsage    = prometheus.NewDesc("vllm:kv_cache_usage_perc", "Fraction (0 to 1) of the KV-cache pages running sequences hold (= vkllm_kv_cache_utilization_ratio).", nil, nil)
	descGIEUsageOld = prometheus.NewDesc("vllm:gpu_cache_usage_perc", "The same as vllm:kv_cache_usage_perc, under its earlier name.", nil, nil)
	descGIEInfo     = prometheus.NewDesc("vllm:cache_config_info", "Always 1; block_size and num_gpu_blocks as in vkllm_kv_cache_config_info.", []string{"block_size", "num_gpu_blocks"}, nil)
)

// statsBackend is a backend with a scheduler to report on (EngineBackend).
type statsBackend interface {
	Stats() engine.Stats
	stepHistogram() prometheus.Histogram
	slotCount() int
}

func (c serverCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	state := s.state.Load()
	ready := 0.0
	if state == stateReady {
		ready = 1
	}
	gauge(descReady, ready)
	progress := math.Float64frombits(s.progress.Load())
	if state == stateReady {
		progress = 1
	}
	gauge(descLoad, progress)
	gauge(descAdmitted, float64(s.waiting.Load()))
	// load reports the queue, the running sequences and the KV-cache
	// utilization under both names (see descGIEWaiting).
	load := func(waiting, running int, util float64) {
		gauge(descQueue, float64(waiting))
		gauge(descGIEWaiting, float64(waiting))
		gauge(descRunning, float64(running))
		gauge(descGIERunning, float64(running))
		gauge(descUtil, util)
		gauge(descGIEUsage, util)
		gauge(descGIEUsageOld, util)
	}
	if state != stateReady {
		load(0, 0, 0)
		return
	}
	gauge(descContextSize, float64(s.info.ContextSize))
	sb, ok := s.backend.(statsBackend)
	if !ok {
		// A backend without a scheduler: the HTTP queue is the queue.
		busy := len(s.slots)
		load(max(0, int(s.waiting.Load())-busy), busy, float64(busy)/float64(max(1, s.cfg.Parallel)))
		gauge(descSlots, float64(s.cfg.Parallel))
		return
	}
	st := sb.Stats()
	n := sb.slotCount()
	util := 0.0
	if kv := st.KV; kv.Pages > 0 {
		util = min(1, float64(kv.Used)/float64(kv.Pages))
		bs, blocks := strconv.Itoa(kv.PageSize), strconv.Itoa(kv.Pages)
		gauge(descKVInfo, 1, bs, blocks)
		gauge(descGIEInfo, 1, bs, blocks)
	} else if n > 0 {
		util = min(1, float64(st.Active)/float64(n))
	}
	load(st.Queued, st.Active, util)
	gauge(descDecoding, float64(st.Decoding))
	gauge(descSlots, float64(n))
	total := float64(n * s.info.ContextSize)
	if kv := st.KV; kv.Pages > 0 {
		total = float64(kv.Pages * kv.PageSize)
		gauge(descPages, float64(kv.Used), "used")
		gauge(descPages, float64(kv.Cached), "cached")
		gauge(descPages, float64(kv.Free), "free")
		gauge(descPageSize, float64(kv.PageSize))
		if kv.StateBytes > 0 {
			gauge(descStateBytes, float64(kv.StateBytes)*float64(n), "slots")
			gauge(descStateBytes, float64(kv.StateBytes)*float64(kv.Checkpoints), "checkpoints")
			gauge(descCheckpoints, float64(kv.CheckpointsUsed), "used")
			gauge(descCheckpoints, float64(kv.Checkpoints-kv.CheckpointsUsed), "free")
		}
	}
	gauge(descPosUsed, float64(st.CachedTokens))
	gauge(descPosTotal, total)
	if total > 0 {
		gauge(descUsage, float64(st.CachedTokens)/total)
	}
	counter(descReused, float64(st.ReusedTokens))
	counter(descPreempted, float64(st.Preempted))
	counter(descParked, float64(st.Parked))
	counter(descSteps, float64(st.Steps))
	counter(descRows, float64(st.DecodeRows), "decode")
	counter(descRows, float64(st.PrefillRows), "prompt")
	counter(descArgmaxRows, float64(st.ArgmaxRows))
	counter(descTopKRows, float64(st.TopKRows))
	counter(descReadBytes, float64(st.ReadBytes))
	sb.stepHistogram().Collect(ch)
}

// newStepHistogram is the histogram of forward-pass times an EngineBackend
// keeps (SchedulerConfig.OnStep feeds it).
func newStepHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "vkllm_step_duration_seconds",
		Help:    "Time of one forward pass on the device (recording, submit, wait and logits read-back): the GPU step time.",
		Buckets: latencyBuckets,
	})
}

// reqStats accumulates what one generation request measured; serve puts it
// in the request's context and generateAll adds to it (from the request's
// goroutine only).
type reqStats struct {
	id         string
	scope      string        // the prompt-cache scope (Server.cacheScope)
	share      []int32       // the tokens of the public prompt prefix (--cache-share)
	start      time.Time     // the request was admitted (the log's duration)
	promptN    int           // prompt tokens computed
	cacheN     int           // prompt tokens taken from the cache
	promptDur  time.Duration // admission to first token, summed over prompts
	predictedN int
	genDur     time.Duration // first to last token, summed over prompts

	// clientGone says the client closed its connection before the answer
	// was complete; set by the connection watcher (another goroutine).
	clientGone atomic.Bool
}

type reqStatsKey struct{}

// requestIDKey is the fasthttp user value under which a handler leaves its
// response id, so /slots can show which request runs where.
const requestIDKey = "vkllm.request_id"

// requestID returns the id a handler left for its request ("" for none).
func requestID(rc *fasthttp.RequestCtx) string {
	id, _ := rc.UserValue(requestIDKey).(string)
	return id
}

// withReqStats returns ctx carrying a fresh reqStats for request id.
func withReqStats(ctx context.Context, id string) context.Context {
	return withStats(ctx, &reqStats{id: id, start: time.Now()})
}

// withStats returns ctx carrying rs.
func withStats(ctx context.Context, rs *reqStats) context.Context {
	return context.WithValue(ctx, reqStatsKey{}, rs)
}

// reqStatsOf returns the request's stats; nil outside a served request.
func reqStatsOf(ctx context.Context) *reqStats {
	rs, _ := ctx.Value(reqStatsKey{}).(*reqStats)
	return rs
}

// timings is the per-request speed report of the reference server, in
// responses as "timings". prompt_* cover the prompt: from the moment the
// sequence got a KV-cache slot (queueing excluded) to its first token,
// over the prompt tokens computed (cache_n more were reused). predicted_*
// cover generation: from the first token to the last, over every generated
// token; predicted_per_second is predicted_n per second of that span, as
// the reference computes it.
type timings struct {
	CacheN              int     `json:"cache_n"`
	PromptN             int     `json:"prompt_n"`
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
}

// timings returns the report of the request so far; nil for no stats.
func (rs *reqStats) timings() *timings {
	if rs == nil {
		return nil
	}
	t := &timings{CacheN: rs.cacheN, PromptN: rs.promptN, PredictedN: rs.predictedN,
		PromptMS: ms(rs.promptDur), PredictedMS: ms(rs.genDur)}
	t.PromptPerTokenMS, t.PromptPerSecond = rates(t.PromptMS, t.PromptN)
	t.PredictedPerTokenMS, t.PredictedPerSecond = rates(t.PredictedMS, t.PredictedN)
	return t
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// rates returns milliseconds per token and tokens per second, 0 when
// either is 0.
func rates(msec float64, n int) (perToken, perSecond float64) {
	if msec <= 0 || n <= 0 {
		return 0, 0
	}
	return msec / float64(n), float64(n) * 1000 / msec
}

// genTimer measures one generateAll call: the TTFT and inter-token
// histograms as tokens arrive, the request's timings at the end.
type genTimer struct {
	m        *metrics
	start    time.Time // generateAll was called
	admitted time.Time // the first candidate got its slot (zero: unknown)
	reused   int
	first    time.Time // the first event of any candidate
	last     time.Time // the last generated token of any candidate
}

// event records candidate st's event ev at now.
func (g *genTimer) event(st *genState, ev *engine.Event, now time.Time) {
	if g.first.IsZero() {
		g.first, g.admitted, g.reused = now, ev.Admitted, ev.Reused
		g.m.ttft.Observe(now.Sub(g.start).Seconds())
	}
	if ev.EOG {
		return
	}
	g.m.generatedTokens.Inc()
	if !st.lastToken.IsZero() {
		g.m.itl.Observe(now.Sub(st.lastToken).Seconds())
	}
	st.lastToken, g.last = now, now
}

// finish adds the call's prompt of n tokens and its generated tokens to rs
// (may be nil).
func (g *genTimer) finish(rs *reqStats, n int, cands []*candidate) {
	g.m.promptTokens.Add(float64(n))
	if g.first.IsZero() {
		return // nothing ran
	}
	from := g.admitted
	if from.IsZero() || from.Before(g.start) {
		from = g.start
	}
	g.m.promptTime.Observe(g.first.Sub(from).Seconds())
	if rs == nil {
		return
	}
	rs.promptN += n - g.reused
	rs.cacheN += g.reused
	rs.promptDur += g.first.Sub(from)
	for _, c := range cands {
		rs.predictedN += c.tokens
	}
	if !g.last.IsZero() {
		rs.genDur += g.last.Sub(g.first)
	}
}
