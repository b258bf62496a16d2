"""Gemini Interactions API, SSE (``POST /v1beta/interactions`` with ``stream: true``).

Both event schemas decode to the same unified events: the current one (``step.*``) and the
legacy one (``content.*``); the encoder writes back whichever the source used. See
``docs/dialects/gemini_interactions.md`` for the event coverage, the finish-reason table,
the usage arithmetic and the known deviations.

Exports ``Decoder``, ``Encoder``, ``rebuild(events) -> dict`` (the final ``Interaction``),
``build_steps(events)`` and ``resume_cursor(events)``.
"""

from __future__ import annotations

from collections.abc import Iterable

from polystream.events import Event

from .decode import DIALECT, Decoder
from .encode import Encoder
from .result import build_steps, rebuild

__all__ = ["DIALECT", "Decoder", "Encoder", "build_steps", "rebuild", "resume_cursor"]


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
