package sampling

import (
	"fmt"
	"math"
)

// RandomSeed is the Seed value that asks a chain to draw its own seed
// (the API's "seed missing" and llama.cpp's seed -1). The drawn seed is
// not reported anywhere. Any Seed whose low 32 bits are all ones does the
// same, as in llama.cpp.
const RandomSeed int64 = -1

// MaxTopLogprobs is the largest TopLogprobs that Validate accepts.
const MaxTopLogprobs = 20

// Logit bias key types accepted in Params.LogitBiasType.
const (
	// LogitBiasInputIDs keys LogitBias by token id written in decimal.
	LogitBiasInputIDs = "input_ids"
	// LogitBiasTokens keys LogitBias by token text; the text is tokenized
	// and the bias applies to each of its tokens.
	LogitBiasTokens = "tokens"
)

// Params holds the sampling fields of a generation request. Field names
// mirror the API names (API.md 4.1) given in each comment; the zero value is
// not the API default, use DefaultParams.
type Params struct {
	// Temperature divides the logits before the draw; 0 selects greedy
	// decoding (API temperature, >= 0).
	Temperature float64
	// TopK keeps the K most likely tokens; 0 turns it off (API top_k, >= 0).
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// sums to at least TopP; 1 turns it off (API top_p, in [0, 1]).
	TopP float64
	// MinP drops tokens whose probability is below MinP times that of the
	// most likely token; 0 turns it off (API min_p, in [0, 1]).
	MinP float64
	// TFSZ is the tail-free sampling parameter; 1 turns it off
	// (API tfs_z, in (0, 1]).
	TFSZ float64
	// TypicalP is the locally typical sampling mass; 1 turns it off
	// (API typical_p, in (0, 1]).
	TypicalP float64
	// MinKeep is the least number of tokens top_p, min_p, tfs_z and
	// typical_p keep (API min_keep, >= 0).
	MinKeep int

	// RepeatPenalty divides positive logits and multiplies negative ones of
	// tokens seen in the penalty window; 1 turns it off (API repeat_penalty, > 0).
	RepeatPenalty float64
	// FrequencyPenalty is subtracted once per occurrence in the penalty
	// window (API frequency_penalty).
	FrequencyPenalty float64
	// PresencePenalty is subtracted once from every token present in the
	// penalty window (API presence_penalty).
	PresencePenalty float64
	// PenaltyLastN is the penalty window in tokens: -1 the whole history,
	// 0 off (API penalty_last_n, >= -1).
	PenaltyLastN int

	// MirostatMode selects Mirostat 1 or 2, which replaces top_k, tfs_z,
	// typical_p, top_p and min_p; 0 is off (API mirostat_mode).
	MirostatMode int
	// MirostatTau is the target surprise in bits (API mirostat_tau, >= 0).
	MirostatTau float64
	// MirostatEta is the learning rate of mu (API mirostat_eta, >= 0).
	MirostatEta float64

	// Seed seeds the chain's mt19937 generator with its low 32 bits, as
	// llama.cpp does; RandomSeed (-1, low bits all ones like llama.cpp's
	// LLAMA_DEFAULT_SEED) draws one (API seed).
	Seed int64

	// LogitBias adds a bias to logits. Keys are token ids in decimal
	// (LogitBiasType input_ids) or token text (tokens). A bias of -Inf bans
	// the token (API logit_bias; the API maps false to -Inf).
	LogitBias map[string]float64
	// LogitBiasType says how LogitBias is keyed: LogitBiasInputIDs (also
	// the meaning of "") or LogitBiasTokens (API logit_bias_type).
	LogitBiasType string

	// MinTokens masks the end-of-generation tokens until this many tokens
	// have been accepted (API min_tokens, >= 0).
	MinTokens int

	// Logprobs makes the chain keep the model distribution of each step so
	// Chain.Logprob works (API logprobs).
	Logprobs bool
	// TopLogprobs is the number of alternatives the caller will ask
	// Chain.TopLogprobs for; > 0 also enables Logprob
	// (API top_logprobs, in [0, MaxTopLogprobs]).
	TopLogprobs int
}

// DefaultParams returns the API defaults of API.md 4.1.
func DefaultParams() Params {
	return Params{
		Temperature:      0.8,
		TopK:             40,
		TopP:             0.95,
		MinP:             0.05,
		TFSZ:             1.0,
		TypicalP:         1.0,
		MinKeep:          1,
		RepeatPenalty:    1.0,
		FrequencyPenalty: 0.0,
		PresencePenalty:  0.0,
		PenaltyLastN:     64,
		MirostatMode:     0,
		MirostatTau:      5.0,
		MirostatEta:      0.1,
		Seed:             RandomSeed,
		LogitBiasType:    LogitBiasInputIDs,
		MinTokens:        0,
	}
}

// ParamError reports a sampling parameter that is out of range or malformed.
// Field is the API name of the parameter (for example "top_p"), so the API
// can report it as the error's param.
type ParamError struct {
	Field string
	Msg   string
}

// Error returns "sampling: <field>: <msg>".
func (e *ParamError) Error() string {
	return "sampling: " + e.Field + ": " + e.Msg
}

func paramErr(field, format string, args ...any) *ParamError {
	return &ParamError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Validate checks every field's range and returns a *ParamError naming the
// first field (in declaration order) that is out of range, or nil. It does
// not check logit_bias keys against a vocabulary; NewChain does.
func (p *Params) Validate() error {
	switch {
	case !finite(p.Temperature) || p.Temperature < 0:
		return paramErr("temperature", "%v is out of range, want >= 0", p.Temperature)
	case p.TopK < 0:
		return paramErr("top_k", "%d is out of range, want >= 0 (0 turns it off)", p.TopK)
	case !(p.TopP >= 0 && p.TopP <= 1):
		return paramErr("top_p", "%v is out of range [0, 1]", p.TopP)
	case !(p.MinP >= 0 && p.MinP <= 1):
		return paramErr("min_p", "%v is out of range [0, 1]", p.MinP)
	case !(p.TFSZ > 0 && p.TFSZ <= 1):
		return paramErr("tfs_z", "%v is out of range (0, 1]", p.TFSZ)
	case !(p.TypicalP > 0 && p.TypicalP <= 1):
		return paramErr("typical_p", "%v is out of range (0, 1]", p.TypicalP)
	case p.MinKeep < 0:
		return paramErr("min_keep", "%d is out of range, want >= 0", p.MinKeep)
	case !finite(p.RepeatPenalty) || p.RepeatPenalty <= 0:
		return paramErr("repeat_penalty", "%v is out of range, want > 0 (1 turns it off)", p.RepeatPenalty)
	case !finite(p.FrequencyPenalty):
		return paramErr("frequency_penalty", "%v is not a finite number", p.FrequencyPenalty)
	case !finite(p.PresencePenalty):
		return paramErr("presence_penalty", "%v is not a finite number", p.PresencePenalty)
	case p.PenaltyLastN < -1:
		return paramErr("penalty_last_n", "%d is out of range, want >= -1 (-1 whole context, 0 off)", p.PenaltyLastN)
	case p.MirostatMode < 0 || p.MirostatMode > 2:
		return paramErr("mirostat_mode", "%d is not one of 0, 1, 2", p.MirostatMode)
	case !finite(p.MirostatTau) || p.MirostatTau < 0:
		return paramErr("mirostat_tau", "%v is out of range, want >= 0", p.MirostatTau)
	case !finite(p.MirostatEta) || p.MirostatEta < 0:
		return paramErr("mirostat_eta", "%v is out of range, want >= 0", p.MirostatEta)
	case p.LogitBiasType != "" && p.LogitBiasType != LogitBiasInputIDs && p.LogitBiasType != LogitBiasTokens:
		return paramErr("logit_bias_type", "%q is not one of %q, %q", p.LogitBiasType, LogitBiasInputIDs, LogitBiasTokens)
	case p.MinTokens < 0:
		return paramErr("min_tokens", "%d is out of range, want >= 0", p.MinTokens)
	case p.TopLogprobs < 0 || p.TopLogprobs > MaxTopLogprobs:
		return paramErr("top_logprobs", "%d is out of range [0, %d]", p.TopLogprobs, MaxTopLogprobs)
	}
	for k, v := range p.LogitBias {
		// -Inf bans a token; NaN and +Inf have no meaning.
		if math.IsNaN(v) || math.IsInf(v, 1) {
			return paramErr("logit_bias", "bias %v for %q is not a number or -Inf", v, k)
		}
	}
	return nil
}
