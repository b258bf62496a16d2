"""The Gemini Live client's messages, as the session's commands (sans-I/O: each
returns the JSON texts to send, in order).

The ``setup`` is the connection's first message and is sent once: :meth:`Commands.
configure` writes it; a command given before it writes the setup first (the model the
session was made with, nothing else configured). A second ``configure`` is an error.

* :meth:`~Commands.send_text`: a ``clientContent`` user turn (``turnComplete: true``
  asks for the reply), or ``realtimeInput.text`` with ``realtime=True``;
* :meth:`~Commands.send_audio`: ``realtimeInput.audio``, PCM16 at 16 kHz
  (``audio/pcm;rate=16000``); audio at another rate is resampled (the ``realtime``
  extra) unless ``resample=False`` (then its rate is stated as it is);
* :meth:`~Commands.activity_start`, :meth:`~Commands.activity_end` (manual voice
  activity), :meth:`~Commands.audio_stream_end`;
* :meth:`~Commands.tool_result`: ``toolResponse.functionResponses`` with the call's
  ``id`` and its ``name`` (the name the ``toolCall`` gave, unless given);
* :meth:`~Commands.create_response`: ``clientContent`` ``turnComplete: true`` (the turns
  sent so far answered).
"""

from __future__ import annotations

import base64
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Final

from polystream.audio.formats import PCM16_16K, AudioFormat
from polystream.dialects._realtime.session import RealtimeSession
from polystream.errors import LocalProtocolError

__all__ = ["INPUT_RATE", "Commands", "model_name"]

INPUT_RATE: Final = 16000
"""The rate of the input audio the Live API takes (PCM16, mono)."""

_MAX_CALLS: Final = 1024


def model_name(model: str) -> str:
    """The model as the setup names it: ``models/<name>`` (a name with a ``/`` is kept,
    as the SDK's ``t_model`` does)."""
    return model if "/" in model else f"models/{model}"


class Commands(RealtimeSession):
    """The commands of a Gemini Live session (see the module docstring).

    Attributes:
        model: The model of the setup.
        setup: The setup sent (the ``setup`` object), once written.
    """

    def __init__(self, *, model: str | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.model = model
        self.setup: dict[str, Any] | None = None
        self._called: OrderedDict[str, str] = OrderedDict()  # tool call id -> name

    def _first(self) -> list[str]:
        """The setup, when none was written yet (a command before :meth:`configure`)."""
        return [] if self.setup is not None else self.configure()

    def configure(
        self,
        setup: Mapping[str, Any] | None = None,
        *,
        model: str | None = None,
        instructions: str | None = None,
        resumption: bool | None = None,
        transparent: bool | None = None,
        handle: str | None = None,
        **fields: Any,
    ) -> list[str]:
        """The ``setup`` message: ``setup`` then ``fields`` as the wire names them
        (``generationConfig``, ``tools``, ``realtimeInputConfig``,
        ``inputAudioTranscription``, ...), the model (``models/`` added),
        ``instructions`` as the ``systemInstruction``, and ``sessionResumption``
        when ``resumption`` (with ``transparent``, or a ``handle`` to resume).

        Raises:
            LocalProtocolError: A setup was written already, or no model is known.
        """
        if self.setup is not None:
            raise LocalProtocolError(
                "the setup is sent once, as the connection's first message", dialect=self.dialect
            )
        body: dict[str, Any] = dict(setup or {})
        body.update(fields)
        chosen = model or body.get("model") or self.model
        if not isinstance(chosen, str) or not chosen:
            raise LocalProtocolError("the setup needs a model", dialect=self.dialect)
        self.model = chosen.removeprefix("models/")
        body["model"] = model_name(chosen)
        if instructions is not None:
            body["systemInstruction"] = {"parts": [{"text": instructions}]}
        if resumption or transparent or handle is not None:
            config = dict(body.get("sessionResumption") or {})
            if transparent is not None:
                config["transparent"] = transparent
            if handle is not None:
                config["handle"] = handle
            body["sessionResumption"] = config
        self.setup = body
        return [self._message({"setup": body})]

    def send_text(
        self, text: str, *, turn_complete: bool = True, realtime: bool = False, role: str = "user"
    ) -> list[str]:
        """A user turn of ``text``: ``clientContent`` (``turnComplete`` asks for the
        reply), or with ``realtime`` ``realtimeInput.text`` (answered as speech is)."""
        out = self._first()
        if realtime:
            out.append(self._message({"realtimeInput": {"text": text}}))
            return out
        content = {
            "turns": [{"role": role, "parts": [{"text": text}]}],
            "turnComplete": turn_complete,
        }
        out.append(self._message({"clientContent": content}))
        return out

    def append_item(
        self, turns: Sequence[Mapping[str, Any]], *, turn_complete: bool = False
    ) -> list[str]:
        """``clientContent`` of whole ``turns`` (``Content`` objects: ``role`` and
        ``parts``), added to the conversation."""
        out = self._first()
        body = {"turns": [dict(turn) for turn in turns], "turnComplete": turn_complete}
        out.append(self._message({"clientContent": body}))
        return out

    def send_audio(
        self, audio: bytes, *, rate: int = INPUT_RATE, resample: bool = True
    ) -> list[str]:
        """``realtimeInput.audio`` of PCM16 mono ``audio`` at ``rate`` Hz: resampled to
        16 kHz first, unless ``resample`` is False."""
        out = self._first()
        if rate != INPUT_RATE and resample:
            from polystream.audio.convert import convert

            audio = convert(audio, AudioFormat("pcm16", rate), PCM16_16K)
            rate = INPUT_RATE
        blob = {
            "data": base64.b64encode(audio).decode("ascii"),
            "mimeType": f"audio/pcm;rate={rate}",
        }
        out.append(self._message({"realtimeInput": {"audio": blob}}))
        return out

    def activity_start(self) -> list[str]:
        """``realtimeInput.activityStart`` (automatic activity detection disabled)."""
        return [*self._first(), self._message({"realtimeInput": {"activityStart": {}}})]

    def activity_end(self) -> list[str]:
        """``realtimeInput.activityEnd``."""
        return [*self._first(), self._message({"realtimeInput": {"activityEnd": {}}})]

    def audio_stream_end(self) -> list[str]:
        """``realtimeInput.audioStreamEnd`` (the microphone is off: flush)."""
        return [*self._first(), self._message({"realtimeInput": {"audioStreamEnd": True}})]

    def tool_result(
        self,
        call_id: str,
        output: Any,
        *,
        name: str | None = None,
        scheduling: str | None = None,
    ) -> list[str]:
        """``toolResponse`` of one call: its ``id``, its ``name`` (as the ``toolCall``
        named it, unless given) and the ``response`` (``output``: an object as it is,
        anything else as ``{"output": output}``); ``scheduling`` (``SILENT``,
        ``WHEN_IDLE``, ``INTERRUPT``) for a non-blocking call.

        Raises:
            LocalProtocolError: No name is known for the call.
        """
        name = name or self._called.get(call_id)
        if name is None:
            raise LocalProtocolError(
                f"no tool call {call_id!r} was read: give its name", dialect=self.dialect
            )
        response = dict(output) if isinstance(output, Mapping) else {"output": output}
        entry: dict[str, Any] = {"id": call_id, "name": name, "response": response}
        if scheduling is not None:
            entry["scheduling"] = scheduling
        message = {"toolResponse": {"functionResponses": [entry]}}
        return [*self._first(), self._message(message)]

    def create_response(self) -> list[str]:
        """``clientContent`` ``turnComplete: true``: answer the turns sent so far."""
        return [*self._first(), self._message({"clientContent": {"turnComplete": True}})]

    def _remember(self, call_id: str, name: str) -> None:
        self._called[call_id] = name
        while len(self._called) > _MAX_CALLS:
            self._called.popitem(last=False)
