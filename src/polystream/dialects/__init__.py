"""The dialect registry: one entry per wire dialect, each a folder with the same modules.

Every dialect package ``polystream.dialects.<name>`` exposes:

* ``Decoder`` — a :class:`~polystream.dialects._base.DialectDecoder` (bytes -> events);
* ``Encoder`` — a :class:`~polystream.dialects._base.DialectEncoder` (events -> bytes);
* ``rebuild(events) -> dict`` — the provider's own final object, as its non-streaming
  endpoint returns it, rebuilt from the dialect's unified events.

Packages are imported lazily, on first use, so that ``import polystream`` stays fast.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from polystream.dialects._base import (
    DialectDecoder,
    DialectEncoder,
    FramedDecoder,
    Framing,
    Loss,
)
from polystream.dialects._detect import detect
from polystream.errors import LocalProtocolError
from polystream.events import Event

__all__ = [
    "DIALECTS",
    "SSE_DIALECTS",
    "DialectDecoder",
    "DialectEncoder",
    "DialectInfo",
    "FramedDecoder",
    "Framing",
    "Loss",
    "detect",
    "get_dialect",
]


@dataclass(frozen=True)
class DialectInfo:
    """A registered dialect.

    Attributes:
        name: The dialect name used in the API, the CLI and fixture folders.
        provider: ``openai``, ``anthropic``, ``xai`` or ``gemini``.
        framings: The framings it streams in (the first is the default).
        description: One line for humans.
    """

    name: str
    provider: str
    framings: tuple[Framing, ...]
    description: str

    def module(self) -> ModuleType:
        """Import and return the dialect's package.

        Raises:
            LocalProtocolError: The dialect is registered but not available.
        """
        loaded = _LOADED.get(self.name)
        if loaded is not None:
            return loaded  # (each new decoder and encoder asks: a gateway, on every stream)
        try:
            loaded = _LOADED[self.name] = importlib.import_module(
                f"polystream.dialects.{self.name}"
            )
            return loaded
        except ModuleNotFoundError as exc:
            if exc.name == f"polystream.dialects.{self.name}":
                raise LocalProtocolError(
                    f"dialect {self.name} is not available in this build", dialect=self.name
                ) from None
            raise

    def decoder(self, **options: Any) -> DialectDecoder:
        """A new decoder; options go to its constructor (``strict``, ``keep_raw``, ...)."""
        decoder: DialectDecoder = self.module().Decoder(**options)
        return decoder

    def encoder(self, **options: Any) -> DialectEncoder:
        """A new encoder; options go to its constructor."""
        encoder: DialectEncoder = self.module().Encoder(**options)
        return encoder

    def rebuild(self, events: Iterable[Event]) -> dict[str, Any]:
        """The provider's own final object, rebuilt from this dialect's unified events."""
        result: dict[str, Any] = self.module().rebuild(events)
        return result


_LOADED: dict[str, ModuleType] = {}
"""The dialects' packages imported so far, by name."""

DIALECTS: dict[str, DialectInfo] = {
    info.name: info
    for info in (
        DialectInfo("openai_responses", "openai", ("sse",), "OpenAI Responses API (SSE)"),
        DialectInfo("openai_chat", "openai", ("sse",), "OpenAI Chat Completions (SSE)"),
        DialectInfo("anthropic_messages", "anthropic", ("sse",), "Anthropic Messages (SSE)"),
        DialectInfo("xai_responses", "xai", ("sse",), "xAI Responses API (SSE)"),
        DialectInfo("xai_chat", "xai", ("sse",), "xAI Chat Completions (SSE)"),
        DialectInfo("xai_messages", "xai", ("sse",), "xAI /v1/messages, deprecated (SSE)"),
        DialectInfo(
            "gemini_generate",
            "gemini",
            ("sse", "json_array"),
            "Gemini streamGenerateContent (alt=sse, or the streamed JSON array)",
        ),
        DialectInfo("gemini_interactions", "gemini", ("sse",), "Gemini Interactions API (SSE)"),
    )
}
"""Every registered dialect, by name."""

SSE_DIALECTS: tuple[str, ...] = tuple(DIALECTS)
"""The eight text-streaming dialects."""


def get_dialect(name: str) -> DialectInfo:
    """Look a dialect up by name.

    Raises:
        LocalProtocolError: No dialect has that name.
    """
    try:
        return DIALECTS[name]
    except KeyError:
        known = ", ".join(sorted(DIALECTS))
        raise LocalProtocolError(f"unknown dialect {name!r} (known: {known})") from None
