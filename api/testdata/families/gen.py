# Generates expected.json: what Python's jinja2 (3.1) renders for each
# family template here and the four standard requests of
# ../shared/fixtures/templates/expected-prompts.json, with the context the
# reference (llama.cpp) passes: enable_thinking always set (true where the
# reference's template analysis finds reasoning, stated per template below),
# tool-call arguments as objects where its capability check asks for them
# (stated below), null content as "", date 23 Nov 2026. Where the
# reference's engine deliberately differs from jinja2 the renderer follows
# the reference: tojson spacing (", ", ": ") and non-ASCII kept. A request
# the template refuses (an error, e.g. string + undefined, which the
# reference's engine raises too) is null.
#
#   python3 gen.py ../../../../shared/fixtures/templates/expected-prompts.json > expected.json
import datetime, json, os, sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

# template: (object arguments, thinking), decided by the reference's rules.
FLAGS = {
    "deliberation": (True, False),   # enable_thinking only changes plain text
    "splitthink": (False, True),     # content.split('</think>')
    "thinkmode": (False, True),      # enable_thinking switches <think> markers
    "declarations": (True, True),    # arguments read member by member
    "dsml": (True, True),
    "controls": (False, False),
}


def gemma4_tool_responses(msgs):
    # The reference's conversion for Gemma 4 templates (the literal
    # '<|tool_call>call:' in the source): an assistant message with tool calls,
    # the tool results after it and a final assistant answer become one
    # assistant message with tool_responses [{name, response}], the response
    # parsed as JSON when it is JSON.
    out, i = [], 0
    while i < len(msgs):
        m = msgs[i]
        if m.get("role") != "assistant" or not m.get("tool_calls"):
            out.append(m)
            i += 1
            continue
        calls, responses = list(m["tool_calls"]), []
        i += 1
        while i < len(msgs) and msgs[i].get("role") == "tool":
            r = msgs[i]
            try:
                response = json.loads(r.get("content"))
            except (TypeError, ValueError):
                response = r.get("content")
            name = calls[len(responses)]["function"]["name"] if len(responses) < len(calls) else ""
            responses.append({"name": name or r.get("tool_call_id", ""), "response": response})
            i += 1
        merged = {"role": "assistant", "tool_calls": calls}
        if responses:
            merged["tool_responses"] = responses
        if i < len(msgs) and msgs[i].get("role") == "assistant" and not msgs[i].get("tool_calls") and msgs[i].get("content"):
            merged["content"] = msgs[i]["content"]
            i += 1
        if m.get("reasoning_content"):
            merged["reasoning_content"] = m["reasoning_content"]
        out.append(merged)
    return out


def tojson(x, indent=None, ensure_ascii=False, **_):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent)


def raise_exception(m):
    raise jinja2.exceptions.TemplateError(m)


def main():
    ep = json.load(open(sys.argv[1]))
    here = os.path.dirname(os.path.abspath(__file__))
    out = {}
    for name, (objargs, thinking) in sorted(FLAGS.items()):
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=["jinja2.ext.loopcontrols"])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = lambda f: datetime.date(2026, 11, 23).strftime(f)
        t = env.from_string(open(os.path.join(here, name + ".jinja")).read())
        res = {"object_arguments": objargs, "thinking": thinking, "prompts": {}}
        for rq, req in sorted(ep["requests"].items()):
            msgs = []
            for m in req["messages"]:
                m = dict(m)
                if m.get("content") is None:
                    m["content"] = ""
                if "tool_calls" in m:
                    calls = []
                    for tc in m["tool_calls"]:
                        fn = dict(tc["function"])
                        if objargs:
                            fn["arguments"] = json.loads(fn["arguments"])
                        calls.append({"id": tc["id"], "type": "function", "function": fn})
                    m["tool_calls"] = calls
                msgs.append(m)
            src = open(os.path.join(here, name + ".jinja")).read()
            if "'<|tool_call>call:'" in src:
                msgs = gemma4_tool_responses(msgs)
            ctx = dict(messages=msgs, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                       enable_thinking=thinking, add_generation_prompt=True,
                       date_string="23 Nov 2026", datetime="Nov 23 2026")
            if "tools" in req:
                ctx["tools"] = req["tools"]
            try:
                res["prompts"][rq] = t.render(**ctx)
            except jinja2.exceptions.TemplateError:
                res["prompts"][rq] = None
        out[name] = res
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


main()
