"""Requests in unified terms, and their native forms for every dialect (sans-I/O)."""

from __future__ import annotations

from polystream.request.codecs import NativeRequest, RequestError, build_request, parse_request
from polystream.request.model import (
    ImagePart,
    Message,
    Part,
    ReasoningConfig,
    ReasoningPart,
    Request,
    TextPart,
    Tool,
    ToolCallPart,
    ToolResultPart,
)
from polystream.request.providers import (
    PROVIDERS,
    ProviderInfo,
    auth_headers,
    error_body,
    error_from_body,
    kind_for_status,
    provider_of,
)

__all__ = [
    "PROVIDERS",
    "ImagePart",
    "Message",
    "NativeRequest",
    "Part",
    "ProviderInfo",
    "ReasoningConfig",
    "ReasoningPart",
    "Request",
    "RequestError",
    "TextPart",
    "Tool",
    "ToolCallPart",
    "ToolResultPart",
    "auth_headers",
    "build_request",
    "error_body",
    "error_from_body",
    "kind_for_status",
    "parse_request",
    "provider_of",
]
