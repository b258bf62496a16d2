"""The Responses WebSocket ``error`` message, typed.

Over the socket an error comes wrapped: ``{"type": "error", "status": 400, "error":
{"type", "code", "message", "param", "headers"}, "sequence_number"?, "stream_id"?}``
(``ResponseWsError`` of openai-python). The shared Responses code types the nested
object; this module adds the HTTP ``status`` and the two codes the service sends before
any output, after which the request can be sent again, with its whole history, on a new
connection: ``previous_response_not_found`` (the connection's cache no longer holds the
response to continue from) and ``websocket_connection_limit_reached`` (the connection
reached its 60 minutes).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.events import (
    RETRYABLE_KINDS,
    ErrorInfo,
    ErrorKind,
    RetryAdvice,
    kind_for_status,
)

__all__ = ["CONNECTION_LIMIT", "FULL_HISTORY_RETRY", "retry_advice", "retype"]

CONNECTION_LIMIT: Final = "websocket_connection_limit_reached"

FULL_HISTORY_RETRY: Final[dict[str, ErrorKind]] = {
    "previous_response_not_found": "not_found",
    CONNECTION_LIMIT: "timeout",
}
"""The codes after which a full-history retry on a new connection is safe, and the
kind each one is."""


def retype(info: ErrorInfo, status: Any, *, started: bool) -> ErrorInfo:
    """``info`` (the nested error, typed) with the message's HTTP ``status`` and the
    kind of the codes above; a kind still unknown is the status's. ``retryable`` is
    recomputed for a new kind: a retryable kind, before the reply ``started``."""
    http_status = status if type(status) is int else None
    kind = FULL_HISTORY_RETRY.get(info.code or "", info.kind)
    if kind == "unknown" and http_status is not None:
        kind = kind_for_status(http_status)
    if kind == info.kind and http_status is None:
        return info
    retryable = info.retryable if kind == info.kind else kind in RETRYABLE_KINDS and not started
    return msgspec.structs.replace(info, kind=kind, http_status=http_status, retryable=retryable)


def retry_advice(code: str | None) -> RetryAdvice | None:
    """The advice for an error code, if it is one of :data:`FULL_HISTORY_RETRY`."""
    if code not in FULL_HISTORY_RETRY:
        return None
    return RetryAdvice(code=code, replay="full_history", new_connection=True, safe=True)
