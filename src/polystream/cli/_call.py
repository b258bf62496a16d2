"""``polystream call``: stream a live reply from a provider to the terminal."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from polystream.client import Client
    from polystream.errors import PolystreamError
    from polystream.events import (
        BlockStart,
        ErrorEvent,
        Finish,
        ReasoningDelta,
        TextDelta,
        ToolInputDelta,
        Warning,
        dump_event,
    )
    from polystream.gateway_core import DEFAULT_DIALECT
    from polystream.request import ReasoningConfig

    dialect = args.dialect or DEFAULT_DIALECT[args.provider]
    reasoning = ReasoningConfig(effort=args.reasoning, summary=True) if args.reasoning else None
    client = Client(base_url=args.base_url, api_key=args.api_key, idle_timeout=args.idle_timeout)
    started = time.perf_counter()
    first: float | None = None
    out = sys.stdout
    try:
        stream = client.stream(
            dialect,
            model=args.model,
            prompt=args.prompt,
            system=args.system,
            max_tokens=args.max_tokens,
            reasoning=reasoning,
        )
        with stream:
            for event in stream:
                if first is None:
                    first = time.perf_counter() - started
                if args.json:
                    out.write(dump_event(event).decode() + "\n")
                    continue
                if isinstance(event, TextDelta):
                    out.write(event.delta)
                elif isinstance(event, ReasoningDelta):
                    out.write(f"\x1b[2m{event.delta}\x1b[0m" if out.isatty() else event.delta)
                elif isinstance(event, BlockStart) and event.kind == "tool_call":
                    out.write(f"\n[tool call {event.name} {event.call_id or event.id or ''}] ")
                elif isinstance(event, ToolInputDelta):
                    out.write(event.delta)
                elif isinstance(event, Warning):
                    print(f"\n[{event.code}] {event.message}", file=sys.stderr)
                elif isinstance(event, ErrorEvent):
                    print(f"\n[error {event.error.kind}] {event.error.message}", file=sys.stderr)
                elif isinstance(event, Finish):
                    out.write("\n")
                out.flush()
        result = stream.result()
    except PolystreamError as exc:
        print(f"polystream: error: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    total = time.perf_counter() - started
    usage = result.usage
    reason = result.finish_reason.raw if result.finish_reason else None
    print(
        f"-- {result.status} ({reason}); tokens in {usage.input_tokens} out {usage.output_tokens}"
        f" reasoning {usage.reasoning_tokens}; first event {1000 * (first or 0):.0f} ms,"
        f" total {1000 * total:.0f} ms",
        file=sys.stderr,
    )
    return 0 if result.status in ("completed", "incomplete") else 1


def register(sub: Any) -> None:
    """Add the ``call`` subcommand."""
    from polystream.dialects import PROVIDERS

    parser = sub.add_parser(
        "call",
        help="stream a live reply from a provider",
        description="Stream a reply: text as it arrives, reasoning dimmed, tool calls shown, "
        "then a line with usage and timings. Keys from OPENAI_API_KEY, ANTHROPIC_API_KEY, "
        "XAI_API_KEY, GEMINI_API_KEY or --api-key.",
    )
    parser.add_argument("provider", choices=list(PROVIDERS))
    parser.add_argument("prompt")
    parser.add_argument("--model", required=True)
    parser.add_argument("--dialect", help="override the provider's default dialect")
    parser.add_argument("--base-url", help="e.g. the emulator: http://127.0.0.1:8000/openai/v1")
    parser.add_argument("--api-key")
    parser.add_argument("--system")
    parser.add_argument("--max-tokens", type=int)
    parser.add_argument("--reasoning", metavar="EFFORT", help="minimal, low, medium, high")
    parser.add_argument("--idle-timeout", type=float, default=120.0)
    parser.add_argument("--json", action="store_true", help="unified events as JSON lines")
    parser.set_defaults(run=_run)
