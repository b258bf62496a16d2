"""What ``xai_responses`` is and where it is served (data only; see
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
    name="xai_responses",
    provider="xai",
    family="responses",
    framings=("sse",),
    description="xAI Responses API (SSE)",
    routes=(
        RouteSpec("POST", "/v1/responses"),
        RouteSpec("GET", "/v1/responses/{id}", "resume"),
    ),
    auth=OPENAI_AUTH,
    errors=ErrorSpec("openai", param_field=True),
    # xAI documents no resume of a cut stream: the client does not try one.
    resume=ResumeSpec(
        "sequence_number", request_path="/responses/{id}", cursor_param="starting_after"
    ),
    detect=DetectSpec(
        10, prefixes=("response.",), model_path=("response", "model"), model_prefix="grok"
    ),
    reply=ReplySpec("resp_", "call_", item_ids=True, demo_model="grok-4.3"),
)
