"""The xAI Voice Agent vocabulary: the Realtime API's, and what xAI adds.

Sources: the ``xai.realtime.*`` surfaces of the event catalog (the xAI Voice Agent docs,
https://docs.x.ai/docs/guides/voice/agent, and pipecat's xAI realtime events), and the
shared reference's xAI section.
"""

from __future__ import annotations

from typing import Final

from polystream.dialects._realtime_api.wire import SERVER_MESSAGES as REALTIME_SERVER

__all__ = ["CLIENT_MESSAGES", "SERVER_MESSAGES", "XAI_SERVER"]

XAI_SERVER: Final = frozenset(
    {
        "ping",  # keep-alive, {"timestamp": ms}
        "conversation.item.input_audio_transcription.updated",  # the transcript so far
    }
)
"""The server messages xAI adds to the Realtime vocabulary."""

SERVER_MESSAGES: Final = REALTIME_SERVER | XAI_SERVER
"""Every server message read as typed: the Realtime API's (xAI lists most of them and
sends them under the same names) and xAI's own."""

CLIENT_MESSAGES: Final = frozenset(
    {
        "session.update",
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
        "input_audio_buffer.clear",
        "conversation.item.create",
        "conversation.item.truncate",
        "conversation.item.delete",
        "response.create",
        "response.cancel",
    }
)
"""The 9 client messages (no ``conversation.item.retrieve``, no
``output_audio_buffer.clear``)."""
