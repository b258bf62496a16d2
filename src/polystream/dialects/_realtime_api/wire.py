"""The Realtime vocabulary: the GA messages, and the retired beta names.

Sources: openai-python's ``RealtimeServerEvent`` and ``RealtimeClientEvent`` unions
(``openai/types/realtime``; the ``openai.realtime.*`` surfaces of the event catalog) and
the beta unions it still ships (``openai/types/beta/realtime``;
``openai.realtime_beta_legacy.*``).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BETA_CLIENT",
    "BETA_SERVER",
    "CLIENT_MESSAGES",
    "CONVERSATION",
    "INPUT_BUFFER",
    "OUTPUT_BUFFER",
    "SERVER_MESSAGES",
]

SERVER_MESSAGES: Final = frozenset(
    {
        "session.created",
        "session.updated",
        "conversation.created",
        "conversation.item.created",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.retrieved",
        "conversation.item.truncated",
        "conversation.item.deleted",
        "conversation.item.input_audio_transcription.delta",
        "conversation.item.input_audio_transcription.completed",
        "conversation.item.input_audio_transcription.failed",
        "conversation.item.input_audio_transcription.segment",
        "input_audio_buffer.committed",
        "input_audio_buffer.cleared",
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.timeout_triggered",
        "input_audio_buffer.dtmf_event_received",
        "output_audio_buffer.started",
        "output_audio_buffer.stopped",
        "output_audio_buffer.cleared",
        "response.created",
        "response.done",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_audio.delta",
        "response.output_audio.done",
        "response.output_audio_transcript.delta",
        "response.output_audio_transcript.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.mcp_call_arguments.delta",
        "response.mcp_call_arguments.done",
        "response.mcp_call.in_progress",
        "response.mcp_call.completed",
        "response.mcp_call.failed",
        "mcp_list_tools.in_progress",
        "mcp_list_tools.completed",
        "mcp_list_tools.failed",
        "rate_limits.updated",
        "error",
    }
)
"""The 46 GA server messages."""

CLIENT_MESSAGES: Final = frozenset(
    {
        "session.update",
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
        "input_audio_buffer.clear",
        "conversation.item.create",
        "conversation.item.retrieve",
        "conversation.item.truncate",
        "conversation.item.delete",
        "response.create",
        "response.cancel",
        "output_audio_buffer.clear",
    }
)
"""The 11 GA client messages."""

BETA_SERVER: Final[dict[str, str]] = {
    "response.audio.delta": "response.output_audio.delta",
    "response.audio.done": "response.output_audio.done",
    "response.audio_transcript.delta": "response.output_audio_transcript.delta",
    "response.audio_transcript.done": "response.output_audio_transcript.done",
    "response.text.delta": "response.output_text.delta",
    "response.text.done": "response.output_text.done",
    "transcription_session.updated": "session.updated",
}
"""Retired beta server names -> the GA name that replaced them (the other beta names
are the GA ones)."""

BETA_CLIENT: Final[dict[str, str]] = {
    "transcription_session.update": "session.update",
}
"""Retired beta client names -> their GA replacement (``session.update`` with
``session.type: "transcription"``)."""

CONVERSATION: Final = frozenset(
    {
        "conversation.created",
        "conversation.item.created",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.retrieved",
        "conversation.item.truncated",
        "conversation.item.deleted",
    }
)
"""Conversation news: the session's, whatever response made the item."""

INPUT_BUFFER: Final = frozenset({"input_audio_buffer.committed", "input_audio_buffer.cleared"})
"""Input buffer news without a modelled meaning of their own (status updates)."""

OUTPUT_BUFFER: Final = frozenset(
    {"output_audio_buffer.started", "output_audio_buffer.stopped", "output_audio_buffer.cleared"}
)
"""Playback news of a WebRTC or SIP call (the server plays the audio)."""
