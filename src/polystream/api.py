"""The older name of :mod:`polystream.decoding` (``decode``, ``StreamDecoder``)."""

from __future__ import annotations

from polystream.decoding import StreamDecoder, decode, decode_events

__all__ = ["StreamDecoder", "decode", "decode_events"]
