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
source's own dialect family and Gemini's generateContent), or writes them from their
texts (:meth:`~polystream.dialects.DialectEncoder.writes_usage_texts`: Gemini's
generateContent into its own dialect), the source decoder is made with the
:data:`~polystream.dialects._base.Coalesce` mode the encoder names
(:meth:`~polystream.dialects.DialectEncoder.coalesce_for`), and each call's events go
to the encoder with the runs the decoder noted
(:meth:`~polystream.dialects.DialectEncoder.encode_batch`): what the target writes is
the same, byte for byte, and the losses keep their event indices.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from polystream.accumulate import Result
from polystream.decoding import StreamDecoder
from polystream.dialects import DialectEncoder, Loss, get_dialect
from polystream.dialects._base import Coalesce
from polystream.events import Event

__all__ = ["Transcoder", "convert", "encode_events"]


class _SourceDecoder(StreamDecoder):
    """:class:`StreamDecoder` for a :class:`Transcoder`: the dialect decoder, once the
    dialect is known, is made with the mode the target encoder names."""

    def __init__(self, encoder: DialectEncoder, source: str, **options: Any) -> None:
        self._target = encoder
        super().__init__(source, **options)

    def coalesce_for(self, dialect: str) -> Coalesce:
        return self._target.coalesce_for(dialect)


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
    def coalesce(self) -> Coalesce | None:
        """The :data:`~polystream.dialects._base.Coalesce` mode the source decoder
        uses (None until the source is detected): what the target encoder names for
        the source (:meth:`~polystream.dialects.DialectEncoder.coalesce_for`), or
        ``"off"`` when the source decoder has no fast path for it."""
        decoder = self._decoder.dialect_decoder
        return None if decoder is None else decoder.coalesce

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
        return self._encoder.encode_batch(events, self._decoder.take_runs())


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
