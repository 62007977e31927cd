"""The study face: a server-rendered Flask app over the same engines as the CLI.

Pages work without JavaScript (plain links and GET forms). Question pages render the worked
answer of ``scalemodel answer ID``; tool pages and the JSON API drive every registered CLI
command through its own argparse parser, so a command merged later appears here unchanged.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

from flask import Flask, Response, abort, g, render_template, request

from .. import __version__
from ..errors import BadInput, as_bad_input
from .cache import Cache, key_of
from .forms import Field, FieldError, argv_from, command_tree, field_for, fields_of, patch_errors
from .limits import (
    DEFAULT_TIMEOUT_S,
    TimedOut,
    bounded,
    check_bounds,
    check_costs,
    check_strings,
    looks_like_path,
)
from .threads import one_blas_thread
from .view import derivation_view, plot_svg, report_view

STATIC_KEY = "scalemodel.static"  # environ flag set by the static export: the path to the root
DRILL_ROUNDS = 5


class Study:
    """The parsers, command tree and limits one app instance uses."""

    def __init__(self, data_dir: Path | None, timeout_s: float) -> None:
        from ..cli import build_parser

        self.root = build_parser()
        patch_errors(self.root)
        self.tree = command_tree(self.root)
        self.data_dir = data_dir
        self.timeout_s = timeout_s
        self.fields = {path: fields_of(p) for path, (p, _) in self.tree.items()}
        self.results = Cache()  # Reports by validated inputs (see cache.py)
        self.figures = Cache(64)  # their inline SVG, by the same keys
        self._classic: dict[str, Any] = {}

    def prepare(self, path: str, values: dict[str, str], *,
                strict: bool) -> tuple[argparse.Namespace, Any, list[Field]]:
        """Parse ``values`` with the command's parser and bound them: the namespace, its cache
        key (None when its result is not kept) and the command's fields."""
        fields = self.fields[path]
        known = {f.dest for f in fields}
        if strict:
            unknown = sorted(set(values) - known)
            if unknown:
                raise FieldError(f"unknown parameter {unknown[0]!r}; allowed: "
                                 f"{', '.join(sorted(known)) or 'none'}")
        values = {k: v for k, v in values.items() if k in known}
        named_file = any(looks_like_path(v) for v in values.values())
        check_strings(fields, values, self.data_dir)
        argv = path.split("/") + argv_from(fields, values)
        try:
            ns = self.root.parse_args(argv)
        except FieldError as e:
            raise FieldError(str(e), field_for(fields, e.field)) from None
        except SystemExit:
            raise FieldError("these parameters cannot be parsed") from None
        check_bounds(fields, ns)
        check_costs(path, ns, fields)
        ns.json = True  # the web never asks a terminal (drill) and never writes a --plot file
        if hasattr(ns, "plot"):
            ns.plot = None
        return ns, key_of(path, ns, named_file), fields

    def classic_key(self, qid: str) -> Any:
        """The cache key of a question's answer with its classic inputs (None for an id that is
        not in the bank: the table holds at most one entry per question)."""
        from ..questions import BANK

        if qid not in self._classic:
            if all(q.id != qid for q in BANK):
                return None
            self._classic[qid] = self.prepare(answer_path(qid), {}, strict=False)[1]
        return self._classic[qid]

    def run_keyed(self, path: str, values: dict[str, str], *,
                  strict: bool) -> tuple[Any, Any]:
        """Parse and bound ``values``, run the command (or take the kept result): the Report and
        its cache key (None when it is not kept).

        A question's answer with its classic inputs (the question page leaves out the fields
        still at their classic values) has a cost
        fixed by the question, not chosen by the request: it runs without the time limit
        (moe-routing trains four routers: 8-13 s on 2 cores, near the 20 s default on a busy
        machine) and its result is pinned in the cache: computed once, at its first request."""
        ns, key, fields = self.prepare(path, values, strict=strict)
        classic = (path.startswith("answer/") and key is not None
                   and key == self.classic_key(getattr(ns, "id", "")))
        if key is not None:
            hit = self.results.get(key)
            if hit is not None:
                return hit, key
        try:
            rep = bounded(lambda: ns.run(ns), 0 if classic else self.timeout_s)
        except FieldError:
            raise
        except BadInput as e:
            raise FieldError(str(e), _field_in_message(fields, str(e))) from None
        except (UnicodeDecodeError, OSError) as e:  # a user path that cannot be used
            bad = as_bad_input(e)
            if bad is None:
                raise
            raise FieldError(str(bad), "") from None
        if key is not None:
            self.results.put(key, rep, pin=classic)
        return rep, key

    def run(self, path: str, values: dict[str, str], *, strict: bool) -> Any:
        """Parse ``values`` with the command's parser, bound them, run it: a Report."""
        return self.run_keyed(path, values, strict=strict)[0]

    def svg(self, rep: Any, key: Any) -> str | None:
        """The inline figure of a report from ``run_keyed`` (kept under the same key; pinned
        for a classic answer)."""
        pin = key is not None and key[0].startswith("answer/") and key == self.classic_key(
            dict(key[1]).get("id", ""))
        return plot_svg(rep, key, self.figures, pin=pin)


def answer_path(qid: str) -> str:
    """The command path of one question's answer (``answer kv-cache`` -> 'answer/kv-cache')."""
    return f"answer/{qid}"


def _page_run(st: Study, path: str,
              values: dict[str, str]) -> tuple[Any, int, dict[str, str], str | None]:
    """Run a page's command on its form's values: the report's view, the HTTP status, the
    message by field and the page's error line. A bad value is 400 (its message also beside its
    field when it names one), a run past the time limit 503."""
    try:
        rep, key = st.run_keyed(path, values, strict=False)
        return report_view(rep, st.svg(rep, key)), 200, {}, None
    except FieldError as e:
        return None, 400, ({e.field: str(e)} if e.field else {}), str(e)
    except TimedOut as e:
        return None, 503, {}, str(e)


def _field_in_message(fields: list[Field], msg: str) -> str:
    import re

    m = re.match(r"\s*(--[a-z0-9-]+)", msg)
    return field_for(fields, m.group(1)) if m else ""


def _default_text(v: Any) -> str:
    if v is None or isinstance(v, bool):
        return ""
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, list | tuple):
        return ",".join(str(x) for x in v)
    return str(v)


def create_app(data_dir: str | Path | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
               preload: bool = True) -> Flask:
    """The app. ``preload`` imports the answered questions' modules (and with them numpy and
    most engines) now, ~0.3 s of start-up, so the first request of a page pays no imports."""
    one_blas_thread()  # see threads.py: small matrix products, parallel requests
    if preload:
        _preload_questions()
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024
    st = Study(Path(data_dir) if data_dir else None, timeout_s)
    app.extensions["scalemodel"] = st

    @app.before_request
    def _static_mode() -> None:
        g.static_root = request.environ.get(STATIC_KEY)
        if len(request.query_string) > 8192:
            abort(414)

    @app.context_processor
    def _helpers() -> dict[str, Any]:
        def href(path: str) -> str:
            root = g.get("static_root")
            if root is None:
                return path
            if path == "/":
                return root + "index.html"
            if path.startswith("/questions/"):
                return root + "questions/" + path.rsplit("/", 1)[1] + ".html"
            return root + path.lstrip("/")

        return {"href": href, "static_mode": g.get("static_root") is not None,
                "version": __version__}

    @app.after_request
    def _headers(resp: Response) -> Response:
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["X-Frame-Options"] = "DENY"
        resp.headers["Referrer-Policy"] = "no-referrer"
        resp.headers["Content-Security-Policy"] = (
            "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
        return resp

    # --- pages ------------------------------------------------------------------------------------

    @app.get("/")
    def index() -> str:
        from ..questions import BANK

        qs = [q.to_dict() for q in BANK]
        loops = {}
        for lp in ("DeepSeek", "xAI"):
            loops[lp] = [q for q in qs if lp in q["loops"]]
        topics: dict[str, list[dict[str, Any]]] = {}
        for q in qs:
            topics.setdefault(q["capability"], []).append(q)
        done = sum(1 for q in qs if q["status"] == "answered")
        return render_template("index.html", loops=loops, topics=topics, done=done, total=len(qs))

    @app.get("/questions/<qid>")
    def question_page(qid: str) -> tuple[str, int]:
        from ..questions import BANK

        q = next((x for x in BANK if x.id == qid), None)
        if q is None:
            abort(404)
        if q.status != "answered":
            return render_template("question.html", q=q.to_dict(), planned=True, fields=[],
                                   values={}, errors={}, error=None, report=None), 200
        from ..questions import params_of

        mod = importlib.import_module(q.module)
        # the form is the question's declared parameters (the same flags as `answer ID`), each
        # shown at its classic value
        defaults = {p.name: p.default_text() for p in params_of(qid)}
        path = answer_path(qid)
        fields = st.fields[path]
        given = {f.dest: request.args[f.dest] for f in fields if f.dest in request.args
                 and request.args[f.dest].strip() != ""}
        values = {f.dest: given.get(f.dest, defaults.get(f.dest, "")) for f in fields}
        # a field left at its classic value is the classic input: the untouched form then
        # shares the classic answer's cache entry (the question fills in its defaults)
        changed = {k: v for k, v in given.items() if v.strip() != defaults.get(k, "")}
        report, status, errors, error = _page_run(st, path, changed)
        return render_template("question.html", q=q.to_dict(), planned=False, fields=fields,
                               values=values, errors=errors, error=error, report=report,
                               prompt=getattr(mod, "PROMPT", "")), status

    @app.get("/tools")
    def tools() -> str:
        items = [{"path": p, "help": h} for p, (_, h) in st.tree.items()
                 if not p.startswith("answer/")]  # the questions have their own pages
        return render_template("tools.html", items=items)

    @app.get("/tools/<path:cmd>")
    def tool_page(cmd: str) -> tuple[str, int]:
        if cmd not in st.tree:
            abort(404)
        parser, help_ = st.tree[cmd]
        fields = st.fields[cmd]
        given = {f.dest: request.args[f.dest] for f in fields if f.dest in request.args}
        values = {f.dest: given.get(f.dest, _default_text(f.default)) for f in fields}
        report, status, errors, error = None, 200, {}, None
        if "run" in request.args:
            report, status, errors, error = _page_run(st, cmd, given)
        return render_template("tool.html", cmd=cmd, help=help_,
                               description=parser.description or "", fields=fields,
                               values=values, errors=errors, error=error, report=report,
                               api="/api/" + cmd), status

    @app.get("/drill")
    def drill_page() -> tuple[str, int]:
        from ..study.drills import grade, make_drill, topics

        a = request.args
        errors: dict[str, str] = {}
        try:
            topic = a.get("topic") or None
            seed = _int_arg(a.get("seed"), "seed", 0, 2**32 - 1, 1)
            rounds = _int_arg(a.get("rounds"), "rounds", 1, 20, DRILL_ROUNDS)
            rnd = _int_arg(a.get("round"), "round", 1, rounds, 1)
            right = _int_arg(a.get("right"), "right", 0, rounds, 0)
            d = bounded(lambda: make_drill(topic, seed), st.timeout_s)
        except BadInput as e:
            return render_template("drill.html", topics=topics(), drill=None, error=str(e),
                                   errors=errors, graded=None), 400
        ctx: dict[str, Any] = {"topics": topics(), "drill": d, "topic": topic or "",
                               "seed": seed, "rounds": rounds, "round": rnd, "right": right,
                               "graded": None, "error": None, "errors": errors, "typed": ""}
        typed = a.get("answer")
        status = 200
        if typed is not None:
            ctx["typed"] = typed
            try:
                gr = grade(d, typed)
                right_now = right + (1 if gr.correct else 0)
                ctx.update(graded=gr, right_now=right_now,
                           worked=derivation_view(d.derivation, _NoCite()),
                           done=rnd >= rounds)
            except BadInput as e:
                status = 400
                errors["answer"] = str(e)
        return render_template("drill.html", **ctx), status

    # --- JSON API -------------------------------------------------------------------------------

    @app.get("/api/<path:cmd>")
    def api(cmd: str) -> Response:
        from ..report import render_json

        values = {k: request.args[k] for k in request.args}
        if cmd == "answer":  # /api/answer?id=ID&... is /api/answer/ID?...
            from ..questions import question

            try:
                cmd = answer_path(question(values.pop("id", "")).id)
            except BadInput as e:
                return _json_error(str(e), 400, "id")
        if cmd not in st.tree:
            return _json_error(f"unknown command {cmd!r}; see /openapi.json", 404)
        try:
            rep = st.run(cmd, values, strict=True)
        except FieldError as e:
            return _json_error(str(e), 400, e.field)
        except TimedOut as e:
            return _json_error(str(e), 503)
        return Response(render_json(rep) + "\n", mimetype="application/json")

    @app.get("/openapi.json")
    def openapi() -> Response:
        import json

        from .openapi import openapi_document

        return Response(json.dumps(openapi_document(st), indent=1), mimetype="application/json")

    # --- errors ---------------------------------------------------------------------------------

    @app.errorhandler(404)
    def not_found(e: Any) -> tuple[Any, int]:
        if request.path.startswith("/api/"):
            return _json_error("not found", 404), 404
        return render_template("error.html", code=404, message="No such page."), 404

    @app.errorhandler(405)
    def not_allowed(e: Any) -> tuple[Any, int]:
        if request.path.startswith("/api/"):
            return _json_error("method not allowed: the API is read-only (GET)", 405), 405
        return render_template("error.html", code=405, message="Only GET is served."), 405

    @app.errorhandler(414)
    def too_long(e: Any) -> tuple[Any, int]:
        return render_template("error.html", code=414, message="The request is too long."), 414

    @app.errorhandler(500)
    def internal(e: Any) -> tuple[Any, int]:
        if request.path.startswith("/api/"):
            return _json_error("internal error", 500), 500
        return render_template("error.html", code=500, message="Internal error."), 500

    return app


def _preload_questions() -> None:
    from ..questions import BANK

    for q in BANK:
        if q.status == "answered":
            importlib.import_module(q.module)


class _NoCite:
    def __call__(self, src: str) -> None:
        return None


def _int_arg(text: str | None, name: str, lo: int, hi: int, default: int) -> int:
    if text is None or text.strip() == "":
        return default
    try:
        v = int(text)
    except ValueError:
        raise BadInput(f"{name}: expected a whole number, got {text[:40]!r}") from None
    if not lo <= v <= hi:
        raise BadInput(f"{name}: must be between {lo} and {hi}, got {v}")
    return v


def _json_error(message: str, code: int, field: str = "") -> Response:
    import json

    body = {"error": message, **({"field": field} if field else {})}
    return Response(json.dumps(body) + "\n", status=code, mimetype="application/json")
