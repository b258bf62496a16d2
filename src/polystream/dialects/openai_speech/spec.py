"""What ``openai_speech`` is and where it is served (data only; see
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
    name="openai_speech",
    provider="openai",
    family="speech",
    framings=("sse", "raw"),
    description="OpenAI text to speech (SSE audio deltas, or the raw audio bytes)",
    routes=(RouteSpec("POST", "/v1/audio/speech"),),
    auth=OPENAI_AUTH,
    errors=ErrorSpec("openai", param_field=True),
    resume=ResumeSpec("counter", id_lines=True),
    detect=DetectSpec(
        60,
        names=("speech.audio.delta", "speech.audio.done"),
        prefixes=("speech.",),
        media_types=("audio/",),
    ),
    reply=ReplySpec(
        "", "", signature_state=False, demo_model="gpt-4o-mini-tts", model_prefixes=("tts-",)
    ),
    raw_options={"audio_format": "response_format"},
)
