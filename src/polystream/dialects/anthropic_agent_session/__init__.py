"""Anthropic Managed Agents session event stream, SSE
(``GET /v1/sessions/{id}/events/stream``).

One turn of a session: its lifecycle as status updates, the agent's messages, thinking and
tool uses as blocks, spans and other facts as metadata, the session going idle (or
terminated) as the Finish. See ``docs/dialects/anthropic_agent_session.md`` for the event
coverage, the finish-reason table, the usage arithmetic and what is inferred.

Exports ``Decoder``, ``Encoder``, ``rebuild(events) -> dict`` (the list endpoint's page
of session events) and ``request`` (the session events body codec).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec import SPEC

if TYPE_CHECKING:
    from .binding import DIALECT, Decoder, Encoder, rebuild, request

__all__ = ["DIALECT", "SPEC", "Decoder", "Encoder", "rebuild", "request"]
_LAZY = frozenset(__all__) - {"SPEC"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import binding

        return getattr(binding, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
