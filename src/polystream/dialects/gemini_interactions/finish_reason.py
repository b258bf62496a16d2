"""Interaction status -> Finish status and unified finish reason; error code -> kind.

The Interactions API has no per-candidate finish reason: the final interaction's
``status`` says how the turn ended (SDK ``Interaction.status``: ``in_progress``,
``requires_action``, ``completed``, ``failed``, ``cancelled``, ``incomplete``,
``budget_exceeded``, ``queued``, ``idle``, ``requires_continuation``). The table is total:
any other value maps to ``incomplete`` / ``other`` with the raw value kept.
"""

from __future__ import annotations

from typing import Final

from polystream.events import ErrorKind, FinishReason, FinishStatus, UnifiedFinishReason

__all__ = [
    "ERROR_KINDS",
    "STATUS_TABLE",
    "carries_reason",
    "error_kind",
    "map_status",
    "native_status",
]

STATUS_TABLE: Final[dict[str, tuple[FinishStatus, UnifiedFinishReason]]] = {
    "completed": ("completed", "stop"),
    # Legacy ``interaction.complete`` examples report "done" (migration guide).
    "done": ("completed", "stop"),
    # The model asked for function results: the turn is whole, the reply is tool calls.
    "requires_action": ("completed", "tool_calls"),
    "incomplete": ("incomplete", "length"),
    "budget_exceeded": ("incomplete", "length"),
    "requires_continuation": ("incomplete", "pause"),
    "cancelled": ("incomplete", "cancelled"),
    "failed": ("failed", "error"),
    # Non-terminal statuses in a final interaction: the turn did not finish.
    "in_progress": ("incomplete", "other"),
    "queued": ("incomplete", "other"),
    "idle": ("incomplete", "other"),
}
"""status -> (Finish status, unified reason)."""


def map_status(status: str | None) -> tuple[FinishStatus, FinishReason]:
    """Map a final interaction status (unknown values: ``incomplete`` / ``other``)."""
    finish, unified = STATUS_TABLE.get(status or "", ("incomplete", "other"))
    return finish, FinishReason(unified=unified, raw=status)


_NON_TERMINAL: Final = frozenset({"in_progress", "queued", "idle"})

_INVERSE: Final[dict[tuple[FinishStatus, UnifiedFinishReason], str]] = {}
for _status, _pair in STATUS_TABLE.items():
    if _status not in _NON_TERMINAL:
        _INVERSE.setdefault(_pair, _status)
"""(Finish status, unified reason) -> the first terminal status that maps to it."""


def native_status(finish: FinishStatus, reason: FinishReason) -> str:
    """The interaction status an encoder writes for a unified Finish.

    The raw status when it maps back to the same pair, else the first terminal status
    of :data:`STATUS_TABLE` with that pair (``incomplete`` + ``pause`` ->
    ``requires_continuation``), else the nearest by Finish status (the reason is then
    not carried: see :func:`carries_reason`).
    """
    if reason.raw in STATUS_TABLE and STATUS_TABLE[reason.raw] == (finish, reason.unified):
        return reason.raw
    found = _INVERSE.get((finish, reason.unified))
    if found is not None:
        return found
    if finish == "completed":
        return "completed"
    if finish == "failed":
        return "failed"
    return "incomplete"


def carries_reason(finish: FinishStatus, reason: FinishReason) -> bool:
    """True when :func:`native_status` decodes back to the same unified reason."""
    return STATUS_TABLE[native_status(finish, reason)][1] == reason.unified


ERROR_KINDS: Final[dict[str, ErrorKind]] = {
    # google.rpc.Code names, as Google APIs spell ``error.code`` / ``error.status``.
    "RESOURCE_EXHAUSTED": "rate_limit",
    "UNAVAILABLE": "overloaded",
    "INTERNAL": "server",
    "UNKNOWN": "server",
    "DATA_LOSS": "server",
    "DEADLINE_EXCEEDED": "timeout",
    "INVALID_ARGUMENT": "invalid_request",
    "FAILED_PRECONDITION": "invalid_request",
    "OUT_OF_RANGE": "invalid_request",
    "UNIMPLEMENTED": "invalid_request",
    "ALREADY_EXISTS": "invalid_request",
    "ABORTED": "server",
    "UNAUTHENTICATED": "authentication",
    "PERMISSION_DENIED": "permission",
    "NOT_FOUND": "not_found",
    "CANCELLED": "cancelled",
    # HTTP status codes, sent as strings or numbers.
    "400": "invalid_request",
    "401": "authentication",
    "403": "permission",
    "404": "not_found",
    "408": "timeout",
    "413": "request_too_large",
    "429": "rate_limit",
    "499": "cancelled",
    "500": "server",
    "502": "server",
    "503": "overloaded",
    "504": "timeout",
}
"""error.code -> ErrorKind (case-insensitive for names)."""


def error_kind(code: object) -> ErrorKind:
    """The unified kind of an in-band ``error`` event's code (``unknown`` if not listed)."""
    if code is None or isinstance(code, bool):
        return "unknown"
    key = str(code).strip().upper()
    return ERROR_KINDS.get(key, "unknown")
