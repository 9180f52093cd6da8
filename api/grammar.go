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
	src, err := grammar.SchemaToGrammarBudget(rawJSON(schema), r.compile)
	if err != nil {
		if cancelled(r.compile) {
			r.fail(errCompileCancelled)
			return ""
		}
		r.fail(badRequest(path, "%s: schema does not compile: %v", path, err))
		return ""
	}
	return src
}

// errCompileCancelled answers a request whose grammar compile was stopped
// because its client left or the server is shutting down.
var errCompileCancelled = errorf(503, "", "the request was cancelled while its grammar compiled (the client left or the server is shutting down)")

func jsonObjectGrammar() string { return grammar.JSONObjectGrammar() }
