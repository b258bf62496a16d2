"""What ``anthropic_messages`` is and where it is served (data only; see
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
    name="anthropic_messages",
    provider="anthropic",
    family="messages",
    framings=("sse",),
    description="Anthropic Messages (SSE)",
    routes=(RouteSpec("POST", "/v1/messages"),),
    auth=AuthSpec(
        "x-api-key",
        accepts=("x-api-key", "bearer"),
        extra={"anthropic-version": "2023-06-01"},
    ),
    errors=ErrorSpec("anthropic", param_field=False, overloaded_status=529, request_id_field=True),
    resume=ResumeSpec("counter", id_lines=True),
    detect=DetectSpec(30, names=("message_start",), model_path=("message", "model")),
    stream=StreamSpec(relays_upstream_keepalive=True),
    reply=ReplySpec("msg_", "toolu_", demo_model="claude-sonnet-5-5"),
)
