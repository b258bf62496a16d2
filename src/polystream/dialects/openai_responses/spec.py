"""What ``openai_responses`` is and where it is served (data only; see
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
    name="openai_responses",
    provider="openai",
    family="responses",
    framings=("sse",),
    description="OpenAI Responses API (SSE)",
    routes=(
        RouteSpec("POST", "/v1/responses"),
        RouteSpec("GET", "/v1/responses/{id}", "resume"),
    ),
    auth=OPENAI_AUTH,
    errors=ErrorSpec("openai", param_field=True),
    resume=ResumeSpec(
        "sequence_number",
        request_path="/responses/{id}",
        cursor_param="starting_after",
        client_resume=True,
        needs_background=True,
    ),
    detect=DetectSpec(20, prefixes=("response.",), model_path=("response", "model")),
    reply=ReplySpec("resp_", "call_", item_ids=True, demo_model="gpt-5.4-mini"),
)
