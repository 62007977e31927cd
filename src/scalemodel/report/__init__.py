"""The only room that prints: terminal text, Markdown, JSON and plots of Report objects.

Renderers know the result *types* (Report, Section, Derivation, Table) and nothing of the
engines that produced them.
"""

from .render import render_json, render_markdown, render_text, to_jsonable

__all__ = ["render_json", "render_markdown", "render_text", "to_jsonable"]
