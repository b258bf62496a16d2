"""``polystream gateway``: serve any inbound dialect from any upstream."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from polystream.gateway_core import GatewayConfig

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    import msgspec

    from polystream.cli._heap import settle_heap
    from polystream.cli._listen import bind, prepare_tls, split_listen, trust_hint
    from polystream.gateway_core import GatewayConfig, Limits, load_config, parse_upstream_spec
    from polystream.journal import Journal, MemoryJournal
    from polystream.server.gateway import create_gateway

    tls_dir: str | None = args.tls
    try:
        if args.config:
            config = load_config(Path(args.config).read_bytes())
            if tls_dir is None and config.tls is not None:
                # (the config's directory is relative to the config file)
                tls_dir = str(Path(args.config).parent / Path(config.tls).expanduser())
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
    if args.log_socket_usage:
        config.log_socket_usage = True
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
    listen = split_listen(args.listen)
    if listen is None:
        print(f"polystream: error: --listen is HOST:PORT, not {args.listen!r}", file=sys.stderr)
        return 2
    tls = None
    if tls_dir is not None:
        tls = prepare_tls("gateway", tls_dir, listen[0])
        if tls is None:
            return 2
    # Bound before anything is printed: a port in use is one message, and exit code 2.
    sock = bind("gateway", *listen)
    if sock is None:
        return 2
    for warning in _missing_keys(config):
        print(f"polystream gateway: warning: {warning}", file=sys.stderr)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # The gateway logs each request itself; the HTTP client's own line per upstream
    # request would double the log (and its cost) without adding anything.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("websockets").setLevel(logging.WARNING)  # (a line per socket opened)
    names = ", ".join(f"{u.name} ({u.dialect})" for u in config.upstreams.values())
    host, port = sock.getsockname()[:2]  # the real port when it is 0
    shown = f"[{host}]" if ":" in host else host
    scheme = "http" if tls is None else "https"
    banner = f"polystream gateway on {scheme}://{shown}:{port} -> {names}"
    if tls is not None:
        banner += "\n" + trust_hint(tls)
    print(banner, file=sys.stderr, flush=True)
    app = create_gateway(config, journal=journal)
    try:
        if args.server == "uvicorn":
            import uvicorn

            from polystream.server._run import uvicorn_limit_concurrency

            settle_heap()
            limit = uvicorn_limit_concurrency(config.limits.max_connections)
            uvicorn_config = uvicorn.Config(
                app,
                log_level="warning",
                limit_concurrency=limit,
                ssl_certfile=tls.cert_file if tls is not None else None,
                ssl_keyfile=tls.key_file if tls is not None else None,
            )
            uvicorn.Server(uvicorn_config).run(sockets=[sock])
        else:
            from polystream.server._h1server import run
            from polystream.server._refusals import gateway_refusal

            settle_heap()
            run(
                app,
                sock=sock,
                refusal=gateway_refusal,
                max_connections=config.limits.max_connections,
                max_body_bytes=config.limits.max_body_bytes,
                ssl=tls.server_context() if tls is not None else None,
            )
    finally:
        sock.close()
    return 0


def _missing_keys(config: GatewayConfig) -> list[str]:
    """A warning for each upstream without a key (none given, its variable unset): the
    gateway still starts, as an upstream on the local network may take no key."""
    from polystream.gateway_core import upstream_provider
    from polystream.request import PROVIDERS

    warnings = []
    for upstream in config.upstreams.values():
        if upstream.key():
            continue
        variable = upstream.api_key_env or PROVIDERS[upstream_provider(upstream.dialect)].env_key
        warnings.append(
            f"upstream {upstream.name} ({upstream.dialect}) has no key: {variable} is not "
            "set, so its requests are sent without one"
        )
    return warnings


def register(sub: Any) -> None:
    """Add the ``gateway`` subcommand."""
    from polystream.gateway_core import Limits

    limits = Limits()
    parser = sub.add_parser(
        "gateway",
        help="serve every inbound dialect from configured upstreams",
        description="A gateway: clients speak any dialect (OpenAI Responses or Chat, "
        "Anthropic Messages, Gemini generate or Interactions) under /openai/v1, /xai/v1, "
        "/anthropic, /gemini; requests go to the upstream in its own dialect and replies "
        "are transcoded live. See docs/gateway.md.",
    )
    parser.add_argument(
        "--listen",
        default="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="the address to listen on ([::1]:PORT for IPv6; port 0: any free one)",
    )
    parser.add_argument(
        "--upstream",
        action="append",
        metavar="PROVIDER[=BASE_URL]",
        help="an upstream: openai, anthropic, xai, gemini, a dialect name or a WebSocket "
        "family (openai_realtime, ...); repeatable",
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
        help="where streams are recorded for resume: in memory, a SQLite file, or Redis",
    )
    parser.add_argument(
        "--resume-grace",
        type=float,
        metavar="SECONDS",
        help="seconds to keep reading the upstream after a client disconnects, so that it "
        f"can resume (default: the config's, else {limits.resume_grace_seconds:g})",
    )
    parser.add_argument(
        "--max-concurrency",
        type=int,
        metavar="N",
        help="streams served at once; those past it are answered 503 with Retry-After "
        f"(default: the config's, else {limits.max_concurrency})",
    )
    parser.add_argument(
        "--log-socket-usage",
        action="store_true",
        help="log each WebSocket reply's usage (reads every relayed message)",
    )
    parser.add_argument(
        "--server",
        choices=("polystream", "uvicorn"),
        default="polystream",
        help="the HTTP server: polystream's own HTTP/1.1 server (the lowest added "
        "latency) or uvicorn",
    )
    parser.add_argument(
        "--tls",
        metavar="DIR",
        help="serve HTTPS and WSS on the port, with a certificate for localhost, 127.0.0.1 "
        "and ::1 signed by a local certificate authority kept in DIR (DIR/ca.pem and "
        "DIR/ca-key.pem, made on first use, then reused); clients trust it with "
        "SSL_CERT_FILE=DIR/ca.pem (default: the config's tls)",
    )
    parser.set_defaults(run=_run)
