"""Keeping secrets out of text: every configured secret, any fragment of one, and URL
credentials, replaced by a fixed marker.

Providers echo keys in their error messages, whole or elided
(``Incorrect API key provided: sk-proj-abc...wxyz``), and transport errors name the
URL they could not reach, credentials and all. A :class:`Scrubber` removes from a text:

* every secret of 8 or more characters, and every run of 8 or more characters of the
  text that is made of 8-character pieces of secrets (so any fragment of a key that is
  long enough to mean something, wherever it stands and whatever surrounds it);
* the userinfo (``user:pass@``) and the query string (``?token=...``) of every URL.

Each is replaced by :data:`MARKER`. Matching takes time linear in the text: every
8-character window of every secret is indexed once, in a set, and each window of the
text is looked up in it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import urlsplit

import msgspec

from polystream.events import ErrorEvent, ErrorInfo, Event, Finish, Raw, Unknown, Warning

__all__ = ["MARKER", "SCRUBBED_EVENTS", "WINDOW", "Scrubber", "url_credentials"]

MARKER: Final = "[redacted]"
"""What a removed secret, fragment or URL credential reads as."""

WINDOW: Final = 8
"""The shortest fragment of a secret that is removed. A secret shorter than this (a
placeholder key such as ``none`` for a local upstream that takes none) is not looked
for: it cannot be told apart from ordinary words, and removing it would garble every
message that happens to hold them."""

SCRUBBED_EVENTS: Final = frozenset({ErrorEvent, Finish, Warning, Unknown, Raw})
"""The event types that carry text from elsewhere (an upstream's error, a native event
passed through): the only ones :meth:`Scrubber.event` changes. Deltas are the model's
output and pass untouched."""

_MAX_DEPTH: Final = 64
"""Nesting past which a value is replaced whole rather than walked."""

# The userinfo of a URL: after the scheme's "//", up to an "@" before any path.
_USERINFO: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#@\"'<>]*@")
# The query of a URL, up to whitespace, a quote, a fragment or trailing punctuation.
_QUERY: Final = re.compile(
    r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s?#\"'<>]*)\?[^\s#\"'<>]*?(?=[.,:;)\]]*(?:[\s#\"'<>]|$))"
)


class Scrubber:
    """Removes the given secrets, their fragments and URL credentials from text.

    Args:
        secrets: The secrets (empty ones, and those shorter than :data:`WINDOW`, are
            ignored).
    """

    __slots__ = ("_windows", "secrets")

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets: tuple[str, ...] = tuple(dict.fromkeys(s for s in secrets if len(s) >= WINDOW))
        self._windows = frozenset(
            secret[i : i + WINDOW]
            for secret in self.secrets
            for i in range(len(secret) - WINDOW + 1)
        )

    def __repr__(self) -> str:
        return f"Scrubber({len(self.secrets)} secrets)"

    def text(self, text: str) -> str:
        """``text`` without secrets, fragments of 8+ characters or URL credentials."""
        if not text:
            return text
        if "://" in text:
            text = _USERINFO.sub(rf"\1{MARKER}@", text)
            text = _QUERY.sub(rf"\1?{MARKER}", text)
        windows = self._windows
        runs: list[tuple[int, int]] = []
        if windows and len(text) >= WINDOW:
            start = end = -1
            for i in range(len(text) - WINDOW + 1):
                if text[i : i + WINDOW] in windows:
                    if i > end:  # a new run (one that overlaps or touches the last joins it)
                        if end >= 0:
                            runs.append((start, end))
                        start = i
                    end = i + WINDOW
            if end >= 0:
                runs.append((start, end))
        if not runs:
            return text
        out: list[str] = []
        at = 0
        for start, end in runs:
            out.append(text[at:start])
            out.append(MARKER)
            at = end
        out.append(text[at:])
        return "".join(out)

    def value(self, value: Any, _depth: int = 0) -> Any:
        """A JSON-like value (``str``, ``bytes``, ``msgspec.Raw``, ``dict``, ``list``,
        ``tuple``, scalars) with every string in it scrubbed, keys too."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, (int, float, bool)) or value is None:
            return value
        if _depth >= _MAX_DEPTH:
            return MARKER
        if isinstance(value, dict):
            return {self.value(k, _depth + 1): self.value(v, _depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.value(v, _depth + 1) for v in value)
        if isinstance(value, (bytes, bytearray, msgspec.Raw)):
            # Latin-1 maps each byte to one character and back: the bytes are kept
            # as they were outside what is removed.
            scrubbed = self.text(bytes(value).decode("latin-1")).encode("latin-1")
            return msgspec.Raw(scrubbed) if isinstance(value, msgspec.Raw) else scrubbed
        return value

    def error(self, error: ErrorInfo) -> ErrorInfo:
        """``error`` with its message, code and raw error object scrubbed."""
        return msgspec.structs.replace(
            error,
            message=self.text(error.message),
            code=self.text(error.code) if error.code is not None else None,
            raw=self.value(error.raw),
        )

    def event(self, event: Event) -> Event:
        """``event`` with every text it carries from elsewhere scrubbed: the error of an
        :class:`ErrorEvent` or a :class:`Finish`, a :class:`Warning`'s message, the data
        of :class:`Unknown` and :class:`Raw` events, and the ``extra`` and ``raw`` of
        each of them. Any other event, and a :class:`Finish` without an error, is
        returned as it is."""
        kind = type(event)
        if kind not in SCRUBBED_EVENTS:
            return event
        changes: dict[str, Any] = {}
        if kind is ErrorEvent:
            assert isinstance(event, ErrorEvent)
            changes["error"] = self.error(event.error)
        elif kind is Finish:
            assert isinstance(event, Finish)
            if event.error is None:
                return event
            changes["error"] = self.error(event.error)
        elif kind is Warning:
            assert isinstance(event, Warning)
            changes["message"] = self.text(event.message)
        elif kind is Unknown:
            assert isinstance(event, Unknown)
            changes["data"] = self.text(event.data)
        else:
            assert isinstance(event, Raw)
            changes["data"] = self.value(event.data)
        if event.extra is not None:
            changes["extra"] = self.value(event.extra)
        if event.raw is not None:
            changes["raw"] = self.value(event.raw)
        return msgspec.structs.replace(event, **changes)


def url_credentials(url: str | None) -> list[str]:
    """The secrets a URL carries: its userinfo (``user:pass``), its password alone,
    and its query string (none for None or a URL without them)."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found: list[str] = []
    userinfo, at, _ = parts.netloc.rpartition("@")
    if at and userinfo:
        found.append(userinfo)
        if parts.password:
            found.append(parts.password)
    if parts.query:
        found.append(parts.query)
    return found
