"""The stream inspector's data: what a capture decodes to, for a page to show.

:func:`build_capture` turns one capture (wire bytes of any dialect, or timed chunks)
into plain JSON values; :func:`page_data` gathers captures for a page, and
:func:`render_page` writes the self-contained HTML page (its scripts and styles inlined
from this package's ``static`` folder). The command line (``polystream inspect``) and
the servers (``/inspect`` on ``polystream serve`` and ``polystream gateway``) are the
shells around it. See docs/inspect.md.
"""

from __future__ import annotations

from polystream.inspector._model import PREVIEW_CHARS, TimedChunk, build_capture
from polystream.inspector._page import page_data, render_page

__all__ = ["PREVIEW_CHARS", "TimedChunk", "build_capture", "page_data", "render_page"]
