"""The Realtime client messages (the 11 GA ones), as the session's commands.

Each command returns the JSON texts to send, in order. Audio travels base64 in
``input_audio_buffer.append``; one append carries at most 15 MiB, so a long buffer is
split into several (at a frame boundary).
"""

from __future__ import annotations

import base64
from typing import Any, Final

from polystream.wire.ws import dump_message

__all__ = ["APPEND_LIMIT", "Commands"]

APPEND_LIMIT: Final = 11 * 1024 * 1024
"""Most audio bytes in one ``input_audio_buffer.append`` (base64 makes 14.7 MiB of it,
under the service's 15 MiB)."""


class Commands:
    """The GA client messages (mixed into the session)."""

    def configure(self, session: dict[str, Any] | None = None, **fields: Any) -> list[str]:
        """``session.update``: ``session`` then ``fields``, with ``type: "realtime"``
        unless a type is given (``transcription`` for a transcription session)."""
        config: dict[str, Any] = {"type": "realtime"}
        config.update(session or {})
        config.update(fields)
        return [dump_message({"type": "session.update", "session": config})]

    def send_text(self, text: str, *, respond: bool = True, role: str = "user") -> list[str]:
        """A ``conversation.item.create`` of a text message, then (``respond``) a
        ``response.create``."""
        item = {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}
        out = self.append_item(item)
        if respond:
            out += self.create_response()
        return out

    def send_audio(self, audio: bytes) -> list[str]:
        """``input_audio_buffer.append`` messages for ``audio`` (in the session's input
        format), split to respect the 15 MiB limit of one append."""
        step = APPEND_LIMIT
        return [
            dump_message(
                {
                    "type": "input_audio_buffer.append",
                    "audio": base64.b64encode(audio[at : at + step]).decode("ascii"),
                }
            )
            for at in range(0, len(audio), step)
        ]

    def commit_audio(self) -> list[str]:
        """``input_audio_buffer.commit``: the buffer becomes a user item (without VAD)."""
        return [dump_message({"type": "input_audio_buffer.commit"})]

    def clear_audio(self) -> list[str]:
        """``input_audio_buffer.clear``."""
        return [dump_message({"type": "input_audio_buffer.clear"})]

    def append_item(
        self, item: dict[str, Any], *, previous_item_id: str | None = None
    ) -> list[str]:
        """``conversation.item.create`` (after ``previous_item_id`` when given)."""
        message: dict[str, Any] = {"type": "conversation.item.create"}
        if previous_item_id is not None:
            message["previous_item_id"] = previous_item_id
        message["item"] = item
        return [dump_message(message)]

    def retrieve_item(self, item_id: str) -> list[str]:
        """``conversation.item.retrieve``."""
        return [dump_message({"type": "conversation.item.retrieve", "item_id": item_id})]

    def delete_item(self, item_id: str) -> list[str]:
        """``conversation.item.delete``."""
        return [dump_message({"type": "conversation.item.delete", "item_id": item_id})]

    def create_response(self, **response: Any) -> list[str]:
        """``response.create``, with ``response`` as its ``response`` object when given
        (``conversation="none"`` for an out-of-band response, ``instructions``,
        ``output_modalities``, ...)."""
        message: dict[str, Any] = {"type": "response.create"}
        if response:
            message["response"] = response
        return [dump_message(message)]

    def cancel(self, response_id: str | None = None) -> list[str]:
        """``response.cancel`` (of ``response_id`` when given)."""
        message: dict[str, Any] = {"type": "response.cancel"}
        if response_id is not None:
            message["response_id"] = response_id
        return [dump_message(message)]

    def truncate(self, item_id: str, audio_end_ms: int, *, content_index: int = 0) -> list[str]:
        """``conversation.item.truncate``: the assistant audio item ends at
        ``audio_end_ms`` (what was played); its unheard transcript is dropped."""
        return [
            dump_message(
                {
                    "type": "conversation.item.truncate",
                    "item_id": item_id,
                    "content_index": content_index,
                    "audio_end_ms": audio_end_ms,
                }
            )
        ]

    def tool_result(self, call_id: str, output: str, *, respond: bool = True) -> list[str]:
        """A ``conversation.item.create`` of the ``function_call_output``, then
        (``respond``) a ``response.create``."""
        out = self.append_item(
            {"type": "function_call_output", "call_id": call_id, "output": output}
        )
        if respond:
            out += self.create_response()
        return out

    def clear_output_audio(self) -> list[str]:
        """``output_audio_buffer.clear`` (WebRTC and SIP calls, where the server plays
        the audio; send :meth:`cancel` first)."""
        return [dump_message({"type": "output_audio_buffer.clear"})]
