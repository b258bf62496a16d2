"""Gemini Interactions API, SSE (``POST /v1beta/interactions`` with ``stream: true``).

Both event schemas decode to the same unified events: the current one (``step.*``) and the
legacy one (``content.*``); the encoder writes back whichever the source used. See
``docs/dialects/gemini_interactions.md`` for the event coverage, the finish-reason table,
the usage arithmetic and the known deviations.

Exports ``Decoder``, ``Encoder``, ``rebuild(events) -> dict`` (the final ``Interaction``),
``build_steps(events)`` and ``resume_cursor(events)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .spec import SPEC

if TYPE_CHECKING:
    from .binding import DIALECT, Decoder, Encoder, build_steps, rebuild, resume_cursor

__all__ = ["DIALECT", "SPEC", "Decoder", "Encoder", "build_steps", "rebuild", "resume_cursor"]
_LAZY = frozenset(__all__) - {"SPEC"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import binding

        return getattr(binding, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
