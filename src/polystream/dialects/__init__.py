"""The dialect registry: one line per wire dialect, each a folder that owns it.

Every dialect package ``polystream.dialects.<name>`` has:

* ``SPEC`` (``spec.py``) — its :class:`~polystream.dialects._spec.DialectSpec`: provider,
  framings, routes, authentication, error shape, resume cursors, detection hints, stream
  traits and reply shapes. The request codecs, the emulator, the gateway, the client and
  the command line read these and keep no per-dialect table of their own.
* ``Decoder`` — a :class:`~polystream.dialects._base.DialectDecoder` (bytes -> events);
* ``Encoder`` — a :class:`~polystream.dialects._base.DialectEncoder` (events -> bytes);
* ``rebuild(events) -> dict`` — the provider's own final object, as its non-streaming
  endpoint returns it, rebuilt from the dialect's unified events.

The code (``binding.py``) is imported on first use, so that ``import polystream`` reads
only the data.
"""

from __future__ import annotations

import importlib
from typing import Final

from polystream.dialects._base import (
    DialectDecoder,
    DialectEncoder,
    FramedDecoder,
    Framing,
    Loss,
)
from polystream.dialects._detect import detect
from polystream.dialects._spec import DialectSpec, ProviderSpec, RouteMatch, RouteSpec
from polystream.errors import LocalProtocolError

__all__ = [
    "DIALECTS",
    "PROVIDERS",
    "REGISTERED",
    "SSE_DIALECTS",
    "TEXT_FAMILIES",
    "DialectDecoder",
    "DialectEncoder",
    "DialectInfo",
    "DialectSpec",
    "FramedDecoder",
    "Framing",
    "Loss",
    "ProviderSpec",
    "RouteMatch",
    "RouteSpec",
    "detect",
    "get_dialect",
    "match_route",
    "provider_of",
    "provider_of_path",
    "routes_of",
]


REGISTERED: Final = (
    "openai_responses",
    "openai_chat",
    "anthropic_messages",
    "xai_responses",
    "xai_chat",
    "xai_messages",
    "gemini_generate",
    "gemini_interactions",
    "openai_speech",
    "openai_transcription",
    "openai_images",
    "anthropic_agent_session",
    "openai_agent_session",
)
"""The registered dialects, one line each: adding a dialect is adding its folder and its
name here."""

DIALECTS: dict[str, DialectSpec] = {
    name: importlib.import_module(f"polystream.dialects.{name}.spec").SPEC for name in REGISTERED
}
"""Every registered dialect, by name."""

DialectInfo = DialectSpec
"""The name a registered dialect's descriptor had before it held every fact about it."""

TEXT_FAMILIES: Final = frozenset({"responses", "chat", "messages", "generate", "interactions"})
"""The request families of the text-chat dialects (a conversation in, text, reasoning and
tool calls out); the others are media streams and agent sessions."""

SSE_DIALECTS: tuple[str, ...] = tuple(
    name for name, spec in DIALECTS.items() if spec.family in TEXT_FAMILIES
)
"""The text-streaming dialects (the eight chat dialects of the four providers)."""

_OPENAI_MODELS: Final = (
    "gpt-",
    "chatgpt-",
    "codex-",
    "computer-use-",
    "omni-",
    *(f"o{digit}" for digit in range(10)),
)

PROVIDERS: Final[dict[str, ProviderSpec]] = {
    spec.name: spec
    for spec in (
        ProviderSpec(
            "openai",
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
            "x-request-id",
            "/openai",
            _OPENAI_MODELS,
            "openai_responses",
            "openai",
            default_socket="openai_realtime",
        ),
        ProviderSpec(
            "anthropic",
            "https://api.anthropic.com",
            "ANTHROPIC_API_KEY",
            "request-id",
            "/anthropic",
            ("claude-",),
            "anthropic_messages",
            "anthropic",
        ),
        ProviderSpec(
            "xai",
            "https://api.x.ai/v1",
            "XAI_API_KEY",
            "x-request-id",
            "/xai",
            ("grok-",),
            "xai_responses",
            "openai",
            default_socket="xai_realtime",
        ),
        ProviderSpec(
            "gemini",
            "https://generativelanguage.googleapis.com",
            "GEMINI_API_KEY",
            "x-request-id",
            "/gemini",
            ("gemini-", "gemma-", "learnlm-", "deep-research"),
            "gemini_generate",
            "google",
            default_socket="gemini_live",
        ),
    )
}
"""Providers by name."""


def provider_of(dialect: str) -> ProviderSpec:
    """The provider that speaks ``dialect``."""
    return PROVIDERS[get_dialect(dialect).provider]


def provider_of_path(path: str) -> ProviderSpec | None:
    """The provider under whose prefix ``path`` lies (``/openai/...``), or None."""
    head = "/" + path.lstrip("/").split("/", 1)[0]
    for provider in PROVIDERS.values():
        if provider.prefix == head:
            return provider
    return None


def _compile(spec: DialectSpec, route: RouteSpec) -> tuple[str, tuple[str, ...], RouteSpec, str]:
    prefix = PROVIDERS[spec.provider].prefix
    return (route.method, tuple((prefix + route.path).strip("/").split("/")), route, spec.name)


_ROUTES: Final = tuple(_compile(spec, route) for spec in DIALECTS.values() for route in spec.routes)


def match_route(method: str, path: str) -> RouteMatch | None:
    """The dialect route a request's method and path (no query) match, or None.

    A ``{name}`` segment of the template matches one non-empty path segment (and only a
    listed version, for ``{version}``); ``{model}:verb`` matches a segment ending in
    ``:verb``.
    """
    parts = path.strip("/").split("/")
    for verb, template, route, dialect in _ROUTES:
        if verb != method or len(template) != len(parts):
            continue
        params: dict[str, str] = {}
        for pattern, part in zip(template, parts, strict=True):
            if pattern[:1] != "{":
                if pattern != part:
                    break
                continue
            name, _, suffix = pattern[1:].partition("}")
            if suffix:
                if not part.endswith(suffix) or len(part) == len(suffix):
                    break
                part = part[: -len(suffix)]
            if not part or (name == "version" and part not in route.versions):
                break
            params[name] = part
        else:
            return RouteMatch(dialect, route, params)
    return None


def routes_of(path: str) -> list[RouteMatch]:
    """Every route whose path (any method) matches ``path``: for telling a wrong method
    (405) from an unknown path (404)."""
    return [found for method in ("GET", "POST") if (found := match_route(method, path)) is not None]


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
