"""``polystream call --realtime``: one text turn over a provider's WebSocket, shown as
it arrives (:func:`polystream.realtime.text_turn_sync`)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Final

from polystream.cli._call_show import Media, Printer, api_key, summary

if TYPE_CHECKING:
    from polystream.events import ErrorInfo
    from polystream.realtime import Routed

__all__ = ["UNTAKEN", "family_of", "run"]

UNTAKEN: Final = (
    ("reasoning", "--reasoning"),
    ("max_tokens", "--max-tokens"),
    ("file", "--file"),
    ("raw", "--raw"),
    ("session", "--session"),
    ("field", "--field"),
    ("voice", "--voice"),
    ("response_format", "--response-format"),
)
"""The options of an HTTP call that a realtime turn does not take (attribute, flag)."""


def family_of(args: argparse.Namespace) -> str | None:
    """The WebSocket family of the call, or None for an HTTP call: ``--dialect`` or
    TARGET when it names a family; with ``--realtime``, the provider's default one.

    Raises:
        ValueError: ``--realtime`` with no family to use.
    """
    from polystream.dialects import PROVIDERS
    from polystream.realtime import SOCKETS

    if args.dialect in SOCKETS:
        return str(args.dialect)
    if args.target in SOCKETS:
        if args.dialect is not None:
            raise ValueError(f"{args.target} is a WebSocket family: --dialect is not taken")
        return str(args.target)
    if not args.realtime:
        return None
    known = ", ".join(SOCKETS)
    if args.dialect is not None:
        raise ValueError(f"with --realtime, --dialect names a WebSocket family ({known})")
    provider = PROVIDERS.get(args.target)
    if provider is None:
        raise ValueError(
            f"{args.target} is an HTTP dialect: with --realtime, TARGET is a provider "
            f"or a WebSocket family ({known})"
        )
    if provider.default_socket is None:
        raise ValueError(f"{provider.name} has no realtime API (WebSocket families: {known})")
    return provider.default_socket


class _Refused(Exception):
    """The server answered the turn's request with an error before any reply began."""

    def __init__(self, error: ErrorInfo) -> None:
        super().__init__(error.message)
        self.error = error


def run(args: argparse.Namespace, family: str, prompt: str | None) -> int:
    """Run the turn; the exit status (0: completed or incomplete; 1: failed, cut or not
    made; 2: a usage error)."""
    import msgspec

    from polystream.accumulate import Result
    from polystream.dialects import PROVIDERS
    from polystream.errors import PolystreamError
    from polystream.events import ErrorEvent, FinishReason, StreamWarning
    from polystream.realtime import SOCKET_SPECS

    untaken = [flag for name, flag in UNTAKEN if getattr(args, name)]
    problem = None
    if untaken:
        problem = f"a realtime turn does not take {', '.join(untaken)}"
    elif prompt is None:
        problem = "a realtime turn needs a PROMPT"
    elif SOCKET_SPECS[family].answer == "music" and args.seconds is None:
        problem = f"{family} plays music without end: give --seconds N"
    else:
        try:
            key = api_key(args.api_key, args.base_url, PROVIDERS[SOCKET_SPECS[family].provider])
        except ValueError as exc:
            problem = str(exc)
    if problem is not None:
        print(f"polystream: error: {problem}", file=sys.stderr)
        return 2
    assert prompt is not None
    try:
        from polystream.realtime import text_turn_sync
    except ImportError as exc:
        print(
            f"polystream: error: the realtime client needs the realtime extra "
            f"(pip install 'polystream[realtime]'): {exc}",
            file=sys.stderr,
        )
        return 1

    printer = Printer(sys.stdout, sys.stderr, Media(args.out), as_json=args.json)
    started = time.perf_counter()
    first: float | None = None

    def on_event(routed: Routed) -> None:
        nonlocal first
        event = routed.event
        if args.json:
            printer.show(event, msgspec.json.encode(routed).decode())
        elif routed.stream > 0 or type(event) in (ErrorEvent, StreamWarning):
            printer.show(event)
        if routed.stream > 0:
            if first is None:
                first = time.perf_counter() - started
        elif type(event) is ErrorEvent and first is None:
            raise _Refused(event.error)  # (the request was refused: no reply will come)

    try:
        result = text_turn_sync(
            family,
            prompt,
            instructions=args.system,
            on_event=on_event,
            model=args.model,
            api_key=key,
            base_url=args.base_url,
            idle_timeout=args.idle_timeout,
            seconds=args.seconds,
            reconnect=None,
        )
        printer.media.write(sys.stderr)
    except _Refused as refused:
        reason = FinishReason(unified="error", raw=refused.error.code)
        result = Result(dialect=family, status="failed", finish_reason=reason, error=refused.error)
    except (PolystreamError, OSError) as exc:
        print(f"polystream: error: {exc}", file=sys.stderr)
        return 1
    print(summary(result, first, time.perf_counter() - started), file=sys.stderr)
    return 0 if result.status in ("completed", "incomplete") else 1
