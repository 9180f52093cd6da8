package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// chatPrompt picks the request's chat template (the server's default
// unless the request names one) and renders the conversation into the
// prompt text the model reads. A template that raises is a 400 with its
// message.
func (s *Server) chatPrompt(req *chatRequest) (string, *chatTemplate, *Error) {
	t := s.defTmpl
	if req.template != "" && req.template != t.name {
		var err error
		t, err = newChatTemplate(req.template, s.info.ChatTemplate)
		if err != nil {
			return "", nil, badRequest("template", "template: %v", err)
		}
	}
	text, e := t.renderRequest(req, s.info.BOSText, s.info.EOSText, s.cfg.Now(), 4*s.cfg.MaxRequestBytes+1<<20, s.cfg.NoThinking)
	return text, t, e
}

// renderRequest renders a decoded chat request with t, as the reference
// does: tools only when tool_choice is not "none", the request's
// chat_template_kwargs over the other variables. maxOutput bounds the
// text.
func (t *chatTemplate) renderRequest(req *chatRequest, bos, eos string, now time.Time, maxOutput int, noThinking bool) (string, *Error) {
	in := renderInput{messages: req.messages, kwargs: req.kwargs, reasoningEffort: req.reasoningEffort,
		bos: bos, eos: eos, now: now, maxOutput: maxOutput, noThinking: noThinking}
	if len(req.tools) > 0 && req.toolChoice != toolChoiceNone {
		in.tools, in.toolsValue = req.tools, req.toolsValue
	}
	text, err := t.render(in)
	if err != nil {
		var te *templateError
		if errors.As(err, &te) && !te.raised && req.kwargs != nil {
			return "", badRequest("chat_template_kwargs", "messages: %v (with the request's chat_template_kwargs)", err)
		}
		return "", badRequest("messages", "messages: %v", err)
	}
	return text, nil
}

// applyTemplateBody is the answer of POST /apply-template.
type applyTemplateBody struct {
	Prompt string `json:"prompt"`
}

// handleApplyTemplate serves POST /apply-template (the reference's route):
// a chat request in, {"prompt": "..."} out, the exact text the model would
// read for it, without generating.
func (s *Server) handleApplyTemplate(ctx *fasthttp.RequestCtx) handlerResult {
	vb, stop := s.validationBudget(ctx)
	defer stop()
	req, e := decodeChat(vb, ctx.PostBody())
	if e != nil {
		s.writeError(ctx, e)
		return handlerResult{}
	}
	text, _, e := s.chatPrompt(req)
	if e != nil {
		s.writeError(ctx, e)
		return handlerResult{}
	}
	if req.marker != "" {
		// Images show as the reference's default media marker.
		text = strings.ReplaceAll(text, req.marker, mediaMarkerText)
	}
	// The prompt is written as it is: no \u003c escapes of its markup.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(applyTemplateBody{Prompt: text}); err != nil {
		panic("BUG: prompt does not marshal: " + err.Error())
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return handlerResult{}
}
