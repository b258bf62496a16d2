"""The Realtime API session's side of a bridge: the intents of a client of another
family (:mod:`polystream.dialects._realtime.intents`) as Realtime client messages.

A family binds what differs (:class:`Performs`' class attributes and hooks): the rates
its PCM takes, its provider-run tools, whether it takes images, its session's shape,
how a reply asks for its modalities, and whether it can say a text verbatim.
"""

from __future__ import annotations

import base64
from typing import Any, ClassVar

from polystream.audio.formats import PCM16_24K, AudioFormat
from polystream.dialects._realtime.intents import (
    AddMessage,
    AddToolCall,
    Cancel,
    ClearAudio,
    CommitAudio,
    Configure,
    DeleteItem,
    InputAudio,
    InputVideo,
    Intent,
    Respond,
    ToolOutput,
    Truncate,
)
from polystream.errors import LocalProtocolError

__all__ = ["Performs", "format_object"]


def format_object(fmt: AudioFormat) -> dict[str, Any]:
    """The Realtime ``format`` object of an audio format."""
    if fmt.encoding == "pcmu":
        return {"type": "audio/pcmu"}
    if fmt.encoding == "pcma":
        return {"type": "audio/pcma"}
    return {"type": "audio/pcm", "rate": fmt.rate}


class Performs:
    """:meth:`perform` for a Realtime API session (mixed into it).

    Class attributes:
        pcm_rates: The lowest and highest rate its ``audio/pcm`` takes.
        hosted_tools: The provider-run tool types it takes (``mcp``, ``web_search``).
        takes_images: Its messages may hold images.
    """

    dialect: ClassVar[str]
    pcm_rates: ClassVar[tuple[int, int]] = (24000, 24000)
    hosted_tools: ClassVar[frozenset[str]] = frozenset({"mcp"})
    takes_images: ClassVar[bool] = True
    input_format: AudioFormat
    output_format: AudioFormat

    # (the session's commands, from Commands)
    configure: Any
    send_audio: Any
    append_item: Any
    create_response: Any
    cancel: Any
    truncate: Any
    tool_result: Any
    commit_audio: Any
    clear_audio: Any
    delete_item: Any

    def perform(self, intent: Intent) -> list[str | bytes]:
        """The messages that carry ``intent`` (see
        :meth:`polystream.dialects._realtime.session.RealtimeSession.perform`).

        Raises:
            LocalProtocolError: The family cannot carry it (an image to a family
                without image input, a tool it does not run, a verbatim line).
        """
        if isinstance(intent, Configure):
            return list(self._perform_configure(intent))
        if isinstance(intent, InputAudio):
            return list(self.send_audio(intent.data))
        if isinstance(intent, AddMessage):
            return list(self._perform_message(intent))
        if isinstance(intent, ToolOutput):
            return list(self.tool_result(intent.call_id, intent.output, respond=False))
        if isinstance(intent, AddToolCall):
            item: dict[str, Any] = {
                "type": "function_call",
                "call_id": intent.call_id,
                "name": intent.name,
                "arguments": intent.arguments,
            }
            return list(self.append_item(item))
        if isinstance(intent, Respond):
            return list(self._perform_respond(intent))
        if isinstance(intent, Cancel):
            return list(self.cancel(intent.response_id))
        if isinstance(intent, Truncate):
            if intent.item_id is None:
                return []
            return list(self.truncate(intent.item_id, intent.audio_end_ms))
        if isinstance(intent, CommitAudio):
            return list(self.commit_audio())
        if isinstance(intent, ClearAudio):
            return list(self.clear_audio())
        if isinstance(intent, DeleteItem):
            return list(self.delete_item(intent.item_id))
        if isinstance(intent, InputVideo):
            raise LocalProtocolError(f"{self.dialect} takes no video input", dialect=self.dialect)
        raise LocalProtocolError(
            f"{self.dialect} cannot carry {type(intent).__name__}", dialect=self.dialect
        )

    # -- what a family changes ---------------------------------------------------------

    def session_fields(self, config: Configure) -> dict[str, Any]:
        """The ``session.update`` fields of a configuration (the GA shape; its audio
        formats are :attr:`input_format` and :attr:`output_format`, set before)."""
        modality = "audio" if "audio" in config.modalities else "text"
        return {
            "instructions": config.instructions,
            "tools": self._tools(config),
            "output_modalities": [modality],
            "audio": {
                "input": {
                    "format": format_object(self.input_format),
                    "turn_detection": {"type": "server_vad"} if config.turn_detection else None,
                },
                "output": {"format": format_object(self.output_format)},
            },
        }

    def response_fields(self, respond: Respond) -> dict[str, Any]:
        """The ``response`` object of a ``response.create`` (the GA shape)."""
        fields: dict[str, Any] = {
            "output_modalities": ["audio" if "audio" in respond.modalities else "text"]
        }
        if respond.out_of_band:
            fields["conversation"] = "none"
        if respond.instructions is not None:
            fields["instructions"] = respond.instructions
        return fields

    def say(self, text: str) -> list[str]:
        """A reply that says ``text`` verbatim.

        Raises:
            LocalProtocolError: The family has none (OpenAI's).
        """
        raise LocalProtocolError(
            f"{self.dialect} cannot say a text verbatim (a forced message)", dialect=self.dialect
        )

    # -- the intents -------------------------------------------------------------------

    def _fit(self, fmt: AudioFormat | None) -> AudioFormat:
        """The format closest to ``fmt`` the family takes (the bridge converts)."""
        if fmt is None:
            return PCM16_24K
        low, high = self.pcm_rates
        if fmt.channels != 1:
            return PCM16_24K
        if fmt.encoding in ("pcmu", "pcma") and fmt.rate == 8000:
            return fmt
        if fmt.encoding == "pcm16" and low <= fmt.rate <= high:
            return fmt
        return PCM16_24K

    def _perform_configure(self, config: Configure) -> list[str]:
        self.input_format = self._fit(config.input_audio)
        self.output_format = self._fit(config.output_audio)
        fields = self.session_fields(config)
        return list(self.configure(fields))

    def _tools(self, config: Configure) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = [{"type": "function", **tool} for tool in config.tools]
        for tool in config.hosted:
            kind = tool.get("type")
            if kind not in self.hosted_tools:
                raise LocalProtocolError(
                    f"{self.dialect} does not run the {kind!r} tool", dialect=self.dialect
                )
            tools.append(dict(tool))
        return tools

    def _perform_message(self, message: AddMessage) -> list[str]:
        if message.images and not self.takes_images:
            raise LocalProtocolError(f"{self.dialect} takes no image input", dialect=self.dialect)
        kind = "output_text" if message.role == "assistant" else "input_text"
        content: list[dict[str, Any]] = []
        if message.text:
            content.append({"type": kind, "text": message.text})
        content += [{"type": "input_image", "image_url": url} for url in message.images]
        if message.audio:
            audio = base64.b64encode(message.audio).decode("ascii")
            content.append({"type": "input_audio", "audio": audio})
        item: dict[str, Any] = {"type": "message", "role": message.role, "content": content}
        if message.item_id is not None:
            item["id"] = message.item_id
        return list(self.append_item(item))

    def _perform_respond(self, respond: Respond) -> list[str]:
        if respond.say is not None:
            return self.say(respond.say)
        return list(self.create_response(**self.response_fields(respond)))
