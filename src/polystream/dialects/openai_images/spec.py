"""What ``openai_images`` is and where it is served (data only; see
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
    name="openai_images",
    provider="openai",
    family="images",
    framings=("sse",),
    description="OpenAI image generation and edits (SSE)",
    routes=(
        RouteSpec("POST", "/v1/images/generations", operation="generation"),
        RouteSpec("POST", "/v1/images/edits", form_file="image", operation="edit"),
    ),
    auth=OPENAI_AUTH,
    errors=ErrorSpec("openai", param_field=True),
    resume=ResumeSpec("counter", id_lines=True),
    detect=DetectSpec(74, prefixes=("image_generation.", "image_edit.")),
    reply=ReplySpec(
        "", "", signature_state=False, demo_model="gpt-image-1", model_prefixes=("dall-e-",)
    ),
)
