"""The older name of :mod:`polystream.decoding` (``decode``, ``StreamDecoder``)."""

from __future__ import annotations

from polystream.decoding import HINT_BYTES, StreamDecoder, decode, decode_events

__all__ = ["HINT_BYTES", "StreamDecoder", "decode", "decode_events"]
