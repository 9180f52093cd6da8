package api

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/internal/fixtures"
)

// loadArchFixture loads a model of fixtures/archs on the Vulkan device and
// serves it; the reference file beside it is decoded into ref.
func loadArchFixture(t *testing.T, name string, ref any) *testServer {
	t.Helper()
	dir := fixtures.Dir(t, "archs")
	raw, err := os.ReadFile(filepath.Join(dir, name+".ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, ref); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Load(filepath.Join(dir, name+".gguf"), engine.Config{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	b := NewEngineBackend(m, name, engine.PoolNone, engine.SchedulerConfig{})
	t.Cleanup(b.Close)
	return newReadyServer(t, b, Config{})
}

// TestEncoderRefusesGeneration: completion and chat requests to an
// embedding model are a 400 naming the model, streamed or not.
func TestEncoderRefusesGeneration(t *testing.T) {
	var ref struct{}
	ts := loadArchFixture(t, "bert-bge-256x4-f16", &ref)
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"hello","max_tokens":4}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`},
	} {
		r := ts.post(c.path, c.body)
		if e := errorOf(t, r.body); r.status != 400 || e["param"] != "model" || !strings.Contains(e["message"].(string), "cannot generate") {
			t.Errorf("POST %s = %d %s, want 400 naming model and saying it cannot generate", c.path, r.status, r.body)
		}
		r = ts.post(c.path, strings.Replace(c.body, "{", `{"stream":true,`, 1))
		if evs := parseSSE(t, r.body); r.status != 200 || len(evs) != 1 || evs[0].event != "error" || !strings.Contains(evs[0].data, "cannot generate") {
			t.Errorf("streamed POST %s = %d %s, want an SSE error event saying it cannot generate", c.path, r.status, r.body)
		}
	}
}

// TestEncoderEmbeddings: /v1/embeddings of the BERT fixture returns the
// reference's normalized vectors (cosine >= 0.9999), and /v1/rerank, the
// model being no reranker, the cosine similarities of those.
func TestEncoderEmbeddings(t *testing.T) {
	var ref struct {
		Embeddings []struct {
			Input      string    `json:"input"`
			Normalized []float64 `json:"embedding_normalized"`
		} `json:"embeddings"`
	}
	ts := loadArchFixture(t, "bert-bge-256x4-f16", &ref)
	// The API refuses the reference's empty input (400); the others.
	var inputs []string
	var want [][]float32
	for _, e := range ref.Embeddings {
		if e.Input != "" {
			inputs = append(inputs, e.Input)
			want = append(want, toF32(e.Normalized))
		}
	}
	body, _ := json.Marshal(map[string]any{"input": inputs})
	r := ts.post("/v1/embeddings", string(body))
	if r.status != 200 {
		t.Fatalf("POST /v1/embeddings = %d %s", r.status, r.body)
	}
	var resp struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(r.body, &resp); err != nil || len(resp.Data) != len(inputs) {
		t.Fatalf("embeddings body %s: %v", r.body, err)
	}
	for i, d := range resp.Data {
		if c := cosine(toF32(d.Embedding), want[i]); c < 0.9999 {
			t.Errorf("embedding %d (%q): cosine %.6f with the reference, want >= 0.9999", i, inputs[i], c)
		}
	}
	// Rerank falls back to cosine similarity: query = input 1, documents
	// three others; the expectation is from the reference's vectors.
	docs := []string{inputs[0], inputs[2], inputs[4]}
	body, _ = json.Marshal(map[string]any{"query": inputs[1], "documents": docs})
	r = ts.post("/v1/rerank", string(body))
	var rr struct {
		Results []struct {
			Index int     `json:"index"`
			Score float64 `json:"relevance_score"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.body, &rr); err != nil || r.status != 200 || len(rr.Results) != len(docs) {
		t.Fatalf("POST /v1/rerank = %d %s", r.status, r.body)
	}
	for _, res := range rr.Results {
		c := cosine(want[1], want[[]int{0, 2, 4}[res.Index]])
		if math.Abs(res.Score-c) > 1e-3 {
			t.Errorf("rerank document %d: score %.5f, want the cosine of the reference's embeddings %.5f", res.Index, res.Score, c)
		}
	}
}

// TestEncoderInputAtContextLimit: an embedding input may fill the BERT
// fixture's whole context (its trained positions): exactly that many
// tokens are embedded, one more is a 400 naming the input.
func TestEncoderInputAtContextLimit(t *testing.T) {
	var ref struct{}
	ts := loadArchFixture(t, "bert-bge-256x4-f16", &ref)
	n := ts.s.info.ContextSize
	if n != ts.s.info.TrainContextSize {
		t.Fatalf("context size %d, want the model's trained %d (the limit under test)", n, ts.s.info.TrainContextSize)
	}
	ids := func(n int) string {
		b, _ := json.Marshal(slices.Repeat([]int32{100}, n))
		return `{"input":` + string(b) + `}`
	}
	for _, tc := range []struct {
		name   string
		tokens int
		status int
	}{
		{"at the limit", n, 200},
		{"one past the limit", n + 1, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ts.post("/v1/embeddings", ids(tc.tokens))
			if r.status != tc.status {
				t.Fatalf("POST /v1/embeddings of %d tokens (context %d) = %d %.300s, want %d", tc.tokens, n, r.status, r.body, tc.status)
			}
			if tc.status == 200 {
				var resp struct {
					Data []struct{ Embedding []float64 } `json:"data"`
				}
				if err := json.Unmarshal(r.body, &resp); err != nil || len(resp.Data) != 1 || len(resp.Data[0].Embedding) == 0 {
					t.Errorf("POST /v1/embeddings of %d tokens = %.300s, want one embedding", tc.tokens, r.body)
				}
				return
			}
			if e := errorOf(t, r.body); e["param"] != "input" || !strings.Contains(e["message"].(string), fmt.Sprintf("at most %d tokens", n)) {
				t.Errorf("POST /v1/embeddings of %d tokens = %s, want a 400 naming input and the limit", tc.tokens, r.body)
			}
		})
	}
}

// TestCrossEncoderRerank: /v1/rerank with the cross-encoder fixture returns
// the reference's scores (the raw classifier outputs, within the engine's
// measured bound) sorted; /v1/embeddings on it is a 400.
func TestCrossEncoderRerank(t *testing.T) {
	var ref struct {
		Rerank []struct {
			Query     string    `json:"query"`
			Documents []string  `json:"documents"`
			Scores    []float64 `json:"scores"`
		} `json:"rerank"`
	}
	ts := loadArchFixture(t, "bert-rerank-256x4-f16", &ref)
	for qi, q := range ref.Rerank {
		body, _ := json.Marshal(map[string]any{"query": q.Query, "documents": q.Documents})
		r := ts.post("/v1/rerank", string(body))
		var rr struct {
			Results []struct {
				Index int     `json:"index"`
				Score float64 `json:"relevance_score"`
			} `json:"results"`
		}
		if err := json.Unmarshal(r.body, &rr); err != nil || r.status != 200 || len(rr.Results) != len(q.Documents) {
			t.Fatalf("POST /v1/rerank = %d %s", r.status, r.body)
		}
		var order, want []int
		for _, res := range rr.Results {
			order = append(order, res.Index)
			if d := math.Abs(res.Score - q.Scores[res.Index]); d > 1.5e-2 {
				t.Errorf("query %d document %d: score %.5f, want %.5f", qi, res.Index, res.Score, q.Scores[res.Index])
			}
		}
		for i := range q.Scores {
			want = append(want, i)
		}
		slices.SortStableFunc(want, func(a, b int) int {
			if q.Scores[a] > q.Scores[b] {
				return -1
			}
			if q.Scores[a] < q.Scores[b] {
				return 1
			}
			return 0
		})
		if !slices.Equal(order, want) {
			t.Errorf("query %d: documents ranked %v, want the reference's %v", qi, order, want)
		}
	}
	r := ts.post("/v1/embeddings", `{"input":"hello"}`)
	if e := errorOf(t, r.body); r.status != 400 || e["param"] != "model" {
		t.Errorf("POST /v1/embeddings to a reranker = %d %s, want 400 naming model", r.status, r.body)
	}
}

func toF32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}
