"""The Gemini Live session's side of a bridge: the intents of a client of another family
(:mod:`polystream.dialects._realtime.intents`) as Live client messages.

* The configuration is the ``setup``, sent once as the connection's first message: a
  :class:`~polystream.dialects._realtime.intents.Configure` is kept, and the setup is
  written from the last one kept when the first other message goes. A configuration
  that changes after it (other instructions, tools, modalities or turn detection) is
  refused: the Live API cannot change a session's setup.
* Audio goes as ``realtimeInput.audio`` at 16 kHz (the bridge converts); without
  automatic activity detection, the first audio of a turn is preceded by
  ``activityStart`` and a commit is ``activityEnd``, which asks for the reply itself.
* A reply is asked by ``clientContent`` ``turnComplete: true``, unless what came before
  asked for it already (``activityEnd``, a ``toolResponse``).
* Refused: a reply out of band, a line said verbatim, instructions for one reply,
  deleting a turn, clearing audio already sent, provider-run tools, images given by
  URL. Cancelling and truncating send nothing: the Live API has no cancel (the
  bridge cuts the reply on the client's side and drops the rest) and keeps no audio
  positions.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from polystream.audio.formats import PCM16_16K, PCM16_24K, AudioFormat
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
from polystream.dialects.gemini_live.commands import INPUT_RATE, Commands
from polystream.errors import LocalProtocolError

__all__ = ["Performs"]


class Performs(Commands):
    """:meth:`perform` for the Gemini Live session."""

    _turn: Any  # (the session's model turn being read)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._config: Configure | None = None  # kept until the setup is written
        self._sent_config: Configure | None = None  # the setup's
        self._speaking = False  # an activityStart was sent, not its activityEnd
        self._answering = False  # the reply is asked already

    @property
    def audio_formats(self) -> tuple[AudioFormat | None, AudioFormat | None]:
        return PCM16_16K, PCM16_24K

    def paused_for_tools(self, stream: int) -> bool:
        turn = self._turn
        return turn is not None and turn.stream == stream and turn.tool_calls

    def perform(self, intent: Intent) -> list[str | bytes]:
        if isinstance(intent, Configure):
            return list(self._perform_configure(intent))
        self._check(intent)  # (a refusal sends nothing, not even the setup)
        out: list[str | bytes] = list(self._setup())
        if isinstance(intent, InputAudio):
            if self._manual and not self._speaking:
                out += self.activity_start()
                self._speaking = True
            out += self.send_audio(intent.data, rate=INPUT_RATE, resample=False)
        elif isinstance(intent, CommitAudio):
            if self._manual:
                if not self._speaking:
                    return out
                self._speaking = False
                out += self.activity_end()
            else:
                out += self.audio_stream_end()
            self._answering = True
        elif isinstance(intent, AddMessage):
            out += self.append_item([self._content(intent)])
        elif isinstance(intent, AddToolCall):
            call = {"id": intent.call_id, "name": intent.name, "args": _object(intent.arguments)}
            out += self.append_item([{"role": "model", "parts": [{"functionCall": call}]}])
        elif isinstance(intent, ToolOutput):
            out += self.tool_result(intent.call_id, _object(intent.output), name=intent.name)
            self._answering = True
        elif isinstance(intent, Respond):
            out += self._perform_respond(intent)
        elif isinstance(intent, InputVideo):
            blob = {
                "data": base64.b64encode(intent.data).decode("ascii"),
                "mimeType": intent.mime_type,
            }
            out.append(self._message({"realtimeInput": {"video": blob}}))
        elif isinstance(intent, Cancel | Truncate):
            pass  # (see the module docstring)
        return out

    def _check(self, intent: Intent) -> None:
        """Refuse what the Live API cannot take (see the module docstring)."""
        if isinstance(intent, DeleteItem):
            raise self._cannot("delete a turn of the conversation")
        if isinstance(intent, ClearAudio):
            raise self._cannot("clear input audio it was sent")
        if isinstance(intent, Respond):
            if intent.out_of_band:
                raise self._cannot('give a reply out of the conversation (conversation: "none")')
            if intent.say is not None:
                raise self._cannot("say a text verbatim (a forced message)")
            if intent.instructions is not None:
                raise self._cannot("take instructions for one reply")
        if isinstance(intent, AddMessage):
            for url in intent.images:
                head = url.partition(",")[0]
                if not (head.startswith("data:") and head.endswith(";base64")):
                    raise self._cannot("take an image by URL (only its data)")

    @property
    def _manual(self) -> bool:
        config = self._sent_config or self._config
        return config is not None and not config.turn_detection

    def _perform_configure(self, config: Configure) -> list[str]:
        if config.hosted:
            kinds = ", ".join(repr(tool.get("type")) for tool in config.hosted)
            raise LocalProtocolError(
                f"{self.dialect} does not run the {kinds} tool", dialect=self.dialect
            )
        if self.setup is None:
            self._config = config
            return []
        sent = self._sent_config
        same = sent is not None and (
            sent.instructions,
            sent.tools,
            sent.modalities,
            sent.turn_detection,
        ) == (config.instructions, config.tools, config.modalities, config.turn_detection)
        if not same:
            raise LocalProtocolError(
                f"{self.dialect} takes its configuration once, in the setup: its "
                "instructions, tools, modalities and turn detection cannot change",
                dialect=self.dialect,
            )
        return []

    def _setup(self) -> list[str]:
        """The setup, when none was written yet (from the configuration kept)."""
        if self.setup is not None:
            return []
        config = self._config or Configure()
        self._sent_config = config
        self._config = None
        fields: dict[str, Any] = {
            "generationConfig": {
                "responseModalities": ["AUDIO" if "audio" in config.modalities else "TEXT"]
            }
        }
        if config.tools:
            fields["tools"] = [{"functionDeclarations": [dict(tool) for tool in config.tools]}]
        if not config.turn_detection:
            fields["realtimeInputConfig"] = {"automaticActivityDetection": {"disabled": True}}
        if "audio" in config.modalities:
            fields["outputAudioTranscription"] = {}
        return self.configure(instructions=config.instructions or None, **fields)

    def _content(self, message: AddMessage) -> dict[str, Any]:
        parts: list[dict[str, Any]] = []
        if message.text:
            parts.append({"text": message.text})
        for url in message.images:
            head, _, data = url.partition(",")
            mime = head[len("data:") : -len(";base64")]
            parts.append({"inlineData": {"mimeType": mime, "data": data}})
        if message.audio:
            audio = base64.b64encode(message.audio).decode("ascii")
            parts.append(
                {"inlineData": {"mimeType": f"audio/pcm;rate={INPUT_RATE}", "data": audio}}
            )
        role = "model" if message.role == "assistant" else "user"
        if message.role == "system":
            parts = [{"text": message.text}]
        return {"role": role, "parts": parts}

    def _perform_respond(self, respond: Respond) -> list[str]:
        if self._answering:
            self._answering = False
            return []
        return self.create_response()

    def _cannot(self, what: str) -> LocalProtocolError:
        return LocalProtocolError(f"{self.dialect} cannot {what}", dialect=self.dialect)


def _object(text: str) -> Any:
    """A tool's arguments or output as the Live API takes them: the JSON object it
    holds, else the text."""
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text
    return value if isinstance(value, dict) else text
