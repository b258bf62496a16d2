"""The origin of opaque state, and the carrier forms that record it.

A signature (:class:`~polystream.events.SignatureDelta`) belongs to the dialect that
produced it: its *origin* is ``extra["carrier"]`` when a decoder read it out of a
carrier, else the dialect of the stream it is in (the StreamStart's ``dialect``). An
encoder writes a signature of its own origin natively; any other signature goes in the
dialect's documented carrier, which records the origin (so a signature that travels
through several dialects keeps its first origin), or is reported lost.

Carrier forms shared by several dialects (each dialect's docs describe its own):

* :func:`wrap` / :func:`unwrap`: ``polystream:v1:<origin>:<the original bytes>``, for
  string signature fields (the Messages thinking ``signature``, the Interactions
  ``thought_signature``).
* :func:`wrap_base64` / :func:`unwrap_base64`: the same for a field that must stay
  base64 (Gemini ``thoughtSignature`` is a bytes field): ``polystreamv1``, the origin's
  name in lowercase hex, one to four ``x`` so that the marker's length is a multiple of
  4, then the original. The marker uses only letters and digits, so the whole value is
  base64 in either alphabet whenever the original is.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = [
    "CARRIER_PREFIX",
    "origin",
    "unwrap",
    "unwrap_base64",
    "wrap",
    "wrap_base64",
]

CARRIER_PREFIX: Final = "polystream:v1:"
"""Prefix of a string signature that carries another dialect's opaque state."""

_B64_MARK: Final = "polystreamv1"
_B64_NAME: Final = re.compile(r"[0-9a-f]*")


def origin(extra: dict[str, Any] | None, stream: str | None) -> str | None:
    """The dialect a signature belongs to: its carrier's record, else the stream's."""
    carrier = extra.get("carrier") if extra is not None else None
    return carrier if isinstance(carrier, str) and carrier else stream


def wrap(source: str, signature: str) -> str:
    """``signature`` of dialect ``source`` in the string carrier."""
    return f"{CARRIER_PREFIX}{source}:{signature}"


def unwrap(value: str, own: str) -> tuple[str | None, str]:
    """``(origin, original)`` of a string carrier, or ``(None, value)`` when ``value`` is
    not one. A carrier naming ``own`` is not unwrapped (this dialect never writes one),
    so that the same dialect re-encodes it exactly."""
    if value.startswith(CARRIER_PREFIX):
        source, sep, original = value[len(CARRIER_PREFIX) :].partition(":")
        if sep and source and source != own:
            return source, original
    return None, value


def wrap_base64(source: str, signature: str) -> str:
    """``signature`` of dialect ``source`` in the base64-safe carrier."""
    mark = _B64_MARK + source.encode().hex()
    return mark + "x" * (4 - len(mark) % 4) + signature


def unwrap_base64(value: str, own: str) -> tuple[str | None, str]:
    """``(origin, original)`` of a base64-safe carrier, or ``(None, value)``."""
    if not value.startswith(_B64_MARK):
        return None, value
    found = _B64_NAME.match(value, len(_B64_MARK))
    assert found is not None  # matches the empty string at worst
    name = found.group()
    end = found.end() + 4 - found.end() % 4
    if not name or len(name) % 2 or value[found.end() : end].strip("x"):
        return None, value
    try:
        source = bytes.fromhex(name).decode()
    except (ValueError, UnicodeDecodeError):
        return None, value
    if source == own or len(value) < end:
        return None, value
    return source, value[end:]
