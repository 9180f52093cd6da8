package api

import (
	"encoding/json"
	"strings"
	"unicode"
)

// llama3Builtins are the tools Llama 3.1+ calls in its built-in form,
// <|python_tag|>NAME.call(ARG=VALUE, ...), when a request declares them
// (the reference's common_chat_params_init_llama_3_x: handle_builtin_tool
// takes wolfram_alpha, web_search and brave_search with a query, python
// and code_interpreter with code).
var llama3Builtins = []string{"wolfram_alpha", "web_search", "brave_search", "python", "code_interpreter"}

// parseLlama3Builtin reads a built-in tool call: the text before
// <|python_tag|> is the content, then NAME.call( and its arguments, each
// NAME=JSON, separated by commas, to the closing parenthesis, as the
// reference's common_chat_parse_llama_3_1 (with_builtin_tools) reads it.
// It reads nothing unless the request declares a built-in tool, as the
// reference parses the form only then (COMMON_CHAT_FORMAT_LLAMA_3_X_WITH_BUILTIN_TOOLS).
func parseLlama3Builtin(text string, known []tool) (string, []toolCall, bool) {
	if !declaresBuiltin(known) {
		return "", nil, false
	}
	tag := strings.Index(text, "<|python_tag|>")
	if tag < 0 {
		return "", nil, false
	}
	rest := strings.TrimLeft(text[tag+len("<|python_tag|>"):], " \t\r\n")
	name, rest := leadingWord(rest)
	rest, ok := strings.CutPrefix(strings.TrimLeft(rest, " \t\r\n"), ".")
	if name == "" || !ok {
		return "", nil, false
	}
	rest, ok = strings.CutPrefix(strings.TrimLeft(rest, " \t\r\n"), "call(")
	if !ok {
		return "", nil, false
	}
	args, rest, ok := builtinArgs(rest)
	if !ok || strings.TrimSpace(rest) != "" {
		return "", nil, false
	}
	c, ok := newCall(name, args)
	if !ok {
		return "", nil, false
	}
	return strings.TrimSpace(text[:tag]), []toolCall{c}, true
}

// declaresBuiltin reports whether tools hold one of llama3Builtins.
func declaresBuiltin(tools []tool) bool {
	for _, t := range tools {
		for _, b := range llama3Builtins {
			if t.name == b {
				return true
			}
		}
	}
	return false
}

// leadingWord splits s after its leading run of word characters.
func leadingWord(s string) (string, string) {
	n := strings.IndexFunc(s, func(r rune) bool { return r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if n < 0 {
		n = len(s)
	}
	return s[:n], s[n:]
}

// builtinArgs reads NAME=JSON, ... up to and with the closing parenthesis
// from s, returning the arguments as a JSON object and what follows.
func builtinArgs(s string) (string, string, bool) {
	var keys []string
	var vals []json.RawMessage
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		key, after := leadingWord(s)
		if key == "" {
			break
		}
		after, ok := strings.CutPrefix(strings.TrimLeft(after, " \t\r\n"), "=")
		if !ok {
			return "", "", false
		}
		dec := json.NewDecoder(strings.NewReader(after))
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return "", "", false
		}
		keys, vals = append(keys, key), append(vals, v)
		s = strings.TrimLeft(after[dec.InputOffset():], " \t\r\n")
		if s, ok = strings.CutPrefix(s, ","); !ok {
			break
		}
	}
	s, ok := strings.CutPrefix(strings.TrimLeft(s, " \t\r\n"), ")")
	return objectJSON(keys, vals), s, ok
}
