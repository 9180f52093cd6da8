package sampling

import (
	"errors"
	"math"
	"testing"
)

func TestDefaultParams(t *testing.T) {
	// The defaults of API.md 4.1, written out independently.
	want := Params{
		Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, TFSZ: 1, TypicalP: 1, MinKeep: 1,
		RepeatPenalty: 1, FrequencyPenalty: 0, PresencePenalty: 0, PenaltyLastN: 64,
		MirostatMode: 0, MirostatTau: 5, MirostatEta: 0.1, Seed: -1,
		LogitBiasType: "input_ids", MinTokens: 0, Logprobs: false, TopLogprobs: 0,
	}
	got := DefaultParams()
	if got.LogitBias != nil {
		t.Errorf("DefaultParams().LogitBias = %v, want nil", got.LogitBias)
	}
	got.LogitBias = nil
	if got.Temperature != want.Temperature || got.TopK != want.TopK || got.TopP != want.TopP ||
		got.MinP != want.MinP || got.TFSZ != want.TFSZ || got.TypicalP != want.TypicalP ||
		got.MinKeep != want.MinKeep || got.RepeatPenalty != want.RepeatPenalty ||
		got.FrequencyPenalty != want.FrequencyPenalty || got.PresencePenalty != want.PresencePenalty ||
		got.PenaltyLastN != want.PenaltyLastN || got.MirostatMode != want.MirostatMode ||
		got.MirostatTau != want.MirostatTau || got.MirostatEta != want.MirostatEta ||
		got.Seed != want.Seed || got.LogitBiasType != want.LogitBiasType || got.MinTokens != want.MinTokens ||
		got.Logprobs != want.Logprobs || got.TopLogprobs != want.TopLogprobs {
		t.Errorf("DefaultParams() = %+v, want %+v", got, want)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("DefaultParams().Validate() = %v, want nil", err)
	}
}

func TestValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name  string
		edit  func(p *Params)
		field string // "" means valid
	}{
		{"defaults", func(p *Params) {}, ""},
		{"greedy", func(p *Params) { p.Temperature = 0 }, ""},
		{"temperature negative", func(p *Params) { p.Temperature = -0.1 }, "temperature"},
		{"temperature NaN", func(p *Params) { p.Temperature = nan }, "temperature"},
		{"temperature Inf", func(p *Params) { p.Temperature = inf }, "temperature"},
		{"top_k off", func(p *Params) { p.TopK = 0 }, ""},
		{"top_k negative", func(p *Params) { p.TopK = -1 }, "top_k"},
		{"top_p 0", func(p *Params) { p.TopP = 0 }, ""},
		{"top_p 1", func(p *Params) { p.TopP = 1 }, ""},
		{"top_p above 1", func(p *Params) { p.TopP = 1.01 }, "top_p"},
		{"top_p negative", func(p *Params) { p.TopP = -0.01 }, "top_p"},
		{"top_p NaN", func(p *Params) { p.TopP = nan }, "top_p"},
		{"min_p 0", func(p *Params) { p.MinP = 0 }, ""},
		{"min_p above 1", func(p *Params) { p.MinP = 2 }, "min_p"},
		{"min_p negative", func(p *Params) { p.MinP = -1 }, "min_p"},
		{"tfs_z 0", func(p *Params) { p.TFSZ = 0 }, "tfs_z"},
		{"tfs_z above 1", func(p *Params) { p.TFSZ = 1.5 }, "tfs_z"},
		{"tfs_z 0.5", func(p *Params) { p.TFSZ = 0.5 }, ""},
		{"typical_p 0", func(p *Params) { p.TypicalP = 0 }, "typical_p"},
		{"typical_p above 1", func(p *Params) { p.TypicalP = 1.0001 }, "typical_p"},
		{"typical_p 0.2", func(p *Params) { p.TypicalP = 0.2 }, ""},
		{"min_keep 0", func(p *Params) { p.MinKeep = 0 }, ""},
		{"min_keep negative", func(p *Params) { p.MinKeep = -1 }, "min_keep"},
		{"repeat_penalty 0", func(p *Params) { p.RepeatPenalty = 0 }, "repeat_penalty"},
		{"repeat_penalty NaN", func(p *Params) { p.RepeatPenalty = nan }, "repeat_penalty"},
		{"repeat_penalty below 1", func(p *Params) { p.RepeatPenalty = 0.5 }, ""},
		{"frequency_penalty negative", func(p *Params) { p.FrequencyPenalty = -2 }, ""},
		{"frequency_penalty Inf", func(p *Params) { p.FrequencyPenalty = inf }, "frequency_penalty"},
		{"presence_penalty NaN", func(p *Params) { p.PresencePenalty = nan }, "presence_penalty"},
		{"penalty_last_n -1", func(p *Params) { p.PenaltyLastN = -1 }, ""},
		{"penalty_last_n -2", func(p *Params) { p.PenaltyLastN = -2 }, "penalty_last_n"},
		{"mirostat 2", func(p *Params) { p.MirostatMode = 2 }, ""},
		{"mirostat 3", func(p *Params) { p.MirostatMode = 3 }, "mirostat_mode"},
		{"mirostat -1", func(p *Params) { p.MirostatMode = -1 }, "mirostat_mode"},
		{"mirostat_tau negative", func(p *Params) { p.MirostatTau = -1 }, "mirostat_tau"},
		{"mirostat_eta NaN", func(p *Params) { p.MirostatEta = nan }, "mirostat_eta"},
		{"logit_bias_type tokens", func(p *Params) { p.LogitBiasType = "tokens" }, ""},
		{"logit_bias_type empty", func(p *Params) { p.LogitBiasType = "" }, ""},
		{"logit_bias_type bad", func(p *Params) { p.LogitBiasType = "ids" }, "logit_bias_type"},
		{"logit_bias -Inf bans", func(p *Params) { p.LogitBias = map[string]float64{"3": math.Inf(-1)} }, ""},
		{"logit_bias NaN", func(p *Params) { p.LogitBias = map[string]float64{"3": nan} }, "logit_bias"},
		{"logit_bias +Inf", func(p *Params) { p.LogitBias = map[string]float64{"3": inf} }, "logit_bias"},
		{"min_tokens negative", func(p *Params) { p.MinTokens = -1 }, "min_tokens"},
		{"top_logprobs 20", func(p *Params) { p.TopLogprobs = 20 }, ""},
		{"top_logprobs 21", func(p *Params) { p.TopLogprobs = 21 }, "top_logprobs"},
		{"top_logprobs negative", func(p *Params) { p.TopLogprobs = -1 }, "top_logprobs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultParams()
			tt.edit(&p)
			err := p.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var pe *ParamError
			if !errors.As(err, &pe) {
				t.Fatalf("Validate() = %v, want *ParamError for %s", err, tt.field)
			}
			if pe.Field != tt.field {
				t.Errorf("Validate().Field = %q, want %q (error %v)", pe.Field, tt.field, err)
			}
			// NewChain refuses the same parameters with the same error field.
			_, err = NewChain(p, Vocab{Size: 8}, nil)
			if !errors.As(err, &pe) || pe.Field != tt.field {
				t.Errorf("NewChain() error = %v, want field %s", err, tt.field)
			}
		})
	}
}
