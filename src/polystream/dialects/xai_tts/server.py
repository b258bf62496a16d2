"""The xAI text-to-speech server, sans-I/O: what the emulator runs for one ``xai_tts``
connection.

The query configures the connection: ``codec`` (``pcm``, the default; ``wav``,
``mulaw``, ``alaw``; ``mp3`` is not emulated), ``sample_rate`` (8000 to 48000; by
default 24000 for ``pcm`` and ``wav``, 8000 for G.711) and ``language`` (required). The
client's ``text.delta`` messages gather the text; ``text.done`` asks for it to be
spoken, an utterance answered after those before it: its audio in ``audio.delta``
messages (``delta``: base64 of the codec's bytes; a ``wav`` utterance is one WAV file,
its header in the first delta), then ``audio.done``. An utterance without text is
answered ``audio.done`` alone. ``text.clear`` drops the text gathered, the utterances
waiting and the one being spoken, and is answered ``audio.clear``. A failure is the
``error`` message, ``{"type": "error", "message"}``.

What the audio says is the replier's: it gets a :class:`~polystream.dialects._realtime.
server.Turn` whose ``user_text`` is the utterance and whose ``audio`` is the format to
speak in (PCM16 for ``pcm`` and ``wav``).
"""

from __future__ import annotations

import base64
from typing import Any, ClassVar, Final

from polystream.audio.formats import AudioFormat
from polystream.audio.wav import write_wav
from polystream.dialects._realtime.server import Outbound, Refusal, ReplyRun, Turn
from polystream.dialects._xai_voice.common import ENCODINGS
from polystream.dialects._xai_voice.server import VoiceRun, VoiceServer
from polystream.events import DataDelta, Event

__all__ = ["SpeechRun", "TTSServer"]

_CODECS: Final = ("pcm", "wav", "mulaw", "alaw")
_RATES: Final = (8000, 48000)
_DONE: Final = '{"type":"audio.done"}'
_CLEARED: Final = '{"type":"audio.clear"}'


class SpeechRun(VoiceRun):
    """An utterance's audio, written message by message.

    Args:
        response_id: An id for the run.
        events: The audio in unified terms (an ``audio`` block of raw bytes).
        tag: Handed back to whoever drives the run.
        wav: The format of a ``wav`` utterance (its first delta carries the header).
    """

    def __init__(
        self, response_id: str, events: list[Event], tag: Any, *, wav: AudioFormat | None
    ) -> None:
        if wav is not None:
            events = _as_wav(events, wav)
        super().__init__(response_id, events, tag)

    def _render(self, event: Event) -> None:
        if type(event) is DataDelta:
            self._send({"type": "audio.delta", "delta": event.delta}, audio=True)

    def _complete(self) -> None:
        self._send({"type": "audio.done"})
        self._ended = True


class TTSServer(VoiceServer):
    """One text-to-speech connection, served (see the module docstring)."""

    family: ClassVar[str] = "xai_tts"
    client_messages: ClassVar[tuple[str, ...]] = ("text.delta", "text.done", "text.clear")

    codec: str
    """The codec the query names (``pcm`` by default)."""
    output_format: AudioFormat
    """The format the audio is made in (PCM16 for ``pcm`` and ``wav``)."""

    def _configure(self) -> str | None:
        self._text: list[str] = []
        query = self.query
        codec = self.codec = query.get("codec", "pcm")
        rate = 8000 if codec in ("mulaw", "alaw") else 24000
        self.output_format = AudioFormat("pcm16", rate)
        if codec not in _CODECS:
            known = ", ".join(_CODECS)
            return f"Invalid codec '{codec}': the emulator writes {known}."
        given = query.get("sample_rate")
        if given is not None:
            if not given.isdigit() or not _RATES[0] <= int(given) <= _RATES[1]:
                return f"Invalid sample_rate '{given}': {_RATES[0]} to {_RATES[1]}."
            rate = int(given)
        encoding = "pcm16" if codec in ("pcm", "wav") else ENCODINGS[codec]
        self.output_format = AudioFormat(encoding, rate)
        if not query.get("language"):
            return "Missing required query parameter: 'language'."
        return None

    # -- messages ----------------------------------------------------------------------

    def _on_text_delta(self, value: dict[str, Any]) -> list[Outbound]:
        delta = value.get("delta")
        if not isinstance(delta, str):
            return [self.error(400, "text.delta needs a string 'delta'.")]
        self._text.append(delta)
        return []

    def _on_text_done(self, value: dict[str, Any]) -> list[Outbound]:
        text = "".join(self._text)
        self._text.clear()
        return self._ask(text)

    def _on_text_clear(self, value: dict[str, Any]) -> list[Outbound]:
        self._text.clear()
        self._drop()
        return [_CLEARED]

    # -- utterances --------------------------------------------------------------------

    def _start(self, request: Any) -> str | ReplyRun:
        text = str(request)
        if not text:
            return _DONE
        answer = self._replier(Turn(model="", user_text=text, audio=self.output_format))
        if isinstance(answer, Refusal):
            return self.error(answer.status, answer.message)
        wav = self.output_format if self.codec == "wav" else None
        return SpeechRun(self._ids.make("tts_"), answer.events, answer.tag, wav=wav)


def _as_wav(events: list[Event], fmt: AudioFormat) -> list[Event]:
    """The audio deltas as one WAV file: the same pieces, the header before the first."""
    at = next((n for n, event in enumerate(events) if type(event) is DataDelta), None)
    if at is None:
        return events
    pcm = b"".join(base64.b64decode(e.delta) for e in events if type(e) is DataDelta)
    whole = write_wav(pcm, fmt)
    first = events[at]
    assert type(first) is DataDelta
    data = whole[: len(whole) - len(pcm)] + base64.b64decode(first.delta)
    out = list(events)
    out[at] = DataDelta(index=first.index, delta=base64.b64encode(data).decode("ascii"))
    return out
