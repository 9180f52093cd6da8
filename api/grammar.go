package api

import (
	"github.com/vkllm/vkllm/sampling/grammar"
)

// schemaGrammar converts the JSON Schema at path to GBNF; a schema the
// converter refuses is a 400 naming path.
func schemaGrammar(r *reader, path string, schema jsonValue) string {
	if schema.isBool() {
		if schema[0] == 'f' {
			r.fail(badRequest(path, "%s: schema false accepts nothing", path))
			return ""
		}
		return jsonObjectGrammar()
	}
	src, err := grammar.SchemaToGrammar(rawJSON(schema))
	if err != nil {
		r.fail(badRequest(path, "%s: schema does not compile: %v", path, err))
		return ""
	}
	return src
}

func jsonObjectGrammar() string { return grammar.JSONObjectGrammar() }
