package api

import (
	"slices"
	"strings"
)

// Fields the official SDKs send that do not change a local model's output
// (issue 32 item 2). They are accepted on /v1/chat/completions and
// /v1/responses alike, type-checked so a typo still reads as one, and
// otherwise ignored; any other unknown field stays a 400 naming it.

// outputNeutralFields are the request fields both routes accept and
// ignore. user, store, metadata, service_tier, prompt_cache_key and
// safety_identifier are bookkeeping of OpenAI's platform; modalities,
// verbosity and prediction tune a hosted model's answer and have no
// meaning for a local one.
var outputNeutralFields = []string{
	"user", "store", "metadata", "service_tier", "prompt_cache_key", "safety_identifier",
	"modalities", "verbosity", "prediction",
}

// reasoningEfforts are the values OpenAI defines for reasoning_effort
// and reasoning.effort.
var reasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// verbosities are the values of verbosity and text.verbosity.
var verbosities = []string{"low", "medium", "high"}

// readOutputNeutral type-checks the outputNeutralFields m holds (null is
// taken for each) and returns the metadata pairs, which Responses echoes.
func (r *reader) readOutputNeutral(m jsonObject) map[string]any {
	md := map[string]any{}
	for _, k := range []string{"user", "service_tier", "prompt_cache_key", "safety_identifier"} {
		r.optStr(m, "", k)
	}
	r.boolean(m, "", "store", false)
	if v, ok := m["metadata"]; ok && v != nil {
		if !v.isObject() {
			r.typeErr("metadata", "object of strings", v)
		} else {
			n := 0
			v.members(func(k string, x jsonValue) bool {
				if n++; n > maxMetadataKeys {
					r.fail(badRequest("metadata", "metadata: more than %d keys, at most %d allowed", maxMetadataKeys, maxMetadataKeys))
					return false
				}
				if !x.isString() {
					r.typeErr("metadata."+k, "string", x)
					return false
				}
				md[k] = x.str()
				return true
			})
		}
	}
	if a, ok := r.array(m, "", "modalities"); ok {
		r.each(a, "modalities", 8, func(i int, x jsonValue) {
			p := indexPath("modalities", i)
			switch {
			case !x.isString():
				r.typeErr(p, "string", x)
			case x.str() == "text":
			case x.str() == "audio":
				r.fail(badRequest(p, "%s: audio output is not supported; ask for [\"text\"]", p))
			default:
				r.fail(badRequest(p, "%s: %q is not one of \"text\", \"audio\"", p, x.str()))
			}
		})
	}
	if v, ok := r.optStr(m, "", "verbosity"); ok && !slices.Contains(verbosities, v) && r.err == nil {
		r.fail(badRequest("verbosity", "verbosity: %q is not one of %s", v, quoteList(verbosities)))
	}
	if v, ok := m["prediction"]; ok && v != nil {
		// Predicted outputs only speed up a hosted model; the answer is
		// the same without them.
		if pm := r.object(v, "prediction", "type", "content"); pm != nil {
			if t := r.str(pm, "prediction", "type", "content"); t != "content" && r.err == nil {
				r.fail(badRequest("prediction.type", "prediction.type: %q, want \"content\"", t))
			}
			if c, ok := pm["content"]; ok && c != nil && !c.isString() && !c.isArray() {
				r.typeErr("prediction.content", "string or array of text parts", c)
			}
		}
	}
	return md
}

// readReasoningEffort reads reasoning_effort (chat) or reasoning.effort
// (Responses, where reasoning may be null): "" when not given.
func (r *reader) readReasoningEffort(m jsonObject, responses bool) string {
	if !responses {
		return r.effort(m, "", "reasoning_effort")
	}
	v, ok := m["reasoning"]
	if !ok || v == nil {
		return ""
	}
	rm := r.object(v, "reasoning", "effort", "summary", "generate_summary")
	if rm == nil {
		return ""
	}
	for _, k := range []string{"summary", "generate_summary"} {
		if s, ok := r.optStr(rm, "reasoning", k); ok && s != "auto" && s != "concise" && s != "detailed" && r.err == nil {
			r.fail(badRequest("reasoning."+k, "reasoning.%s: %q is not one of \"auto\", \"concise\", \"detailed\"", k, s))
		}
	}
	return r.effort(rm, "reasoning", "effort")
}

// effort reads a reasoning effort, one of reasoningEfforts.
func (r *reader) effort(m jsonObject, path, key string) string {
	e, ok := r.optStr(m, path, key)
	if p := joinPath(path, key); ok && !slices.Contains(reasoningEfforts, e) && r.err == nil {
		r.fail(badRequest(p, "%s: %q is not one of %s", p, e, quoteList(reasoningEfforts)))
	}
	return e
}

// quoteList returns vals quoted and joined by commas.
func quoteList(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = `"` + v + `"`
	}
	return strings.Join(q, ", ")
}

// assistantOnlyFields are the message fields the SDKs return on an
// assistant message and send back with it (Python's model_dump, Node's
// parse): ignored there, a 400 on any other role.
var assistantOnlyFields = []string{"annotations", "audio", "parsed"}

// checkAssistantOnly checks the assistantOnlyFields of message m at path:
// annotations an array, audio an object (both may be null), parsed
// anything.
func (r *reader) checkAssistantOnly(m jsonObject, path, role string) {
	for _, k := range assistantOnlyFields {
		v, ok := m[k]
		if !ok {
			continue
		}
		p := path + "." + k
		switch {
		case role != "assistant":
			r.fail(badRequest(p, "%s: only assistant messages carry %s (the SDKs return it on the model's answer)", p, k))
		case k == "annotations" && v != nil && !v.isArray():
			r.typeErr(p, "array or null", v)
		case k == "audio" && v != nil && !v.isObject():
			r.typeErr(p, "object or null", v)
		}
	}
}

// cacheControl checks a content part's cache_control (Anthropic's prompt
// caching hint, which some clients put on OpenAI parts): an object or
// null, ignored, since the prompt cache here needs no hint.
func (r *reader) cacheControl(pm jsonObject, path string) {
	if v, ok := pm["cache_control"]; ok && v != nil && !v.isObject() {
		r.typeErr(path+".cache_control", "object or null", v)
	}
}
