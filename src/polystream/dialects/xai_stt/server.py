"""The xAI speech-to-text server, sans-I/O: what the emulator runs for one ``xai_stt``
connection.

The query configures the connection (``sample_rate``: one of
:data:`~polystream.dialects.xai_stt.query.SAMPLE_RATES`, 16000 by default;
``encoding``: ``pcm``, ``mulaw``, ``alaw``; ``multichannel`` and ``channels``;
``interim_results``); the connection opens with ``transcript.created``. The client's
bytes messages are audio, counted (not listened to); ``audio.done`` ends a turn, whose
transcript comes after those before it:

* with ``interim_results=true``, a ``transcript.partial`` with ``is_final: false`` for
  each piece of the transcript, the text so far;
* a ``transcript.partial`` with ``is_final`` and ``speech_final`` true: the whole text,
  its ``words`` spread evenly over the turn's audio;
* ``transcript.done`` (``text: ""``: the utterance's end covered it all, ``duration``).

``start`` is where the turn's audio begins among all the audio of the connection,
``duration`` its length (seconds), ``channel_index`` 0. A turn without audio, or whose
transcript is empty, is answered ``transcript.done`` alone. A failure is the ``error``
message.

What the transcript says is the replier's: it gets a :class:`~polystream.dialects.
_realtime.server.Turn` whose ``heard`` is the turn's audio in seconds.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

from polystream.audio.formats import AudioFormat
from polystream.dialects._realtime.server import Outbound, Refusal, ReplyRun, Turn
from polystream.dialects._xai_voice.common import ENCODINGS
from polystream.dialects._xai_voice.server import VoiceRun, VoiceServer
from polystream.dialects.xai_stt.query import SAMPLE_RATES, input_format
from polystream.events import Event, TextDelta
from polystream.wire.ws import dump_message

__all__ = ["STTServer", "TranscriptRun"]

_CREATED: Final = '{"type":"transcript.created"}'


class TranscriptRun(VoiceRun):
    """A turn's transcript, written message by message (see the module docstring).

    Args:
        response_id: An id for the run.
        events: The transcript in unified terms (its text deltas).
        tag: Handed back to whoever drives the run.
        start: Where the turn's audio begins, in seconds.
        duration: The turn's audio, in seconds.
        interim: Send interim results.
    """

    def __init__(
        self,
        response_id: str,
        events: list[Event],
        tag: Any,
        *,
        start: float,
        duration: float,
        interim: bool,
    ) -> None:
        super().__init__(response_id, events, tag)
        self.start = start
        self.duration = duration
        self.interim = interim
        self._text: list[str] = []
        self._whole = "".join(e.delta for e in events if type(e) is TextDelta)

    def _render(self, event: Event) -> None:
        if type(event) is not TextDelta or not event.delta:
            return
        self._text.append(event.delta)
        if self.interim:
            so_far = "".join(self._text)
            share = len(so_far) / len(self._whole) if self._whole else 1.0
            self._partial(so_far, [], final=False, duration=self.duration * share)

    def _complete(self) -> None:
        text = "".join(self._text)
        if text:
            self._partial(text, self._words(text), final=True, duration=self.duration)
        self._send({"type": "transcript.done", "text": "", "duration": self.duration})
        self._ended = True

    def _partial(
        self, text: str, words: list[dict[str, Any]], *, final: bool, duration: float
    ) -> None:
        self._send(
            {
                "type": "transcript.partial",
                "text": text,
                "words": words,
                "is_final": final,
                "speech_final": final,
                "start": self.start,
                "duration": round(duration, 3),
                "channel_index": 0,
            }
        )

    def _words(self, text: str) -> list[dict[str, Any]]:
        words = text.split()
        step = self.duration / len(words) if words else 0.0
        return [
            {
                "word": word,
                "start": round(self.start + n * step, 3),
                "end": round(self.start + (n + 1) * step, 3),
            }
            for n, word in enumerate(words)
        ]


class STTServer(VoiceServer):
    """One speech-to-text connection, served (see the module docstring)."""

    family: ClassVar[str] = "xai_stt"
    client_messages: ClassVar[tuple[str, ...]] = ("audio.done",)
    input_format: AudioFormat
    """The format of the audio read (as the query states it)."""

    def _configure(self) -> str | None:
        self._heard = 0  # bytes of the turn's audio
        self._at = 0.0  # seconds of audio before the turn
        query = self.query
        self.interim = query.get("interim_results") == "true"
        rate = query.get("sample_rate", "16000")
        if not rate.isdigit() or int(rate) not in SAMPLE_RATES:
            rates = ", ".join(map(str, SAMPLE_RATES))
            return f"Invalid sample_rate '{rate}': one of {rates}."
        encoding = query.get("encoding", "pcm")
        if encoding not in ENCODINGS:
            return f"Invalid encoding '{encoding}': pcm, mulaw or alaw."
        channels = query.get("channels", "1")
        if query.get("multichannel") == "true" and not (
            channels.isdigit() and 2 <= int(channels) <= 8
        ):
            return f"Invalid channels '{channels}': 2 to 8 with multichannel."
        self.input_format = input_format(query)
        return None

    def open(self) -> list[Outbound]:
        return [_CREATED] if self.problem is None else super().open()

    def _on_bytes(self, data: bytes) -> list[Outbound]:
        self._heard += len(data)
        return []

    def _on_audio_done(self, value: dict[str, Any]) -> list[Outbound]:
        heard = self._heard
        self._heard = 0
        return self._ask(heard)

    def _start(self, request: Any) -> str | ReplyRun:
        start = round(self._at, 3)
        seconds = self.input_format.duration_ms(int(request)) / 1000
        self._at += seconds
        duration = round(seconds, 3)
        if not request:
            return dump_message({"type": "transcript.done", "text": "", "duration": duration})
        answer = self._replier(Turn(model="", heard=seconds))
        if isinstance(answer, Refusal):
            return self.error(answer.status, answer.message)
        return TranscriptRun(
            self._ids.make("stt_"),
            answer.events,
            answer.tag,
            start=start,
            duration=duration,
            interim=self.interim,
        )
