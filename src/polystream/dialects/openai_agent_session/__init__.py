"""OpenAI Agents API session events, SSE (``POST /v1/agents/sessions`` with
``stream: true``, ``GET /v1/agents/sessions/{id}/events``).

See ``docs/dialects/openai_agent_session.md`` for the event coverage, the finish-reason
table, the usage arithmetic and what is inferred.

Exports ``Decoder``, ``Encoder``, ``rebuild(events) -> dict`` (the final ``AgentSession``)
and, in ``binding``, ``request`` (the session-create body codec).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec import SPEC

if TYPE_CHECKING:
    from .binding import DIALECT, Decoder, Encoder, rebuild

__all__ = ["DIALECT", "SPEC", "Decoder", "Encoder", "rebuild"]
_LAZY = frozenset(__all__) - {"SPEC"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import binding

        return getattr(binding, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
