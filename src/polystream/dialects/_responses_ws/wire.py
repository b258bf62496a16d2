"""The Responses WebSocket vocabulary.

Server messages: the Responses stream events (the ``openai.responses.sse`` names of the
event catalog, each with an optional ``stream_id`` echo), the socket's own ``error``,
and the steering and injection outcomes. Client messages: ``response.create``,
``response.steer``, ``response.inject`` (openai-python ``ResponsesClientEvent`` and
``BetaResponsesClientEvent``).
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = ["CLIENT_MESSAGES", "REPLY_EVENTS", "STEERING"]

REPLY_EVENTS: Final = frozenset(
    {
        "response.created",
        "response.queued",
        "response.in_progress",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_text.annotation.added",
        "response.refusal.delta",
        "response.refusal.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.audio.delta",
        "response.audio.done",
        "response.audio.transcript.delta",
        "response.audio.transcript.done",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.file_search_call.in_progress",
        "response.file_search_call.searching",
        "response.file_search_call.completed",
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.done",
        "response.image_generation_call.in_progress",
        "response.image_generation_call.generating",
        "response.image_generation_call.partial_image",
        "response.image_generation_call.completed",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
        "response.mcp_list_tools.in_progress",
        "response.mcp_list_tools.completed",
        "response.mcp_list_tools.failed",
        "response.shell_call_command.added",
        "response.shell_call_command.delta",
        "response.shell_call_command.done",
        "response.shell_call_output_content.delta",
        "response.shell_call_output_content.done",
        "response.apply_patch_call_operation_diff.delta",
        "response.apply_patch_call_operation_diff.done",
        "response.compaction.compacting",
    }
)
"""The events of one reply's stream, decoded by the shared Responses decoder (the one
that reads the SSE stream). An event of this set opens a reply on its lane when none is
running there."""

STEERING: Final[dict[str, tuple[Literal["steer", "inject"], str]]] = {
    "response.steer.accepted": ("steer", "accepted"),
    "response.steer.pending": ("steer", "pending"),
    "response.steer.failed": ("steer", "failed"),
    "response.inject.created": ("inject", "created"),
    "response.inject.failed": ("inject", "failed"),
}
"""Steering and injection outcomes -> (action, state) of a
:class:`~polystream.events.Steering` event."""

CLIENT_MESSAGES: Final = frozenset({"response.create", "response.steer", "response.inject"})
"""What a client sends."""
