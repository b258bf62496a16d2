"""The final ``AgentSession`` rebuilt from unified events.

``GET /v1/agents/sessions/{id}`` (and a non-streaming ``POST /v1/agents/sessions``)
returns the ``AgentSession`` object. Every session-level event of the stream carries
the whole session snapshot; the last one seen is the final object. From another
dialect's events (no snapshot), a session is made of what they say: the id, the model,
the status the Finish implies and the usage.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from polystream.events import Event, Finish, StreamStart, Usage, UsageUpdate

from .encode import _usage

__all__ = ["rebuild"]

_STATUS = {
    "completed": "idle",
    "incomplete": "idle",
    "failed": "failed",
    "truncated": "in_progress",
}


def rebuild(events: Iterable[Event]) -> dict[str, Any]:
    """The session as the API's read returns it after the stream (see the module
    docstring)."""
    snapshot: dict[str, Any] | None = None
    start: StreamStart | None = None
    usage: Usage | None = None
    status = "in_progress"
    for event in events:
        extra = event.extra
        if extra is not None and isinstance(extra.get("session"), dict):
            snapshot = extra["session"]
        if isinstance(event, StreamStart):
            start = event
        elif isinstance(event, UsageUpdate):
            usage = event.usage if usage is None else usage.merged(event.usage)
        elif isinstance(event, Finish):
            status = _STATUS[event.status]
            if event.usage is not None:
                usage = event.usage if usage is None else usage.merged(event.usage)
    if snapshot is not None:
        return snapshot
    session: dict[str, Any] = {
        "id": start.id if start is not None and start.id else "",
        "object": "agent.session",
        "agent": {"model": start.model if start is not None and start.model else ""},
        "created_at": start.created if start is not None and start.created else 0,
        "status": status,
    }
    if usage is not None:
        session["usage"] = _usage(usage)
    return session
