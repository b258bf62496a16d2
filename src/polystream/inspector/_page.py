"""The inspector's page: its data, and the HTML that holds the data, scripts and styles.

The page is one HTML file with nothing to fetch: the styles, the script modules (as
``data:`` URLs in an import map, so that they import one another by name: no build step)
and the data are inlined. The assets are this package's ``static`` files, read as package
data.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from importlib import resources
from typing import Any, Final

import msgspec

from polystream.dialects import DIALECTS

__all__ = ["FORMAT", "MODULES", "page_data", "render_page"]

FORMAT: Final = "polystream-inspect"
"""The page data's ``format`` (with ``version``, what a reader of the data checks)."""

VERSION: Final = 1

MODULES: Final = ("app.js", "view.js", "capture.js", "diff.js", "server.js")
"""The script modules, imported by one another as ``ps/<name>``; ``app.js`` starts."""

_TEMPLATE: Final = "index.html"
_STYLE: Final = "inspect.css"


def page_data(
    captures: Sequence[dict[str, Any]],
    *,
    server: dict[str, Any] | None = None,
    title: str = "polystream inspector",
) -> dict[str, Any]:
    """The data a page shows: the captures (:func:`~polystream.inspector.build_capture`),
    the dialects a transcoding preview can target and, for a page a server serves,
    where its endpoints are (``server``: ``decode``, ``streams``, ``auth``)."""
    from polystream import __version__

    return {
        "format": FORMAT,
        "version": VERSION,
        "polystream": __version__,
        "title": title,
        "targets": list(DIALECTS),
        "captures": list(captures),
        "server": server,
    }


def render_page(data: dict[str, Any]) -> str:
    """The self-contained HTML page for ``data`` (:func:`page_data`)."""
    template = _asset(_TEMPLATE)
    imports = {
        f"ps/{name}": "data:text/javascript;base64,"
        + base64.b64encode(_asset(name).encode("utf-8")).decode("ascii")
        for name in MODULES
    }
    importmap = _script_json({"imports": imports})
    return (
        template.replace("/*PS:STYLE*/", _asset(_STYLE))
        .replace("<!--PS:TITLE-->", _escape(str(data.get("title", ""))))
        .replace("<!--PS:IMPORTMAP-->", importmap)
        .replace("<!--PS:DATA-->", _script_json(data))
    )


def _asset(name: str) -> str:
    """One of the static files (package data)."""
    return (
        resources.files("polystream.inspector").joinpath("static", name).read_text(encoding="utf-8")
    )


def _script_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``<`` (so no ``</script>``, no
    ``<!--``) outside a JSON string, and those inside escaped."""
    return msgspec.json.encode(value).decode("utf-8").replace("<", "\\u003c")


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
