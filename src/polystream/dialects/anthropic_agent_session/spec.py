"""What ``anthropic_agent_session`` is and where it is served (data only; see
:mod:`polystream.dialects._spec`)."""

from __future__ import annotations

from polystream.dialects._spec import (
    AuthSpec,
    DetectSpec,
    DialectSpec,
    ErrorSpec,
    ReplySpec,
    ResumeSpec,
    RouteSpec,
    StreamSpec,
)

__all__ = ["SPEC"]

SPEC = DialectSpec(
    name="anthropic_agent_session",
    provider="anthropic",
    family="agent_session",
    framings=("sse",),
    description="Anthropic Managed Agents session event stream (SSE)",
    routes=(
        RouteSpec("GET", "/v1/sessions/{id}/events/stream", "subscribe", stream=True),
        RouteSpec("POST", "/v1/sessions/{id}/events", "send", stream=False),
    ),
    auth=AuthSpec(
        "x-api-key",
        accepts=("x-api-key", "bearer"),
        extra={"anthropic-version": "2023-06-01", "anthropic-beta": "managed-agents-2026-04-01"},
    ),
    errors=ErrorSpec("anthropic", param_field=False, overloaded_status=529, request_id_field=True),
    resume=ResumeSpec("counter", id_lines=True),
    # Tried late (order 90): a dialect with a narrower rule for a name under these
    # prefixes (``agent.session.*``, a realtime ``session.*``) is tried first.
    detect=DetectSpec(
        90,
        names=("event_start", "event_delta", "system.message"),
        prefixes=("session.", "agent.", "span.", "user."),
    ),
    stream=StreamSpec(relays_upstream_keepalive=True),
    reply=ReplySpec("sevt_", "sevt_", demo_model="claude-sonnet-5-5"),
)
