"""What ``xai_chat`` is and where it is served (data only; see
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
)

__all__ = ["SPEC"]

SPEC = DialectSpec(
    name="xai_chat",
    provider="xai",
    family="chat",
    framings=("sse",),
    description="xAI Chat Completions (SSE)",
    routes=(RouteSpec("POST", "/v1/chat/completions"),),
    auth=OPENAI_AUTH,
    errors=ErrorSpec("openai", param_field=True),
    resume=ResumeSpec("counter", id_lines=True),
    detect=DetectSpec(
        35,
        keys=("choices",),
        objects=("chat.completion.chunk",),
        model_path=("model",),
        model_prefix="grok",
    ),
    reply=ReplySpec("chatcmpl-", "call_", signature_state=False, demo_model="grok-4.3"),
)
