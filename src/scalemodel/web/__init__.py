"""The local web app (scalemodel serve) and the static export (scalemodel site)."""

from .app import create_app

__all__ = ["create_app"]
