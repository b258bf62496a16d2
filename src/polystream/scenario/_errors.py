"""Error bodies in each provider's own shape, for HTTP error answers.

* OpenAI and xAI (the OpenAI SDK parses both):
  ``{"error": {"message", "type", "param", "code"}}``.
* Anthropic (and xAI ``/v1/messages``):
  ``{"type": "error", "error": {"type", "message"}, "request_id"}``.
* Gemini: ``{"error": {"code", "message", "status"}}`` with the google.rpc status name.

The type names per status follow each provider's error documentation (OpenAI "Error
codes", Anthropic "Errors", Google AIP-193 / ``google.rpc.Code``).
"""

from __future__ import annotations

import math
from typing import Any, Final

import msgspec

__all__ = ["DEFAULT_MESSAGES", "ErrorAnswer", "error_answer", "provider_of_path"]

_OPENAI_TYPES: Final = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("requests", "rate_limit_exceeded"),  # OpenAI: type names the limit (requests, tokens)
    500: ("server_error", None),
    503: ("server_error", "service_unavailable"),
    529: ("server_error", "overloaded"),
}
_ANTHROPIC_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_GOOGLE_STATUS: Final = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",  # google.rpc has no "too large" code; Google answers 400/413
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
    529: "UNAVAILABLE",
}

DEFAULT_MESSAGES: Final = {
    400: "Invalid request.",
    401: "Invalid API key.",
    403: "Permission denied.",
    404: "Not found.",
    405: "Method not allowed.",
    413: "Request too large.",
    429: "Rate limit exceeded. Please retry after the time given in Retry-After.",
    500: "The server had an error while processing your request.",
    503: "The service is temporarily unavailable.",
    529: "Overloaded",
}
"""Messages used when a scenario's HTTP error states none."""

_encoder: Final = msgspec.json.Encoder()


class ErrorAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """An HTTP error answer: status, headers and JSON body bytes."""

    status: int
    body: bytes
    headers: dict[str, str]


def provider_of_path(path: str) -> str | None:
    """The provider whose prefix starts ``path`` (``/openai/...`` -> ``openai``)."""
    head = path.lstrip("/").split("/", 1)[0]
    return head if head in ("openai", "xai", "anthropic", "gemini") else None


def error_answer(
    provider: str | None,
    status: int,
    message: str | None = None,
    *,
    dialect: str | None = None,
    param: str | None = None,
    code: str | None = None,
    retry_after: float | None = None,
    request_id: str = "req_emulator",
) -> ErrorAnswer:
    """Build the error answer a provider sends for ``status``.

    Args:
        provider: ``openai``, ``xai``, ``anthropic``, ``gemini``, or None for a
            generic ``{"error": {"message", "type"}}`` body.
        status: The HTTP status.
        message: The message (default: :data:`DEFAULT_MESSAGES`).
        dialect: The dialect of the endpoint; ``xai_messages`` answers in the
            Anthropic shape.
        param: OpenAI's ``param``.
        code: OpenAI's ``code`` (default: per status).
        retry_after: Seconds for ``Retry-After`` (and ``retry-after-ms``).
        request_id: The request id header / field.
    """
    text = message or DEFAULT_MESSAGES.get(status, f"HTTP {status}")
    headers = {"content-type": "application/json"}
    if retry_after is not None:
        # Retry-After takes whole seconds (RFC 9110 §10.2.3); the OpenAI and Anthropic
        # SDKs also read the finer retry-after-ms.
        headers["retry-after"] = str(max(0, math.ceil(retry_after)))
        headers["retry-after-ms"] = str(max(0, round(retry_after * 1000)))
    body: dict[str, Any]
    if provider == "anthropic" or dialect == "xai_messages":
        headers["request-id"] = request_id
        kind = _ANTHROPIC_TYPES.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        body = {"type": "error", "error": {"type": kind, "message": text}, "request_id": request_id}
    elif provider == "gemini":
        state = _GOOGLE_STATUS.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
        body = {"error": {"code": status, "message": text, "status": state}}
    elif provider in ("openai", "xai"):
        headers["x-request-id"] = request_id
        kind, default_code = _OPENAI_TYPES.get(
            status, ("server_error" if status >= 500 else "invalid_request_error", None)
        )
        body = {
            "error": {
                "message": text,
                "type": kind,
                "param": param,
                "code": code if code is not None else default_code,
            }
        }
    else:
        body = {"error": {"message": text, "type": "not_found" if status == 404 else "error"}}
    return ErrorAnswer(status=status, body=_encoder.encode(body), headers=headers)
