"""``polystream gateway``: serve any inbound dialect from any upstream."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    import msgspec

    from polystream.cli._heap import settle_heap
    from polystream.journal import Journal, MemoryJournal
    from polystream.proxy import GatewayConfig, Limits, load_config, parse_upstream_spec
    from polystream.server.gateway import create_gateway

    try:
        if args.config:
            config = load_config(Path(args.config).read_bytes())
        else:
            config = GatewayConfig(upstreams={})
        for spec in args.upstream or []:
            upstream = parse_upstream_spec(spec)
            config.upstreams[upstream.name] = upstream
    except (ValueError, OSError, msgspec.ValidationError) as exc:
        print(f"polystream: error: {exc}", file=sys.stderr)
        return 2
    if not config.upstreams:
        print("polystream: error: give at least one --upstream (or --config)", file=sys.stderr)
        return 2
    key = args.api_key or os.environ.get("POLYSTREAM_GATEWAY_KEY")
    if key:
        config.api_key = key
    limits: dict[str, Any] = {}
    if args.resume_grace is not None:
        limits["resume_grace_seconds"] = args.resume_grace
    if args.max_concurrency is not None:
        limits["max_concurrency"] = args.max_concurrency
    if limits:
        try:
            config.limits = Limits(**{**msgspec.structs.asdict(config.limits), **limits})
        except ValueError as exc:
            print(f"polystream: error: {exc}", file=sys.stderr)
            return 2
    try:
        config.tenants()  # (a client key that names no tenant: the gateway does not start)
    except ValueError as exc:
        print(f"polystream: error: {exc}", file=sys.stderr)
        return 2
    journal: Journal
    if args.journal == "memory":
        journal = MemoryJournal()
    elif args.journal.startswith("sqlite:"):
        from polystream.server.journal_sqlite import SQLiteJournal

        journal = SQLiteJournal(args.journal[len("sqlite:") :])
    elif args.journal.startswith("redis://"):
        from polystream.server.journal_redis import RedisJournal

        journal = RedisJournal(args.journal)
    else:
        print("polystream: error: --journal is memory, sqlite:PATH or redis://...", file=sys.stderr)
        return 2
    host, _, port = args.listen.rpartition(":")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # The gateway logs each request itself; the HTTP client's own line per upstream
    # request would double the log (and its cost) without adding anything.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    names = ", ".join(f"{u.name} ({u.dialect})" for u in config.upstreams.values())
    print(f"polystream gateway on http://{host}:{port} -> {names}", file=sys.stderr, flush=True)
    app = create_gateway(config, journal=journal)
    if args.server == "uvicorn":
        import uvicorn

        settle_heap()
        uvicorn.run(app, host=host or "127.0.0.1", port=int(port), log_level="warning")
    else:
        from polystream.server._h1server import run

        settle_heap()
        run(app, host or "127.0.0.1", int(port))
    return 0


def register(sub: Any) -> None:
    """Add the ``gateway`` subcommand."""
    parser = sub.add_parser(
        "gateway",
        help="serve every inbound dialect from configured upstreams",
        description="A gateway: clients speak any dialect (OpenAI Responses or Chat, "
        "Anthropic Messages, Gemini generate or Interactions) under /openai/v1, /xai/v1, "
        "/anthropic, /gemini; requests go to the upstream in its own dialect and replies "
        "are transcoded live. See docs/gateway.md.",
    )
    parser.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT")
    parser.add_argument(
        "--upstream",
        action="append",
        metavar="PROVIDER[=BASE_URL]",
        help="an upstream: openai, anthropic, xai, gemini, or a dialect name; repeatable",
    )
    parser.add_argument("--config", metavar="FILE", help="routes and upstreams (JSON)")
    parser.add_argument(
        "--api-key",
        metavar="KEY",
        help="a key clients may present, the tenant 'default' (default: "
        "$POLYSTREAM_GATEWAY_KEY; more keys: the config's clients; none at all: open)",
    )
    parser.add_argument(
        "--journal",
        default="memory",
        metavar="memory|sqlite:PATH|redis://...",
        help="where streams are recorded for resume",
    )
    parser.add_argument(
        "--resume-grace",
        type=float,
        metavar="SECONDS",
        help="keep reading the upstream this long after a client disconnects",
    )
    parser.add_argument("--max-concurrency", type=int, metavar="N")
    parser.add_argument(
        "--server",
        choices=("polystream", "uvicorn"),
        default="polystream",
        help="the HTTP server: polystream's own HTTP/1.1 server (default, the lowest "
        "added latency) or uvicorn",
    )
    parser.set_defaults(run=_run)
