"""What ``gemini_interactions`` is and where it is served (data only; see
:mod:`polystream.dialects._spec`)."""

from __future__ import annotations

from polystream.dialects._spec import (
    GOOGLE_VERSIONS,
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
    name="gemini_interactions",
    provider="gemini",
    family="interactions",
    framings=("sse",),
    description="Gemini Interactions API (SSE)",
    routes=(
        RouteSpec("POST", "/{version}/interactions", versions=GOOGLE_VERSIONS),
        RouteSpec("GET", "/{version}/interactions/{id}", "resume", versions=GOOGLE_VERSIONS),
    ),
    auth=AuthSpec("x-goog-api-key", accepts=("x-goog-api-key", "?key")),
    errors=ErrorSpec("google", param_field=False),
    resume=ResumeSpec(
        "event_id",
        request_path="/v1beta/interactions/{id}",
        cursor_param="last_event_id",
        client_resume=True,
    ),
    detect=DetectSpec(0, keys=("event_type",), prefixes=("interaction.", "step.", "content.")),
    stream=StreamSpec(relays_upstream_keepalive=True),
    reply=ReplySpec("v1_", "", demo_model="gemini-3.8-flash"),
)
