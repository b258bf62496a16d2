"""``gemini_interactions``'s code: ``Decoder``, ``Encoder``, ``rebuild`` and the resume
helpers (see the package docstring)."""

from __future__ import annotations

from collections.abc import Iterable

from polystream.events import Event

from .decode import DIALECT, Decoder
from .encode import Encoder
from .request import INTERACTIONS as request
from .result import build_steps, rebuild

__all__ = ["DIALECT", "Decoder", "Encoder", "build_steps", "rebuild", "request", "resume_cursor"]


def resume_cursor(events: Iterable[Event]) -> str | None:
    """The ``event_id`` to resume the stream after: the last cursor seen.

    Pass it as ``last_event_id`` to ``GET /v1beta/interactions/{id}?stream=true`` (spec
    section 6, "Resume a stream"); the server then sends the events *after* that one.

    Args:
        events: The unified events received so far (from this dialect's decoder; every
            event carries the ``event_id`` of the native event it came from as ``cursor``).

    Returns:
        The last ``event_id``, or None when no event carried one.

    A live decoder knows better: :attr:`Decoder.last_cursor` also counts native events
    that produced no unified event yet (a ``step.start`` whose BlockStart waits for its
    first delta); resuming from an older cursor replays that event.
    """
    last: str | None = None
    for event in events:
        cursor = event.cursor
        if cursor is not None:
            last = str(cursor)
    return last
