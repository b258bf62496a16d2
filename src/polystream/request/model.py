"""The unified request model, under its older path (it is :mod:`polystream.request_model`,
which sits below the dialects that parse and build it)."""

from __future__ import annotations

from polystream.request_model import (
    ImagePart,
    Message,
    NativeRequest,
    Part,
    ReasoningConfig,
    ReasoningPart,
    Request,
    TextPart,
    Tool,
    ToolCallPart,
    ToolResultPart,
)

__all__ = [
    "ImagePart",
    "Message",
    "NativeRequest",
    "Part",
    "ReasoningConfig",
    "ReasoningPart",
    "Request",
    "TextPart",
    "Tool",
    "ToolCallPart",
    "ToolResultPart",
]
