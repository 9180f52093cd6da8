package api

import (
	"path/filepath"
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sampling"
)

// Features returns what this build of the server supports, as /props and
// "vkllm version" list them.
func Features() []string {
	f := []string{"vulkan", "continuous-batching", "prompt-cache", "chat-templates", "jinja", "tool-calls",
		"grammars", "json-schema", "logprobs", "embeddings", "rerank", "metrics", "web-ui"}
	if mtmdBuilt {
		f = append(f, "mtmd")
	}
	return f
}

// opsRoutes registers the operational routes: /metrics, /props, /slots
// and the chat page.
func (s *Server) opsRoutes(r *router.Router) {
	metrics := s.metrics.handler()
	// /metrics answers while the model loads too (its load progress is a
	// metric); like every route but /health it needs the API key when one
	// is set (Prometheus sends it with authorization.credentials).
	getRoute(r, "/metrics", func(ctx *fasthttp.RequestCtx) {
		start := time.Now()
		if !s.authorized(ctx) {
			s.writeError(ctx, errorf(401, "", "missing or wrong API key: send Authorization: Bearer <key>"))
		} else {
			metrics(ctx)
		}
		s.logRequest(ctx, "metrics", start, 0)
	})
	getRoute(r, "/props", s.wrap("props", s.handleProps))
	getRoute(r, "/slots", s.wrap("slots", s.handleSlots))
	s.webRoutes(r)
}

// propsBackend is a backend that describes its model and device beyond
// ModelInfo (EngineBackend).
type propsBackend interface {
	props() backendProps
}

// backendProps is what /props reports of the model and the device.
type backendProps struct {
	Architecture string      `json:"architecture"`
	CtxTrain     int         `json:"n_ctx_train"`
	Embd         int         `json:"n_embd"`
	Layers       int         `json:"n_layer"`
	Params       uint64      `json:"n_params"`
	Size         int64       `json:"size"`
	Device       deviceProps `json:"device"`
}

// deviceProps names the device the model runs on.
type deviceProps struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Driver     string `json:"driver"`
	DriverInfo string `json:"driver_info"`
	APIVersion string `json:"api_version"`
	Memory     uint64 `json:"memory_bytes"`
}

// propsBody is GET /props: the reference server's names where they exist
// (default_generation_settings, total_slots, chat_template, bos_token,
// eos_token, build_info, modalities), plus the model's shape and the device.
type propsBody struct {
	Model                     string      `json:"model"`
	ModelPath                 string      `json:"model_path"`
	NCtx                      int         `json:"n_ctx"`
	NVocab                    int         `json:"n_vocab"`
	TotalSlots                int         `json:"total_slots"`
	ChatTemplateName          string      `json:"chat_template_name"`
	ChatTemplate              string      `json:"chat_template"`
	BOSToken                  string      `json:"bos_token"`
	EOSToken                  string      `json:"eos_token"`
	BuildInfo                 string      `json:"build_info"`
	Features                  []string    `json:"features"`
	Modalities                modalities  `json:"modalities"`
	DefaultGenerationSettings genSettings `json:"default_generation_settings"`
	backendProps
}

type modalities struct {
	Vision bool `json:"vision"`
	Audio  bool `json:"audio"`
}

type genSettings struct {
	NCtx   int           `json:"n_ctx"`
	Params defaultParams `json:"params"`
}

// defaultParams are the sampling defaults of requests that leave a field
// out (API.md 4.1).
type defaultParams struct {
	NPredict      int     `json:"n_predict"`
	Temperature   float64 `json:"temperature"`
	TopK          int     `json:"top_k"`
	TopP          float64 `json:"top_p"`
	MinP          float64 `json:"min_p"`
	TypicalP      float64 `json:"typical_p"`
	RepeatPenalty float64 `json:"repeat_penalty"`
	PenaltyLastN  int     `json:"repeat_last_n"`
	Seed          int64   `json:"seed"`
}

func (s *Server) handleProps(ctx *fasthttp.RequestCtx) handlerResult {
	d := sampling.DefaultParams()
	path := s.cfg.ModelPath
	if !s.cfg.PropsFullPath && path != "" {
		// The folders tell a client about the server's disk.
		path = filepath.Base(path)
	}
	body := propsBody{
		Model: s.info.Name, ModelPath: path, NCtx: s.info.ContextSize, NVocab: s.info.VocabSize,
		TotalSlots: s.cfg.Parallel, ChatTemplateName: s.defTmpl.name, ChatTemplate: s.defTmpl.source,
		BOSToken: s.info.BOSText, EOSToken: s.info.EOSText, BuildInfo: "vkllm " + s.cfg.Version,
		Features: Features(), Modalities: modalities{Vision: s.cfg.HasProjector},
		DefaultGenerationSettings: genSettings{NCtx: s.info.ContextSize, Params: defaultParams{
			NPredict: 16, Temperature: d.Temperature, TopK: d.TopK, TopP: d.TopP, MinP: d.MinP, TypicalP: d.TypicalP,
			RepeatPenalty: d.RepeatPenalty, PenaltyLastN: d.PenaltyLastN, Seed: d.Seed}},
	}
	if pb, ok := s.backend.(propsBackend); ok {
		body.backendProps = pb.props()
	}
	if sb, ok := s.backend.(statsBackend); ok {
		body.TotalSlots = sb.slotCount()
	}
	writeJSON(ctx, body)
	return handlerResult{}
}

// slotsBackend is a backend that reports its KV-cache slots.
type slotsBackend interface {
	slots() []engine.SlotState
	// stateBytes is one slot's recurrent state (0 unless hybrid).
	stateBytes() int64
}

// slotBody is one entry of GET /slots, with the reference server's names
// (id, n_ctx, is_processing, next_token) and what vkllm's scheduler adds.
type slotBody struct {
	ID           int       `json:"id"`
	NCtx         int       `json:"n_ctx"`
	IsProcessing bool      `json:"is_processing"`
	State        string    `json:"state"`
	RequestID    string    `json:"id_task"`
	NCached      int       `json:"n_cached"`
	NPrompt      int       `json:"n_prompt_tokens"`
	NProcessed   int       `json:"n_prompt_tokens_processed"`
	NReused      int       `json:"n_prompt_tokens_cache"`
	NextToken    nextToken `json:"next_token"`
	// Recurrent is a hybrid model's recurrent state of the slot (absent
	// for other models).
	Recurrent *slotState `json:"recurrent,omitempty"`
}

// slotState is a slot's recurrent state: the positions it holds (its
// continuation point) and its fixed size.
type slotState struct {
	NPos  int   `json:"n_pos"`
	Bytes int64 `json:"bytes"`
}

type nextToken struct {
	HasNextToken bool `json:"has_next_token"`
	NDecoded     int  `json:"n_decoded"`
	NRemain      int  `json:"n_remain"`
}

func (s *Server) handleSlots(ctx *fasthttp.RequestCtx) handlerResult {
	sb, ok := s.backend.(slotsBackend)
	if !ok {
		s.writeError(ctx, errorf(501, "", "this backend does not report its slots"))
		return handlerResult{}
	}
	out := []slotBody{}
	stateBytes := sb.stateBytes()
	for i, v := range sb.slots() {
		e := slotBody{ID: i, NCtx: s.info.ContextSize, State: v.Phase.String(), IsProcessing: v.Phase != engine.SlotIdle,
			RequestID: v.Label, NCached: v.Cached, NPrompt: v.Prompt, NProcessed: v.Fed, NReused: v.Reused}
		if v.Phase == engine.SlotPrefill || v.Phase == engine.SlotDecoding {
			e.NextToken = nextToken{HasNextToken: true, NDecoded: v.Generated, NRemain: max(0, v.MaxTokens-v.Generated)}
		}
		if stateBytes > 0 {
			e.Recurrent = &slotState{NPos: v.StatePos, Bytes: stateBytes}
		}
		out = append(out, e)
	}
	writeJSON(ctx, out)
	return handlerResult{}
}

// props describes the model and the device for /props.
func (b *EngineBackend) props() backendProps {
	m := b.m
	var params uint64
	for i := range m.File.Tensors {
		params += m.File.Tensors[i].NumElements()
	}
	info := m.Device().Info()
	return backendProps{Architecture: m.Opts.Arch, CtxTrain: m.Opts.CtxTrain, Embd: m.Opts.Embd, Layers: m.Opts.Layers,
		Params: params, Size: m.File.Size,
		Device: deviceProps{Name: info.Name, Type: info.TypeName, Driver: info.DriverName, DriverInfo: info.DriverInfo,
			APIVersion: info.APIVersion, Memory: info.DeviceLocalBytes()}}
}

// slots reports what each KV-cache slot does.
func (b *EngineBackend) slots() []engine.SlotState { return b.s.Slots() }

func (b *EngineBackend) stateBytes() int64 { return b.s.Stats().KV.StateBytes }

// slotCount is the number of KV-cache slots (--parallel).
func (b *EngineBackend) slotCount() int { return b.m.Slots() }

// stepHistogram is the histogram of forward-pass times.
func (b *EngineBackend) stepHistogram() prometheus.Histogram { return b.steps }
