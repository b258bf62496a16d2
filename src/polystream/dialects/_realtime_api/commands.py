"""The Realtime client messages (the 11 GA ones), as the session's commands.

Each command returns the JSON texts to send, in order. Audio travels base64 in
``input_audio_buffer.append``; one append carries at most 15 MiB, so a long buffer is
split into several (at a frame boundary). When the session's input transport is
``binary`` (xAI's ``audio.input.transport``), audio goes as bytes messages instead.
"""

from __future__ import annotations

import base64
from typing import Any, ClassVar, Final, Literal

from polystream.wire.ws import dump_message

__all__ = ["APPEND_LIMIT", "Commands"]

APPEND_LIMIT: Final = 11 * 1024 * 1024
"""Most audio bytes in one ``input_audio_buffer.append`` (base64 makes 14.7 MiB of it,
under the service's 15 MiB)."""


Transport = Literal["json", "binary"]


class Commands:
    """The GA client messages (mixed into the session).

    Class attributes:
        session_type: The ``type`` a ``session.update`` carries unless given (None:
            none, as xAI's sessions have no type).
    """

    session_type: ClassVar[str | None] = "realtime"
    input_transport: Transport = "json"
    """How input audio travels: base64 in JSON, or (``binary``) bytes messages."""

    def configure(self, session: dict[str, Any] | None = None, **fields: Any) -> list[str]:
        """``session.update``: ``session`` then ``fields``, with the family's
        :attr:`session_type` unless a type is given (``transcription`` for an OpenAI
        transcription session). An ``audio.input.transport`` it sets applies to the
        audio sent after it."""
        config: dict[str, Any] = {} if self.session_type is None else {"type": self.session_type}
        config.update(session or {})
        config.update(fields)
        self._configured(config)
        return [dump_message({"type": "session.update", "session": config})]

    def _configured(self, session: dict[str, Any]) -> None:
        """A configuration the client sent or the server stated (the session reads it)."""

    def send_text(self, text: str, *, respond: bool = True, role: str = "user") -> list[str]:
        """A ``conversation.item.create`` of a text message, then (``respond``) a
        ``response.create``."""
        item = {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}
        out = self.append_item(item)
        if respond:
            out += self.create_response()
        return out

    def send_audio(self, audio: bytes) -> list[str] | list[bytes]:
        """``input_audio_buffer.append`` messages for ``audio`` (in the session's input
        format), split to respect the 15 MiB limit of one append; with a ``binary``
        input transport, the audio as bytes messages (split the same way)."""
        step = APPEND_LIMIT
        if self.input_transport == "binary":
            return [bytes(audio[at : at + step]) for at in range(0, len(audio), step)]
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
