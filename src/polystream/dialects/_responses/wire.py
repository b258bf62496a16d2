"""The Responses wire: event names, item types, and the payload codec.

Why payloads decode to plain ``dict`` rather than ``msgspec.Struct``: the same-dialect
round trip must reproduce every field of every event, including fields added after this
version (``obfuscation`` arrived that way, so did ``logprobs`` and ``caller``). A
Struct drops unknown fields; a dict keeps them and is handed on as the unified event's
``extra`` without a copy. msgspec decodes a small delta payload to a dict in about a
microsecond, so the hot path stays cheap; the one decoder and encoder below are reused.

Event names: every ``openai.responses.sse`` name of the event catalog, plus
``response.apply_patch_call_operation_diff.*`` (LIVE_DISCOVERED, spec/streaming.md
section 3) and ``keepalive`` (undocumented, Effect-TS/effect#6277).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.events import BlockKind

__all__ = [
    "DECODER",
    "ENCODER",
    "ITEM_KINDS",
    "KNOWN_ITEM_TYPES",
    "LIFECYCLE",
    "STATUS_EVENTS",
    "TERMINAL",
    "TOOL_NAMES",
    "encode_payload",
]

DECODER: Final = msgspec.json.Decoder()
"""Decodes one ``data:`` payload (to builtins: see the module docstring)."""

ENCODER: Final = msgspec.json.Encoder()
"""Encodes one payload."""

LIFECYCLE: Final = frozenset({"response.created", "response.queued", "response.in_progress"})
"""Lifecycle events that carry a ``Response`` snapshot."""

TERMINAL: Final[dict[str, str]] = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
"""Terminal events -> unified finish status."""

STATUS_EVENTS: Final = frozenset(
    {
        # progress of provider-executed items
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "response.image_generation_call.in_progress",
        "response.image_generation_call.generating",
        "response.image_generation_call.completed",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_list_tools.failed",
        "response.compaction.compacting",
        # ``.done`` events that restate what the deltas already built
        "response.output_text.done",
        "response.refusal.done",
        "response.function_call_arguments.done",
        "response.custom_tool_call_input.done",
        "response.mcp_call_arguments.done",
        "response.code_interpreter_call_code.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.done",
        "response.shell_call_command.added",
        "response.shell_call_command.done",
        "response.shell_call_output_content.done",
        "response.apply_patch_call_operation_diff.done",
        # reasoning summary part boundaries (the reasoning item is the block)
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
    }
)
"""Item-scoped events that become a :class:`~polystream.events.StatusUpdate`."""

ITEM_KINDS: Final[dict[str, BlockKind]] = {
    "reasoning": "reasoning",
    "function_call": "tool_call",
    "custom_tool_call": "tool_call",  # xAI: server_tool_call (quirk)
    "web_search_call": "server_tool_call",
    "file_search_call": "server_tool_call",
    "mcp_call": "server_tool_call",
    "code_interpreter_call": "code",
    "shell_call": "code",
    "apply_patch_call": "code",
    "shell_call_output": "code_result",
    "apply_patch_call_output": "code_result",
    "image_generation_call": "image",
    "compaction": "compaction",
}
"""Output item type -> block kind (``message`` items hold text/refusal part blocks;
any other type is an ``other`` block named after it)."""

KNOWN_ITEM_TYPES: Final = frozenset(
    {
        *ITEM_KINDS,
        "message",
        "function_call_output",
        "computer_call",
        "computer_call_output",
        "program",
        "program_output",
        "tool_search_call",
        "tool_search_output",
        "additional_tools",
        "local_shell_call",
        "local_shell_call_output",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "custom_tool_call_output",
    }
)
"""Output item types of the ``openai-python`` ``ResponseOutputItem`` union (3.x). Any
other type decodes as an ``other`` block; strict mode rejects it."""

TOOL_NAMES: Final[dict[str, str]] = {
    "web_search_call": "web_search",
    "file_search_call": "file_search",
    "code_interpreter_call": "code_interpreter",
    "image_generation_call": "image_generation",
    "shell_call": "shell",
    "apply_patch_call": "apply_patch",
}
"""Block ``name`` for provider tools whose item does not name itself."""


def encode_payload(name: str, payload: dict[str, Any]) -> bytes:
    """One SSE event: ``event: <name>`` and the compact JSON ``data:`` line.

    JSON never contains a raw newline, so one ``data:`` line always suffices.
    """
    return b"event: " + name.encode() + b"\ndata: " + ENCODER.encode(payload) + b"\n\n"
