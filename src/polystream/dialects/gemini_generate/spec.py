"""What ``gemini_generate`` is and where it is served (data only; see
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
    name="gemini_generate",
    provider="gemini",
    family="generate",
    framings=("sse", "json_array"),
    description="Gemini streamGenerateContent (alt=sse, or the streamed JSON array)",
    routes=(
        RouteSpec(
            "POST",
            "/{version}/models/{model}:streamGenerateContent",
            stream=True,
            versions=GOOGLE_VERSIONS,
        ),
        RouteSpec(
            "POST",
            "/{version}/models/{model}:generateContent",
            stream=False,
            versions=GOOGLE_VERSIONS,
        ),
    ),
    auth=AuthSpec("x-goog-api-key", accepts=("x-goog-api-key", "?key")),
    errors=ErrorSpec("google", param_field=False),
    # google-genai's reader takes every line for data and rejects an `id:` line.
    resume=ResumeSpec("counter"),
    detect=DetectSpec(50, keys=("candidates", "usageMetadata", "promptFeedback", "modelVersion")),
    # google-genai parses every line of a generate stream that is not `data:` as JSON, and
    # a generate stream has no terminal error event: a failed one is cut.
    stream=StreamSpec(keepalive=b"", ends_aborted=True),
    reply=ReplySpec("", "", demo_model="gemini-3.8-flash"),
)
