#!/usr/bin/env python3
"""Renders a folder of chat templates with Python's jinja2 in the context
vkllm passed them, and compares with vkllm's own renders.

TestTemplateCollection writes, for every template of VKLLM_TEMPLATES_DIR and
every standard request, vkllm's prompt (<template>.<request>.txt, or .err when
the render failed) and the variables it rendered with
(<template>.<request>.ctx.json) into VKLLM_TEMPLATES_OUT. This script renders
each template with those variables as Hugging Face's transformers does
(a jinja2 sandbox, trim_blocks and lstrip_blocks, loop controls,
{% generation %}, raise_exception, strftime_now), with the reference's
(llama.cpp's) engine where it deliberately differs from jinja2: tojson keeps
non-ASCII and key order with ", " and ": " separators, a member of an
undefined value is undefined (jinja2's ChainableUndefined), map and select
give lists (tojson prints them; jinja2 gives generators), safe marks
nothing (jinja2's Markup would escape what is added to it), lists are
mutable (list.append, which transformers' immutable sandbox refuses) and
{% set x.attr = v %} sets a mapping's member, not only a namespace's. It prints each
difference and exits 1 if there is one.

    VKLLM_TEMPLATES_DIR=$T VKLLM_TEMPLATES_OUT=$O go test -count=1 -run TestTemplateCollection ./api/
    python3 tools/jinja2check/check.py $T $O
"""
import datetime
import glob
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator
from jinja2.ext import Extension
from jinja2.sandbox import SandboxedEnvironment


class Generation(Extension):
    """{% generation %}...{% endgeneration %}, as transformers' AssistantTracker:
    renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


class ReferenceAssign(CodeGenerator):
    """{% set x.attr = v %} on a mapping, as the reference's engine allows
    (jinja2 allows it on a namespace only)."""

    def writeline(self, x, node=None, extra=0):
        if x.startswith("if not isinstance(") and x.endswith(", Namespace):"):
            x = x[:-len("Namespace):")] + "(Namespace, dict)):"
        super().writeline(x, node, extra)


class Environment(SandboxedEnvironment):
    code_generator_class = ReferenceAssign


def listed(x):
    # map/select results are lists in the reference's engine, generators in jinja2
    if isinstance(x, dict):
        return {k: listed(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)) or hasattr(x, "__next__"):
        return [listed(v) for v in x]
    return x


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(listed(x), ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def environment(now):
    env = Environment(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.ChainableUndefined,
                      extensions=["jinja2.ext.loopcontrols", Generation])
    env.filters["tojson"] = tojson
    env.filters["safe"] = lambda x: x  # no escaping anywhere in the reference's engine
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
    return env


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check.py TEMPLATES_DIR OUT_DIR")
    tdir, odir = sys.argv[1], sys.argv[2]
    equal, differ = 0, []
    for path in sorted(glob.glob(os.path.join(tdir, "*.jinja"))):
        name = os.path.basename(path)[:-len(".jinja")]
        src = open(path, encoding="utf-8").read()
        for ctxpath in sorted(glob.glob(os.path.join(odir, glob.escape(name) + ".*.ctx.json"))):
            rq = ctxpath[len(os.path.join(odir, name)) + 1:-len(".ctx.json")]
            ctx = json.load(open(ctxpath, encoding="utf-8"))
            if ctx is None:
                continue
            now = datetime.datetime.strptime(ctx["date_string"], "%d %b %Y")
            try:
                want, werr = environment(now).from_string(src).render(**ctx), None
            except Exception as e:  # a template error, or a Python one inside a filter
                want, werr = None, e
            base = os.path.join(odir, name + "." + rq)
            if os.path.exists(base + ".err"):
                got, gerr = None, open(base + ".err", encoding="utf-8").read()
            else:
                got, gerr = open(base + ".txt", encoding="utf-8").read(), None
            if got is not None and want is not None and got == want:
                equal += 1
            elif got is None and want is None:
                equal += 1  # both refuse
            else:
                differ.append(name + "/" + rq)
                print("== %s/%s" % (name, rq))
                if got is None or want is None:
                    print("   vkllm: %s" % (gerr if got is None else "renders %d bytes" % len(got)))
                    print("   jinja2: %s" % (werr if want is None else "renders %d bytes" % len(want)))
                else:
                    i = first_diff(got, want)
                    print("   first difference at byte %d" % i)
                    print("   vkllm:  %r" % got[max(0, i - 60):i + 60])
                    print("   jinja2: %r" % want[max(0, i - 60):i + 60])
    print("%d renders equal jinja2's, %d differ" % (equal, len(differ)))
    sys.exit(1 if differ else 0)


main()
