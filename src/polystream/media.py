"""The media of a reply: its audio, its images and its transcript, built from the blocks
the :class:`~polystream.accumulate.Accumulator` keeps.

* :class:`Audio`: the ``audio`` blocks of candidate 0 joined into one piece of audio
  (a speech stream's one block; Gemini's one block per chunk), with its format.
* :class:`Image`: one per ``image`` block of candidate 0: the final image (or the last
  partial one, if the final never came) and how many partial images came before it.
* :class:`Transcript`: the ``transcript`` blocks of candidate 0: text, timed segments,
  detected language.

Base64 is joined as bytes, never as text with padding inside: a block's data deltas
are decoded run by run (consecutive deltas are joined as text until their length is a
multiple of 4, so that deltas cut anywhere in one base64 text and deltas that are each
a padded base64 text of their own both decode right), and the bytes are concatenated.
:class:`DataParts` keeps a block's data as the base64 text it came in (about 4/3 of its
bytes) and decodes it once the block has ended, the first time a result asks; a final
:class:`~polystream.accumulate.Result` then holds the audio twice, as the blocks'
base64 ``data`` and as :attr:`Audio.data` bytes (a snapshot of a block still open
decodes what it has so far, each time).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from polystream.audio import media_of_type, pcm_duration, pcm_to_wav, sniff_audio
from polystream.errors import LocalProtocolError
from polystream.events import BlockEnd, BlockStart, DataDelta, MediaInfo, TranscriptSegment

__all__ = [
    "Audio",
    "DataParts",
    "Image",
    "MediaBlock",
    "Segment",
    "Transcript",
    "audio_of",
    "images_of",
    "join_base64",
    "transcript_of",
]

_NO_MEDIA: Final = MediaInfo()


def join_base64(parts: Iterable[str]) -> bytes:
    """The bytes of base64 text given in pieces: consecutive pieces are joined until
    their length is a multiple of 4, then decoded (padding inside a run is an error).

    Raises:
        ValueError: A run is not valid base64 (:class:`binascii.Error` is one).
    """
    out: list[bytes] = []
    run: list[str] = []
    size = 0
    for part in parts:
        run.append(part)
        size += len(part)
        if size % 4 == 0:
            out.append(base64.b64decode(run[0] if len(run) == 1 else "".join(run), validate=True))
            run = []
            size = 0
    if run:
        # Fewer characters than whole quanta: not base64 (b64decode says so).
        base64.b64decode("".join(run), validate=True)
    return out[0] if len(out) == 1 else b"".join(out)


class DataParts:
    """The data deltas of one block (see the module docstring).

    Attributes:
        parts: The base64 texts as they came (joined into one at the block's end when
            that is valid base64 of the whole).
        mime_type: The last media type a delta stated.
        partials: How many partial images (distinct ``partial`` indexes in a row) came.
        final: The last delta was final data (not a partial image).
        ended: The block ended.
        problem: Why the data is not base64, once :meth:`payload` found it is not.
    """

    __slots__ = (
        "_bytes",
        "_text",
        "ended",
        "final",
        "last_partial",
        "mime_type",
        "padded",
        "partials",
        "parts",
        "problem",
    )

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.padded = False  # a piece before the last ends in padding: text cannot join
        self.mime_type: str | None = None
        self.partials = 0
        self.last_partial: int | None = None
        self.final = False
        self.ended = False
        self.problem: str | None = None
        self._bytes: bytes | None = None
        self._text: str | None = None

    def add(self, event: DataDelta) -> None:
        """Take one data delta (``replace`` drops what came before)."""
        if event.replace:
            self.parts = [event.delta]
            self.padded = False
        else:
            parts = self.parts
            if parts and parts[-1][-1:] == "=":
                self.padded = True
            parts.append(event.delta)
        partial = event.partial
        if partial is not None and partial != self.last_partial:
            self.partials += 1
        self.final = partial is None
        self.last_partial = partial
        if event.mime_type is not None:
            self.mime_type = event.mime_type

    def end(self) -> None:
        """The block ended: no more deltas."""
        self.ended = True
        parts = self.parts
        if len(parts) > 1 and not self.padded:
            self.parts = ["".join(parts)]

    def text(self) -> str:
        """The data as one base64 text: the deltas' text when it is valid base64 of the
        whole, else the base64 of the decoded bytes (the text as it came when it is not
        base64 at all)."""
        if self._text is not None:
            return self._text
        parts = self.parts
        if not self.padded:
            text = parts[0] if len(parts) == 1 else "".join(parts)
        else:
            data = self.payload()
            text = "".join(parts) if data is None else base64.b64encode(data).decode("ascii")
        if self.ended:
            self._text = text
        return text

    def payload(self) -> bytes | None:
        """The decoded bytes, or None when the data is not base64 (``problem`` says
        why). Decoded once after the block has ended, on each call before."""
        if self._bytes is not None:
            return self._bytes
        if self.ended and self.problem is not None:
            return None
        try:
            data = join_base64(self.parts)
        except ValueError as exc:
            self.problem = f"its data is not base64 ({exc})"
            return None
        self.problem = None
        if self.ended:
            self._bytes = data
        return data


class MediaBlock(msgspec.Struct, kw_only=True):
    """What the builders read of one block (made by the accumulator)."""

    start: BlockStart
    data: DataParts | None
    complete: bool
    text: str | None = None
    end: BlockEnd | None = None
    segments: list[TranscriptSegment] = msgspec.field(default_factory=list)


class Audio(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The reply's audio: its ``audio`` blocks (candidate 0) joined.

    Blocks of another format than the first one's are left out; so is a block whose
    data is not base64 (``error`` names it).

    Fields:
        data: The audio bytes (base64 decoded, joined in block order).
        mime_type: The media type, as the provider states it.
        format: Its format (``pcm``, ``mp3``, ``wav``, ``opus``, ``aac``, ``flac``); when
            the stream states none, the one the bytes show (not for raw PCM).
        sample_rate: Samples per second, when stated (PCM).
        channels: Channels, when stated.
        blocks: The indexes of the blocks joined.
        complete: Every one of them ended.
        error: Why a block was left out.
    """

    data: bytes
    mime_type: str | None = None
    format: str | None = None
    sample_rate: int | None = None
    channels: int | None = None
    blocks: list[int] = msgspec.field(default_factory=list)
    complete: bool = True
    error: str | None = None

    @property
    def duration(self) -> float | None:
        """Seconds of PCM audio (16-bit samples), when its sample rate is known."""
        if self.format != "pcm" or not self.sample_rate:
            return None
        return pcm_duration(len(self.data), self.sample_rate, self.channels or 1)

    def wav(self) -> bytes:
        """The audio as a WAV file: PCM with the WAV header
        (:func:`~polystream.audio.pcm_to_wav`, mono when the channels are not stated),
        WAV as it is.

        Raises:
            LocalProtocolError: The audio is neither PCM with a known sample rate nor WAV.
        """
        if self.format == "wav":
            return self.data
        if self.format == "pcm" and self.sample_rate:
            return pcm_to_wav(self.data, sample_rate=self.sample_rate, channels=self.channels or 1)
        what = f"{self.format} audio" if self.format else "audio of an unknown format"
        if self.format == "pcm":
            what = "PCM audio without a sample rate"
        raise LocalProtocolError(f"{what} cannot be written as WAV")

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``decode --result`` (the bytes as base64)."""
        out: dict[str, Any] = {
            "mime_type": self.mime_type,
            "format": self.format,
            "sample_rate": self.sample_rate,
            "channels": self.channels,
            "bytes": len(self.data),
            "duration": self.duration,
            "blocks": list(self.blocks),
            "complete": self.complete,
            "data": base64.b64encode(self.data).decode("ascii"),
        }
        if self.error is not None:
            out["error"] = self.error
        return out


class Image(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One image of the reply (an ``image`` block of candidate 0).

    Fields:
        index: The block index.
        data: The image bytes: the final image, or the last partial one when the final
            never came (``final`` False); empty when the block has no data or it is not
            base64 (``error``).
        mime_type: The media type (``image/png``).
        format: Its format (``png``, ``jpeg``, ``webp``).
        size: The size, as the provider writes it (``1024x1024``).
        quality: The quality (``low``, ``medium``, ``high``).
        background: The background (``transparent``, ``opaque``).
        partial_images: How many partial images came before ``data``.
        final: ``data`` is the final image.
        error: Why ``data`` is empty although the block had data.
    """

    index: int
    data: bytes
    mime_type: str | None = None
    format: str | None = None
    size: str | None = None
    quality: str | None = None
    background: str | None = None
    partial_images: int = 0
    final: bool = False
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``decode --result`` (the bytes as base64)."""
        out: dict[str, Any] = {
            "index": self.index,
            "mime_type": self.mime_type,
            "format": self.format,
            "size": self.size,
            "quality": self.quality,
            "background": self.background,
            "partial_images": self.partial_images,
            "final": self.final,
            "bytes": len(self.data),
            "data": base64.b64encode(self.data).decode("ascii"),
        }
        if self.error is not None:
            out["error"] = self.error
        return out


class Segment(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A timed segment of a transcript (see :class:`~polystream.events.TranscriptSegment`).

    Fields:
        text: Its text.
        start: Its start, in seconds.
        end: Its end, in seconds.
        speaker: The speaker's label (diarized transcription).
        id: The provider's id for it.
    """

    text: str
    start: float | None = None
    end: float | None = None
    speaker: str | None = None
    id: str | None = None


class Transcript(msgspec.Struct, kw_only=True):
    """The reply's transcript: its ``transcript`` blocks (candidate 0).

    Fields:
        text: The text (the blocks' deltas, or the whole text a block restated at its
            end when no delta came), joined in block order.
        segments: The timed segments, in order.
        languages: The languages detected, as the stream states them in a transcript
            block's ``extra`` at its end or start: ``languages`` (codes, or objects
            with a ``code``) or ``language`` (one code).
        complete: Every transcript block ended.
    """

    text: str
    segments: list[Segment] = msgspec.field(default_factory=list)
    languages: list[str] = msgspec.field(default_factory=list)
    complete: bool = True

    @property
    def language(self) -> str | None:
        """The (first) language detected, or None."""
        return self.languages[0] if self.languages else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``decode --result``."""
        return {
            "text": self.text,
            "language": self.language,
            "languages": list(self.languages),
            "segments": [
                {
                    "id": s.id,
                    "start": s.start,
                    "end": s.end,
                    "speaker": s.speaker,
                    "text": s.text,
                }
                for s in self.segments
            ],
            "complete": self.complete,
        }


def _media(block: MediaBlock) -> MediaInfo:
    """A block's media: what its start states, completed from the media type its data
    deltas state."""
    stated = block.start.media or _NO_MEDIA
    mime_type = stated.mime_type
    if mime_type is None and block.data is not None:
        mime_type = block.data.mime_type
    parsed = media_of_type(mime_type)
    return MediaInfo(
        mime_type=mime_type,
        format=stated.format or parsed.format,
        sample_rate=stated.sample_rate or parsed.sample_rate,
        channels=stated.channels or parsed.channels,
        size=stated.size,
        quality=stated.quality,
        background=stated.background,
    )


def audio_of(blocks: list[MediaBlock]) -> Audio | None:
    """The :class:`Audio` of the ``audio`` blocks of candidate 0 (None: there is none)."""
    first: MediaInfo | None = None
    pieces: list[bytes] = []
    joined: list[int] = []
    complete = True
    errors: list[str] = []
    for block in blocks:
        media = _media(block)
        if first is None:
            first = media
        elif media != first:
            errors.append(f"block {block.start.index} is in another format ({media.mime_type})")
            continue
        data = block.data
        payload = b"" if data is None else data.payload()
        if payload is None:
            assert data is not None
            errors.append(f"block {block.start.index}: {data.problem}")
            continue
        pieces.append(payload)
        joined.append(block.start.index)
        complete = complete and block.complete
    if first is None:
        return None
    audio = b"".join(pieces) if len(pieces) != 1 else pieces[0]
    mime_type, audio_format = first.mime_type, first.format
    if audio_format is None:
        shown = sniff_audio(audio)
        mime_type = mime_type or shown
        audio_format = media_of_type(shown).format
    return Audio(
        data=audio,
        mime_type=mime_type,
        format=audio_format,
        sample_rate=first.sample_rate,
        channels=first.channels,
        blocks=joined,
        complete=complete,
        error="; ".join(errors) if errors else None,
    )


def images_of(blocks: list[MediaBlock]) -> list[Image]:
    """An :class:`Image` per ``image`` block of candidate 0."""
    out: list[Image] = []
    for block in blocks:
        media = _media(block)
        data = block.data
        payload = b"" if data is None else data.payload()
        out.append(
            Image(
                index=block.start.index,
                data=b"" if payload is None else payload,
                mime_type=media.mime_type,
                format=media.format,
                size=media.size,
                quality=media.quality,
                background=media.background,
                partial_images=0 if data is None else data.partials,
                final=data is not None and data.final,
                error=None if data is None else data.problem,
            )
        )
    return out


def _languages(extra: dict[str, Any] | None) -> list[str]:
    if not extra:
        return []
    many = extra.get("languages")
    if isinstance(many, list):
        codes = [item.get("code") if isinstance(item, dict) else item for item in many]
        return [code for code in codes if isinstance(code, str)]
    one = extra.get("language")
    return [one] if isinstance(one, str) else []


def transcript_of(blocks: list[MediaBlock]) -> Transcript | None:
    """The :class:`Transcript` of the ``transcript`` blocks of candidate 0 (None: there
    is none)."""
    if not blocks:
        return None
    texts: list[str] = []
    segments: list[Segment] = []
    languages: list[str] = []
    for block in blocks:
        if block.text is not None:
            texts.append(block.text)
        elif block.end is not None and isinstance(block.end.value, str):
            texts.append(block.end.value)
        segments.extend(
            Segment(text=s.text, start=s.start, end=s.end, speaker=s.speaker, id=s.id)
            for s in block.segments
        )
        for extra in (block.end.extra if block.end is not None else None, block.start.extra):
            for code in _languages(extra):
                if code not in languages:
                    languages.append(code)
    return Transcript(
        text="".join(texts),
        segments=segments,
        languages=languages,
        complete=all(block.complete for block in blocks),
    )
