"""``xai_realtime``'s code: the shared Realtime API session
(:mod:`polystream.dialects._realtime_api`) bound to xAI's name, descriptor and
differences, and the server the emulator runs (see :mod:`.server`).

What differs from OpenAI's Realtime API:

* binary messages: with ``audio.output.transport: "binary"`` the server sends output
  audio as raw bytes messages (read as ``DataDelta``s of the running response's audio);
  with ``audio.input.transport: "binary"``, :meth:`Session.send_audio` gives bytes
  messages;
* PCM at any rate (``{"type": "audio/pcm", "rate": 16000}``, 8 to 48 kHz);
* ``ping`` keep-alives; ``conversation.item.input_audio_transcription.updated``, the
  input transcript so far;
* ``session.update`` has no session ``type``; a session may opt into resumption
  (``resumption: {"enabled": true}``); :meth:`Session.force_message` has the voice say a
  line verbatim;
* function-call messages may name only their ``call_id``; a ``response.done`` may state
  its usage beside the response;
* no ``conversation.item.retrieve``, no ``output_audio_buffer.clear``; the session lives
  at most 120 minutes (an ``error`` of type ``max_duration`` or ``timeout``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from polystream.dialects._realtime.intents import Configure, Respond
from polystream.dialects._realtime_api.perform import format_object
from polystream.dialects._realtime_api.session import RealtimeAPISession
from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects.xai_realtime.server import XAIRealtimeServer
from polystream.dialects.xai_realtime.spec import SPEC
from polystream.dialects.xai_realtime.wire import SERVER_MESSAGES
from polystream.wire.ws import dump_message

__all__ = ["Server", "Session"]


class Session(RealtimeAPISession):
    """An xAI Voice Agent WebSocket session (see
    :class:`~polystream.dialects._realtime_api.session.RealtimeAPISession`)."""

    dialect: ClassVar[str] = "xai_realtime"
    spec: ClassVar[SocketSpec] = SPEC
    binary: ClassVar[Literal["json", "data"]] = "data"
    server_messages: ClassVar[frozenset[str]] = SERVER_MESSAGES
    expiry: ClassVar[frozenset[str]] = frozenset({"session_expired", "max_duration", "timeout"})
    route_to_running: ClassVar[bool] = True
    session_type: ClassVar[str | None] = None

    pcm_rates: ClassVar[tuple[int, int]] = (8000, 48000)
    hosted_tools: ClassVar[frozenset[str]] = frozenset(
        {"web_search", "x_search", "file_search", "mcp"}
    )
    takes_images: ClassVar[bool] = False

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._resumption = False

    def session_fields(self, config: Configure) -> dict[str, Any]:
        """xAI's session shape: turn detection at the top, no modalities (each reply
        states its own)."""
        return {
            "instructions": config.instructions,
            "tools": self._tools(config),
            "turn_detection": {"type": "server_vad"} if config.turn_detection else None,
            "audio": {
                "input": {"format": format_object(self.input_format)},
                "output": {"format": format_object(self.output_format)},
            },
        }

    def response_fields(self, respond: Respond) -> dict[str, Any]:
        fields = super().response_fields(respond)
        fields["modalities"] = list(fields.pop("output_modalities"))
        return fields

    def say(self, text: str) -> list[str]:
        return self.force_message(text)

    def configure(
        self,
        session: dict[str, Any] | None = None,
        *,
        resumption: bool | None = None,
        **fields: Any,
    ) -> list[str]:
        """``session.update``: ``session`` then ``fields`` (``instructions``, ``voice``,
        ``turn_detection``, ``audio``, ``tools``, ``reasoning``, ...), and
        ``resumption: {"enabled": ...}`` when ``resumption`` is given (the server then
        keeps the conversation's turns and replays them to a session that resumes it).
        An ``audio.input.transport`` of ``binary`` makes :meth:`send_audio` give bytes
        messages from then on."""
        if resumption is not None:
            fields["resumption"] = {"enabled": resumption}
        return super().configure(session, **fields)

    @property
    def resumption(self) -> bool:
        """Whether the session keeps its turns for resumption (``resumption.enabled``),
        as last configured or stated by the server."""
        return self._resumption

    def _configured(self, session: dict[str, Any]) -> None:
        super()._configured(session)
        resumption = session.get("resumption")
        if isinstance(resumption, dict) and isinstance(resumption.get("enabled"), bool):
            self._resumption = resumption["enabled"]
            cid = resumption.get("conversation_id")
            if isinstance(cid, str):
                self.conversation_id = cid

    def force_message(
        self, text: str, *, interruptible: bool | None = None, voice: str | None = None
    ) -> list[str]:
        """A ``conversation.item.create`` of a ``force_message``: the voice says ``text``
        verbatim, as an assistant turn the server runs itself (``response.created`` to
        ``response.done``; no ``response.create``). ``interruptible=False`` drops the
        caller's audio until it is played; ``voice`` overrides the session's for it."""
        item: dict[str, Any] = {
            "type": "force_message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        }
        if interruptible is not None:
            item["interruptible"] = interruptible
        if voice is not None:
            item["voice"] = voice
        return [dump_message({"type": "conversation.item.create", "item": item})]

    def retrieve_item(self, item_id: str) -> list[str]:
        """xAI has no ``conversation.item.retrieve``.

        Raises:
            LocalProtocolError: Always.
        """
        raise self._unsupported("conversation.item.retrieve")

    def clear_output_audio(self) -> list[str]:
        """xAI has no ``output_audio_buffer.clear``.

        Raises:
            LocalProtocolError: Always.
        """
        raise self._unsupported("output_audio_buffer.clear")


Server = XAIRealtimeServer
"""The family's sans-I/O server (the emulator's side of a connection)."""
