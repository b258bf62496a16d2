"""What ``openai_transcription`` is and where it is served (data only; see
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
    name="openai_transcription",
    provider="openai",
    family="transcription",
    framings=("sse",),
    description="OpenAI audio transcriptions (SSE)",
    routes=(RouteSpec("POST", "/v1/audio/transcriptions", form_file="file"),),
    auth=OPENAI_AUTH,
    errors=ErrorSpec("openai", param_field=True),
    resume=ResumeSpec("counter", id_lines=True),
    detect=DetectSpec(73, prefixes=("transcript.text.",)),
    reply=ReplySpec(
        "",
        "",
        signature_state=False,
        demo_model="gpt-4o-transcribe",
        model_prefixes=("whisper-",),
    ),
)
