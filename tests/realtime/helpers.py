"""Reading the WebSocket fixtures (one server message per line, exactly as sent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from polystream.dialects._realtime.session import RealtimeSession, Routed

FIXTURES = Path(__file__).parents[1] / "fixtures"


def messages(family: str, name: str) -> list[str]:
    """The messages of ``tests/fixtures/<family>/<name>.ws``."""
    return (FIXTURES / family / f"{name}.ws").read_text(encoding="utf-8").splitlines()


def payloads(lines: list[str]) -> list[dict[str, Any]]:
    """Each message parsed (fresh objects: a session hands its own over as extras)."""
    return [json.loads(line) for line in lines]


def run(session: RealtimeSession, lines: list[str], *, close: bool = False) -> list[Routed]:
    out: list[Routed] = []
    for line in lines:
        out.extend(session.feed(line))
    if close:
        out.extend(session.close())
    return out


def where(routed: list[Routed]) -> list[tuple[int, str | None, str | None, Any]]:
    """(stream, lane, response id, event) of each."""
    return [(r.stream, r.lane, r.response_id, r.event) for r in routed]
