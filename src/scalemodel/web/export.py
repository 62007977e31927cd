"""The static export: the app's own pages, rendered once with relative links."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import BadInput
from .app import STATIC_KEY, create_app


def export_site(out: str | Path) -> list[dict[str, Any]]:
    """Write index.html, questions/<id>.html (answered and planned) and static/style.css."""
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise BadInput(f"--out: {str(root)!r} exists and is not a folder")
    from ..questions import BANK

    app = create_app()
    client = app.test_client()
    (root / "questions").mkdir(parents=True, exist_ok=True)
    (root / "static").mkdir(exist_ok=True)
    pages: list[dict[str, Any]] = []

    def save(url: str, rel: str, depth_root: str) -> None:
        r = client.get(url, environ_overrides={STATIC_KEY: depth_root})
        if r.status_code != 200:
            raise RuntimeError(f"export: {url} answered {r.status_code}")
        (root / rel).write_bytes(r.data)
        pages.append({"path": rel, "url": url, "status": r.status_code})

    save("/", "index.html", "")
    for q in BANK:
        save(f"/questions/{q.id}", f"questions/{q.id}.html", "../")
    css = Path(__file__).with_name("static") / "style.css"
    (root / "static" / "style.css").write_bytes(css.read_bytes())
    pages.append({"path": "static/style.css", "url": "/static/style.css", "status": 200})
    return pages
