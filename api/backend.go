// Package api serves the HTTP API of API.md over fasthttp: strict request
// decoding, chat templates, tool calls, stop sequences, logprobs shaping,
// SSE streaming, authentication, the loading state and a FIFO queue in front
// of the model. Everything model-specific sits behind the narrow Backend
// interface, so the engine adapter stays thin and tests use a fake.
package api

import (
	"context"
	"errors"

	"github.com/vkllm/vkllm/engine"
	"github.com/vkllm/vkllm/sampling"
)

// ModelInfo describes the loaded model. It is read once after the load
// finished and must not change afterwards.
type ModelInfo struct {
	// Name is the model id of /v1/models (the --model-alias or the file name).
	Name string
	// ContextSize is the number of positions one sequence may use (prompt
	// plus generated tokens).
	ContextSize int
	// VocabSize is the number of token ids.
	VocabSize int
	// ChatTemplate is the GGUF tokenizer.chat_template, "" when absent.
	ChatTemplate string
	// BOSText and EOSText are the texts of the BOS and EOS tokens, given to
	// Jinja templates as bos_token and eos_token ("" when the model has none).
	BOSText, EOSText string
	// AddBOS reports whether tokenizing with addSpecial prepends BOS.
	AddBOS bool
	// TrainContextSize, Params, SizeBytes and EmbeddingSize describe the
	// model in /v1/models (meta): the context it was trained with, its
	// weight count, the bytes of its tensors and its hidden size; 0 when
	// unknown.
	TrainContextSize int
	Params           int64
	SizeBytes        int64
	EmbeddingSize    int
	// Encoder reports a model that cannot generate (an embedding or rerank
	// model): completion and chat requests get a 400.
	Encoder bool
	// Reranker reports a cross-encoder: Embed of the tokens of a (query,
	// document) pair (RerankTokens) returns one value, its relevance score,
	// which /v1/rerank reports instead of a cosine similarity.
	Reranker bool
	// FIM is the model's fill-in-the-middle tokens (GGUF
	// tokenizer.ggml.fim_*_token_id, or found by their texts), which
	// /infill needs; nil when the model lacks the prefix, suffix or middle
	// token.
	FIM *FIMTokens
}

// FIMTokens are a model's fill-in-the-middle token ids; Rep and Sep (the
// repository-level pattern's) are -1 when absent.
type FIMTokens struct {
	Pre, Suf, Mid, Rep, Sep int32
}

// RerankTokenizer is implemented by backends whose model is a
// cross-encoder (ModelInfo.Reranker): it returns the sequence the model
// scores for a (query, document) pair.
type RerankTokenizer interface {
	RerankTokens(query, document string) ([]int32, error)
}

// Backend is what the API needs from the model side. The API owns request
// validation, templates, stop sequences, n/best_of, logprobs shaping and
// queueing; the backend only tokenizes and runs sequences.
//
// Concurrency: every method is called from any number of goroutines at
// once. A backend with its own scheduler (BatchingBackend) runs Generate and
// Embed calls together and queues them itself; for any other backend the
// API lets at most Server.Parallel of them run at once (a FIFO queue in
// front), and a simple one may serialize them with a mutex.
type Backend interface {
	// Info returns the model description.
	Info() ModelInfo
	// Tokenize turns text into token ids. addSpecial adds BOS (and EOS)
	// as the model's metadata asks; parseSpecial turns the text of special
	// tokens (for example "<|im_start|>") into their ids instead of
	// tokenizing it as plain text.
	Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error)
	// Detokenize returns the text of tokens (special tokens rendered as
	// their text); an id outside the vocabulary is an error naming it.
	Detokenize(tokens []int32) (string, error)
	// Piece returns the raw bytes token id produces in generated text: may
	// be part of a UTF-8 character, empty for control tokens. The returned
	// slice must not be modified.
	Piece(id int32) []byte
	// TokenText returns the vocabulary entry of id, the text of special and
	// control tokens included ("" out of range). The API uses it to keep
	// tool-call markers such as Mistral's [TOOL_CALLS] or Llama's
	// <|python_tag|> in the output of requests with tools.
	TokenText(id int32) string
	// IsEOG reports whether id ends generation (EOS, EOT, ...).
	IsEOG(id int32) bool
	// EOG returns every end-of-generation token id.
	EOG() []int32

	// Generate runs the candidates reqs of one request, which share their
	// prompt (n/best_of; usually one), together: it processes the prompt,
	// then repeatedly samples a token for each candidate i with a sampling
	// chain built from reqs[i].Params and reqs[i].Constraint
	// (sampling.NewChain; Constraint may be nil) and calls emit(i, ev) with
	// it, in order per candidate, from the calling goroutine. An EOG token
	// is emitted too (engine.Event.EOG true) and ends its candidate, as do
	// reqs[i].MaxTokens tokens, emit returning ErrStop for it (the API's
	// stop sequences, a tool call finished), and running out of positions
	// (the API reports finish_reason "length" for that). Generate returns:
	//   - nil when every candidate has ended so;
	//   - ctx.Err() when ctx was cancelled (a disconnected client): the
	//     backend checks ctx at least once per decode step and frees the
	//     candidates' slots before returning;
	//   - any other error when the model failed, or emit's error (other
	//     than ErrStop) as is, which ends every candidate.
	// The backend may reuse ev and its Top for the next call of emit; the
	// API copies what it keeps. ev.Admitted and ev.Reused (timings) are
	// set on a candidate's first event, or zero when the backend does not
	// know them. Generate must not keep emit or reqs after it returns. A
	// *sampling.ParamError from NewChain must be returned unwrapped or
	// wrapped with %w so the API can answer 400 naming the field.
	Generate(ctx context.Context, reqs []*GenerateRequest, emit func(i int, ev *engine.Event) error) error

	// Embed returns the pooled embedding (not normalized) of tokens over
	// the model's last hidden states, pooled as the model says (GGUF
	// {arch}.pooling_type, mean when absent, or the server's override). It
	// returns ctx.Err() when cancelled.
	Embed(ctx context.Context, tokens []int32) ([]float32, error)
}

// TextTokenizer is a Backend that can tokenize text as plain text: no
// special token matched in it at all, not even the user-defined ones that
// Tokenize matches without parseSpecial (some act as control tokens, as
// Phi-3's "</s>"). The API tokenizes chat message contents so when the
// backend offers it, and with Tokenize(text, false, false) otherwise.
type TextTokenizer interface {
	TokenizeText(text string) ([]int32, error)
}

// BatchingBackend is a Backend whose Generate and Embed calls run
// together in shared forward passes and wait in the backend's own queue:
// the API then lets every admitted request call it at once.
type BatchingBackend interface {
	Backend
	// Batching reports that the backend schedules concurrent calls itself.
	Batching() bool
}

// GenerateRequest is one sequence to run. The API fills it; the backend
// reads it and must not modify it.
type GenerateRequest struct {
	// Prompt is the tokenized prompt (BOS included when wanted), at least
	// one token, shorter than the context size.
	Prompt []int32
	// Media are the prompt's images (requests with image parts on a
	// ProjectorBackend): their prompt rows hold pseudo-ids
	// (engine.MediaTokens), not vocabulary tokens.
	Media []*engine.Media
	// Params are the validated sampling parameters; Params.Seed is the
	// sequence's own seed (best_of candidates get distinct ones).
	Params sampling.Params
	// Constraint restricts the tokens (a grammar matcher), nil for none.
	// It is fresh for this sequence and belongs to it.
	Constraint sampling.Constraint
	// MaxTokens is the most tokens to generate (>= 1).
	MaxTokens int
	// TopLogprobs is the number of alternatives to report per token in
	// engine.Event.Top (0 none). Logprobs asks for engine.Event.Logprob.
	Logprobs    bool
	TopLogprobs int
	// ID is the request's id (its response id), for reports such as
	// /slots; opaque to the backend.
	ID string
	// PromptLogprobs asks for the prompt tokens' log-probabilities (each
	// given the tokens before it, from the second token on, with
	// TopLogprobs alternatives) in the first engine.Event's Prompt: echo
	// with logprobs.
	PromptLogprobs bool
}

// ErrStop is returned by emit to end a sequence normally.
var ErrStop = errors.New("api: stop generation")
