"""What ``openai_chat`` is and where it is served (data only; see
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
    name="openai_chat",
    provider="openai",
    family="chat",
    framings=("sse",),
    description="OpenAI Chat Completions (SSE)",
    routes=(RouteSpec("POST", "/v1/chat/completions"),),
    auth=OPENAI_AUTH,
    errors=ErrorSpec("openai", param_field=True),
    resume=ResumeSpec("counter", id_lines=True),
    detect=DetectSpec(
        40, keys=("choices",), objects=("chat.completion.chunk",), model_path=("model",)
    ),
    reply=ReplySpec("chatcmpl-", "call_", signature_state=False, demo_model="gpt-5.4-mini"),
)
