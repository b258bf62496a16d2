"""The Managed Agents session stream's wire format: event names, what each becomes, the
stop reasons, the usage arithmetic and JSON helpers.

Framing: SSE, ``event: <type>`` then ``data: <json>`` whose ``type`` repeats the name
(the SDK's reader skips an event without a name). The event types follow the installed
SDK's union ``BetaManagedAgentsStreamSessionEvents``
(``anthropic/types/beta/sessions/beta_managed_agents_stream_session_events.py``).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.events import ErrorKind, FinishReason, FinishStatus, Usage
from polystream.wire.jsondepth import decode_bounded

__all__ = [
    "CLIENT_RESULTS",
    "CLIENT_TOOL_USES",
    "METADATA_EVENTS",
    "METADATA_PREFIXES",
    "SERVER_RESULTS",
    "SERVER_TOOL_USES",
    "STATUS_EVENTS",
    "TERMINAL_EVENTS",
    "decode_any",
    "encode_json",
    "error_kind",
    "finish_of",
    "native_usage",
    "sse",
    "stop_reason_of",
    "unified_usage",
]

STATUS_EVENTS: Final[dict[str, str]] = {
    "session.status_running": "running",
    "session.status_rescheduled": "rescheduled",
    "session.status_idle": "idle",
    "session.status_terminated": "terminated",
    "session.deleted": "deleted",
    "session.thread_status_running": "thread_running",
    "session.thread_status_idle": "thread_idle",
    "session.thread_status_terminated": "thread_terminated",
    "session.thread_status_rescheduled": "thread_rescheduled",
}
"""Lifecycle events and the status word each becomes (:class:`StatusUpdate.status`)."""

STATUS_NAMES: Final[dict[str, str]] = {word: name for name, word in STATUS_EVENTS.items()}
"""The event that writes each status word."""

TERMINAL_EVENTS: Final = frozenset(
    {"session.status_idle", "session.status_terminated", "session.deleted"}
)
"""The events that end a turn of the session stream (the unified Finish): the session
going idle (whatever its ``stop_reason``), terminated, or deleted."""

SERVER_TOOL_USES: Final = frozenset({"agent.tool_use", "agent.mcp_tool_use"})
"""Tool uses the platform executes (``server_tool_call`` blocks)."""

SERVER_RESULTS: Final[dict[str, str]] = {
    "agent.tool_result": "tool_use_id",
    "agent.mcp_tool_result": "mcp_tool_use_id",
}
"""Results of the platform's tools (``server_tool_result`` blocks), and the field naming
the tool use each answers."""

CLIENT_TOOL_USES: Final = frozenset({"agent.custom_tool_use"})
"""Tool uses the client executes (``tool_call`` blocks)."""

CLIENT_RESULTS: Final[dict[str, str]] = {
    "user.custom_tool_result": "custom_tool_use_id",
    "user.tool_result": "tool_use_id",
}
"""Results the client sent, echoed on the stream (``tool_result`` blocks)."""

METADATA_EVENTS: Final = frozenset(
    {
        "user.message",
        "user.interrupt",
        "user.tool_confirmation",
        "user.define_outcome",
        "system.message",
        "session.thread_created",
        "session.updated",
        "agent.thread_message_received",
        "agent.thread_message_sent",
        "agent.thread_context_compacted",
    }
)
"""Events passed on whole as :class:`Metadata` named by their type."""

METADATA_PREFIXES: Final = ("span.", "workflow_run.")
"""Event families passed on whole as :class:`Metadata` named by their type."""

_STOPS: Final[dict[str, tuple[FinishStatus, str]]] = {
    "end_turn": ("completed", "stop"),
    "requires_action": ("completed", "tool_calls"),
    "refusal": ("completed", "refusal"),
    "budget_reached": ("incomplete", "other"),
    "retries_exhausted": ("failed", "error"),
}

_ERROR_KINDS: Final[dict[str, ErrorKind]] = {
    "model_overloaded_error": "overloaded",
    "model_rate_limited_error": "rate_limit",
    "model_request_failed_error": "server",
    "mcp_connection_failed_error": "server",
    "mcp_authentication_failed_error": "authentication",
    "billing_error": "quota",
    "credential_host_unreachable_error": "server",
    "tool_use_limit_reached_error": "invalid_request",
    "compaction_limit_reached_error": "invalid_request",
    "repository_authentication_error": "authentication",
    "repository_forbidden_error": "permission",
    "repository_not_found_error": "not_found",
    "repository_checkout_error": "invalid_request",
    "repository_clone_error": "server",
    "unknown_error": "unknown",
}

_ANY: Final = msgspec.json.Decoder()
_ENCODER: Final = msgspec.json.Encoder()


def decode_any(data: str | bytes) -> Any:
    """Decode JSON into plain values (raises ``msgspec.DecodeError``, also for JSON
    nested past the bound of :mod:`polystream.wire.jsondepth`)."""
    return decode_bounded(data, _ANY)


def encode_json(value: Any) -> bytes:
    """Compact JSON of ``value``, keys in their order."""
    return _ENCODER.encode(value)


def sse(name: str, data: bytes | str) -> bytes:
    """One SSE event: ``event: <name>`` and its data line."""
    body = data.encode() if isinstance(data, str) else data
    return b"event: " + name.encode() + b"\ndata: " + body + b"\n\n"


def error_kind(error_type: Any) -> ErrorKind:
    """The unified kind of a ``session.error``'s ``error.type``."""
    return _ERROR_KINDS.get(error_type, "unknown") if isinstance(error_type, str) else "unknown"


def stop_reason_of(event: dict[str, Any]) -> str | None:
    """The ``stop_reason.type`` of an idle event, if it has one."""
    stop = event.get("stop_reason")
    if isinstance(stop, dict) and isinstance(stop.get("type"), str):
        return str(stop["type"])
    return None


def finish_of(name: str, event: dict[str, Any], errored: bool) -> tuple[FinishStatus, FinishReason]:
    """The Finish status and reason of a terminal event (``errored``: a ``session.error``
    that the platform does not retry came before it)."""
    if name == "session.status_idle":
        raw = stop_reason_of(event)
        status, unified = _STOPS.get(raw or "", ("completed", "other"))
        return status, FinishReason(unified=unified, raw=raw)  # type: ignore[arg-type]
    if name == "session.status_terminated":
        if errored:
            return "failed", FinishReason(unified="error", raw="terminated")
        return "completed", FinishReason(unified="stop", raw="terminated")
    return "incomplete", FinishReason(unified="cancelled", raw="deleted")


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def unified_usage(usage: dict[str, Any]) -> Usage:
    """A ``session.usage`` snapshot in unified terms: ``input_tokens`` adds the cache
    reads and writes to the uncached ``input_tokens`` the platform reports."""
    uncached = _count(usage.get("input_tokens"))
    read = _count(usage.get("cache_read_input_tokens"))
    creation = usage.get("cache_creation")
    write: int | None = None
    if isinstance(creation, dict):
        counts = [c for c in (_count(v) for v in creation.values()) if c is not None]
        write = sum(counts) if counts else None
    parts = [c for c in (uncached, read, write) if c is not None]
    output = _count(usage.get("output_tokens"))
    total_in = sum(parts) if parts else None
    return Usage(
        input_tokens=total_in,
        output_tokens=output,
        cache_read_tokens=read,
        cache_write_tokens=write,
        total_tokens=(total_in or 0) + (output or 0) if (parts or output is not None) else None,
        raw=usage,
    )


def native_usage(usage: Usage, *, own: bool) -> dict[str, Any]:
    """The ``session.usage`` snapshot of a unified usage: its own object when it came
    from this dialect (``own``), else made from the counts."""
    if own and isinstance(usage.raw, dict):
        return usage.raw
    out: dict[str, Any] = {}
    if usage.input_tokens is not None:
        out["input_tokens"] = (
            usage.input_tokens - (usage.cache_read_tokens or 0) - (usage.cache_write_tokens or 0)
        )
    if usage.output_tokens is not None:
        out["output_tokens"] = usage.output_tokens
    if usage.cache_read_tokens is not None:
        out["cache_read_input_tokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens is not None:
        out["cache_creation"] = {"ephemeral_5m_input_tokens": usage.cache_write_tokens}
    return out
