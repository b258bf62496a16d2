"""Re-emit a stream of any dialect as any other, incrementally.

Conversion always goes decode(A) -> unified events -> encode(B); there is no pairwise
converter. Output bytes are produced as input arrives::

    transcoder = Transcoder(target="anthropic_messages")      # source detected
    for chunk in upstream_chunks:
        send(transcoder.feed(chunk))
    send(transcoder.close())
    transcoder.losses        # what the target could not carry, event by event

What the target cannot carry is never dropped silently: each target encoder records a
:class:`~polystream.dialects.Loss` (what, which event, why, and whether a documented
carrier kept it so that a hop back restores it).

When the target only merges the source's usage updates into the usage it writes at the
end (:meth:`~polystream.dialects.DialectEncoder.folds_usage`: every target but the
source's own dialect family and Gemini's generateContent), the source decoder may give
the usage updates of a run of chunks as one, of their usage merged: what the target
writes is the same, byte for byte, and the losses keep their event indices (counted as
if each update had come). Gemini's decoder does so for its usual text chunks, which
restate the usage on each. Into Gemini's own dialect, which writes each chunk's usage
where it came (:meth:`~polystream.dialects.DialectEncoder.writes_usage_texts`), the
decoder also keeps each chunk's usage text, from which the encoder writes the chunk.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from polystream.accumulate import Result
from polystream.api import StreamDecoder
from polystream.dialects import DialectDecoder, DialectEncoder, Loss, get_dialect
from polystream.events import Event

__all__ = ["Transcoder", "convert", "encode_events"]


class _SourceDecoder(StreamDecoder):
    """:class:`StreamDecoder` for a :class:`Transcoder`: the dialect decoder, once made,
    gives runs of usage updates as one when the target encoder only merges them
    (``DialectDecoder._coalesce_usage``)."""

    def __init__(self, encoder: DialectEncoder, source: str, **options: Any) -> None:
        self._target = encoder
        self.coalescing: DialectDecoder | None = None  # the dialect decoder, if so
        super().__init__(source, **options)

    def _start(self, dialect: str) -> None:
        super()._start(dialect)
        assert self._decoder is not None
        self.coalescing = _pair(self._decoder, dialect, self._target)

    def feed(self, data: bytes) -> list[Event]:
        if self.coalescing is not None:
            # (What a call that raised may have noted is not this call's.)
            self.coalescing._usage_runs.clear()
            self.coalescing._usage_texts_runs.clear()
        return super().feed(data)


def _pair(decoder: DialectDecoder, source: str, encoder: DialectEncoder) -> DialectDecoder | None:
    """Set ``decoder`` (of the dialect ``source``) to give a run's usage updates as one
    when ``encoder`` only merges them; returns it then (for :func:`_encode_feed`), else
    None."""
    if encoder.folds_usage(source):
        decoder._coalesce_usage = True
        return decoder
    if decoder._usage_text_update is not None and encoder.writes_usage_texts(source):
        decoder._coalesce_usage = True
        decoder._usage_texts = True
        return decoder
    return None


def _encode_feed(
    encoder: DialectEncoder, events: list[Event], decoder: DialectDecoder | None
) -> bytes:
    """``events`` (what one call of ``decoder`` gave) encoded; when ``decoder`` gave a
    run's usage updates as one (``_usage_runs``), the encoder counts the events after
    it as if each had come, so that its losses name the events' indices in the full
    stream; when it kept the run's usage texts besides (``_usage_texts_runs``), the
    encoder gets the run's text deltas with those texts in place of the updates."""
    encode = encoder.encode
    runs = decoder._usage_runs if decoder is not None else None
    if not runs:
        return b"".join([encode(event) for event in events])
    assert decoder is not None
    texts = decoder._usage_texts_runs
    update = decoder._usage_text_update
    parts: list[bytes] = []
    at = 0
    for number, (index, size) in enumerate(runs):
        if texts:
            # The run's text deltas come before its update, which the encoder does
            # not get: each delta's own usage text stands for it.
            start = index - size
            parts.extend([encode(event) for event in events[at:start]])
            usages, shapes = texts[number]
            extra = events[index].extra
            assert update is not None  # (texts are kept only then: _pair)
            deltas = events[start:index]
            parts.append(encoder._encode_usage_texts(deltas, usages, shapes, extra, update))
        else:
            parts.extend([encode(event) for event in events[at : index + 1]])
            encoder.event_index += size - 1
        at = index + 1
    runs.clear()
    texts.clear()
    parts.extend([encode(event) for event in events[at:]])
    return b"".join(parts)


class Transcoder:
    """Incremental converter from one dialect to another.

    Args:
        target: The dialect to write.
        source: The dialect to read, or ``"auto"``.
        strict: Decode strictly (protocol anomalies raise).
        source_options: Extra options for the source decoder (e.g. ``framing``).
        target_options: Extra options for the target encoder (e.g. ``framing`` for
            ``gemini_generate``).
    """

    def __init__(
        self,
        target: str,
        *,
        source: str = "auto",
        strict: bool = False,
        source_options: dict[str, Any] | None = None,
        target_options: dict[str, Any] | None = None,
    ) -> None:
        self._encoder: DialectEncoder = get_dialect(target).encoder(**(target_options or {}))
        self._decoder = _SourceDecoder(
            self._encoder, source, strict=strict, **(source_options or {})
        )
        self.target = target

    @property
    def source(self) -> str | None:
        """The source dialect (None until detected)."""
        return self._decoder.dialect

    @property
    def content_type(self) -> str:
        """The media type of the output."""
        return self._encoder.content_type

    @property
    def losses(self) -> list[Loss]:
        """Everything the target could not carry (or carried in a documented carrier)."""
        return self._encoder.losses

    def feed(self, data: bytes) -> bytes:
        """Consume source bytes; return the target bytes they produced."""
        return self._encode(self._decoder.feed(data))

    def close(self) -> bytes:
        """End of the source; return the target's final bytes."""
        return self._encode(self._decoder.close()) + self._encoder.close()

    def result(self) -> Result:
        """The source stream's unified result so far."""
        return self._decoder.result()

    def _encode(self, events: list[Event]) -> bytes:
        return _encode_feed(self._encoder, events, self._decoder.coalescing)


def convert(
    data: bytes | Iterable[bytes],
    target: str,
    *,
    source: str = "auto",
    **options: Any,
) -> tuple[bytes, list[Loss]]:
    """Convert a whole stream. Returns the target bytes and the loss report."""
    transcoder = Transcoder(target, source=source, **options)
    chunks = [data] if isinstance(data, bytes | bytearray) else data
    out = [transcoder.feed(bytes(chunk)) for chunk in chunks]
    out.append(transcoder.close())
    return b"".join(out), transcoder.losses


def encode_events(events: Iterable[Event], target: str, **options: Any) -> tuple[bytes, list[Loss]]:
    """Encode unified events (from any dialect) as ``target``'s wire bytes."""
    encoder = get_dialect(target).encoder(**options)
    return encoder.encode_all(events), encoder.losses
