"""scalemodel serve: the local study web app (server-rendered; works without JavaScript).

It runs on waitress, a production WSGI server: pure Python (nothing to compile, installs
anywhere the app does), threaded (``--threads`` requests at once, so a light page is not stuck
behind a 20 s computation), and it buffers requests and responses itself. gunicorn was the
other candidate; it forks worker processes (each would hold its own copy of the engines and the
result cache) and does not run on Windows. Each computation runs under the ``--timeout``
wall-clock limit in whichever thread serves it (``scalemodel.web.limits.time_limit``).
"""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_output, at_most, positive_float, positive_int

_port = at_most(positive_int, 65535, "the largest TCP port")
_seconds = at_most(positive_float, 600, "ten minutes per request")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "serve", help="the study web app: questions, tools, drills, JSON API (local)",
        description="Serves the 24 questions with live inputs and plots, a page per command, "
        "drills and a JSON API (/api/COMMAND, /openapi.json) on http://HOST:PORT/. Binds to "
        "127.0.0.1 unless --host says otherwise, on the waitress WSGI server with --threads "
        "requests at a time. Needs the 'web' extra (Flask, waitress).")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port (default 8000)")
    p.add_argument("--data-dir", metavar="DIR", default=None,
                   help="allow --model/--gpu files under DIR (default: no user files)")
    p.add_argument("--timeout", type=_seconds, default=20.0,
                   help="wall-clock limit per computation in seconds (default 20)")
    p.add_argument("--threads", dest="server_threads", type=positive_int, default=8,
                   help="requests served at once, one thread each (default 8)")
    add_output(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> Any:
    import sys
    from pathlib import Path

    from ..errors import BadInput
    from ..views.study import served_report

    try:
        import waitress

        from ..web import create_app
    except ImportError:  # pragma: no cover - depends on the environment
        raise BadInput("serve needs Flask and waitress: pip install 'scalemodel[web]'") from None
    if args.data_dir and not Path(args.data_dir).is_dir():
        raise BadInput(f"--data-dir: no such directory {args.data_dir!r}")
    app = create_app(data_dir=args.data_dir, timeout_s=args.timeout)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        sys.stderr.write(f"warning: serving on {args.host}: anyone who can reach this address "
                         "can use the app\n")
    try:
        server = waitress.create_server(app, host=args.host, port=args.port,
                                        threads=args.server_threads, ident="scalemodel")
    except OSError as e:
        raise BadInput(f"--port {args.port}: cannot listen on {args.host} ({e.strerror or e})") from None
    sys.stderr.write(f"scalemodel study app on http://{args.host}:{args.port}/ "
                     f"({args.server_threads} threads; Ctrl-C stops)\n")
    sys.stderr.flush()
    try:
        server.run()
    except KeyboardInterrupt:  # pragma: no cover - interactive
        pass
    finally:
        server.close()
    return served_report(args.host, args.port)
