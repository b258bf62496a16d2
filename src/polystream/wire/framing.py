"""Which framing a stream is in, from its first byte.

A stream in the incrementally streamed JSON array framing (Gemini's default
``streamGenerateContent``) begins with ``[``; every other stream is SSE. What may come
before the first byte is not read as any of it: whitespace and a UTF-8 byte order mark.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = ["BLANK", "sniff_framing"]

BLANK: Final = b" \t\r\n\xef\xbb\xbf"
"""What may come before a stream's first byte, not read as any of it: whitespace and
the bytes of a UTF-8 BOM (``bytes.lstrip(BLANK)``)."""


def sniff_framing(prefix: bytes) -> Literal["sse", "json_array"] | None:
    """The framing of a stream that begins with ``prefix``: ``json_array`` when its first
    byte that is not :data:`BLANK` is ``[``, else ``sse``; None while ``prefix`` holds no
    such byte (more input is needed)."""
    stripped = prefix.lstrip(BLANK)
    if not stripped:
        return None
    return "json_array" if stripped[:1] == b"[" else "sse"
