"""What ``xai_messages`` is and where it is served (data only; see
:mod:`polystream.dialects._spec`)."""

from __future__ import annotations

from polystream.dialects._spec import (
    OPENAI_AUTH,
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
    name="xai_messages",
    provider="xai",
    family="messages",
    framings=("sse",),
    description="xAI /v1/messages, deprecated (SSE)",
    routes=(RouteSpec("POST", "/v1/messages"),),
    auth=OPENAI_AUTH,  # (a bearer token, as every xAI endpoint)
    # Its clients are the Anthropic SDK's: Anthropic's error shape, 529 when overloaded.
    errors=ErrorSpec("anthropic", param_field=False, overloaded_status=529, request_id_field=True),
    resume=ResumeSpec("counter", id_lines=True),
    detect=DetectSpec(
        25, names=("message_start",), model_path=("message", "model"), model_prefix="grok"
    ),
    stream=StreamSpec(relays_upstream_keepalive=True),
    reply=ReplySpec("msg_", "toolu_", demo_model="grok-4.3"),
)
