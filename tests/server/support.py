"""Helpers shared by the emulator tests."""

from __future__ import annotations

from typing import Any, TypeVar

_Client = TypeVar("_Client")
_OPEN: list[Any] = []

WEATHER = {
    "match": {"contains": "weather"},
    "reply": {
        "reasoning": {
            "text": "The user wants the weather. Call the tool.",
            "signature": "c2lnLTE=",
        },
        "text": "Let me check.",
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_w1"}],
    },
}
"""A reply with reasoning (and its signature: base64, as Gemini's SDK requires), text
and a tool call."""


def require(*dialects: str) -> None:
    """Every dialect the test needs is present and complete (a failure, never a skip)."""
    from polystream.dialects import get_dialect

    for name in dialects:
        module = get_dialect(name).module()
        assert all(hasattr(module, attr) for attr in ("Decoder", "Encoder", "rebuild")), name


def track(client: _Client) -> _Client:
    """Register an SDK client to be closed after the test (see conftest), so that no
    socket is left for the garbage collector to warn about during a later test."""
    _OPEN.append(client)
    return client


def close_tracked() -> None:
    """Close every SDK client registered by :func:`track`."""
    while _OPEN:
        _OPEN.pop().close()
