"""``polystream serve``: run the provider emulator in the foreground."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Final

__all__ = ["DEFAULT_PORT", "register"]

DEFAULT_PORT: Final = 8765
"""The emulator's port when ``--port`` is not given."""


def register(sub: Any) -> None:
    """Add the ``serve`` subcommand to the parser."""
    serve = sub.add_parser(
        "serve",
        help="run the provider emulator (OpenAI, Anthropic, xAI and Gemini endpoints)",
        description="Serve emulations of every provider's endpoints, for the official SDKs "
        "unchanged: point base_url at http://HOST:PORT/openai/v1, /xai/v1, /anthropic or "
        "/gemini (https:// with --tls). Replies come from scenario files, replayed captures, "
        "or a deterministic default. See docs/emulator.md.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="the interface to listen on")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="the TCP port to listen on (0: any free one)"
    )
    serve.add_argument(
        "--scenarios",
        action="append",
        default=[],
        metavar="PATH",
        help="scenario file (.json, or .yaml with PyYAML); repeatable",
    )
    serve.add_argument(
        "--replay",
        nargs="+",
        action="extend",
        default=[],
        metavar="FILE",
        help="recorded capture(s) of any dialect, replayed in the dialect each client asks for",
    )
    serve.add_argument(
        "--any-model",
        action="store_true",
        help="accept every model name (without it: the providers' model families only)",
    )
    serve.add_argument(
        "--server",
        choices=("uvicorn", "polystream"),
        default="uvicorn",
        help="the HTTP server: uvicorn or polystream's own HTTP/1.1 server",
    )
    serve.add_argument(
        "--tls",
        metavar="DIR",
        help="serve HTTPS and WSS on the port, with a certificate for localhost, 127.0.0.1 "
        "and ::1 signed by a local certificate authority kept in DIR (DIR/ca.pem and "
        "DIR/ca-key.pem, made on first use, then reused); clients trust it with "
        "SSL_CERT_FILE=DIR/ca.pem",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=1024,
        metavar="N",
        help="client connections open at once; those past it are answered 503",
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="the least severe log messages shown (uvicorn's log)",
    )
    serve.set_defaults(run=_cmd_serve)


def _cmd_serve(args: argparse.Namespace) -> int:
    from polystream.cli._heap import settle_heap

    try:
        import uvicorn

        from polystream.server import create_app, load_emulator, quiet_dropped_connections
    except ImportError as exc:
        print(
            f"polystream: error: serve needs the server extra "
            f"(pip install 'polystream[server]'): {exc}",
            file=sys.stderr,
        )
        return 2
    from polystream.scenario import ScenarioError

    if args.max_connections < 1:
        print("polystream: error: --max-connections must be at least 1", file=sys.stderr)
        return 2
    try:
        emulator = load_emulator(args.scenarios, args.replay, any_model=args.any_model)
    except ScenarioError as exc:
        print(f"polystream: error: {exc}", file=sys.stderr)
        return 1
    import socket

    from polystream.cli._listen import bind, prepare_tls, trust_hint

    tls = None
    if args.tls is not None:
        tls = prepare_tls("serve", args.tls, args.host)
        if tls is None:
            return 2
    # Bound before anything is printed: a port in use is one message, and exit code 2.
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = bind("serve", args.host, args.port)
    if sock is None:
        return 2
    port = sock.getsockname()[1]  # the real port when --port 0
    host = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    root = f"{'http' if tls is None else 'https'}://{host}:{port}"
    lines = [
        f"polystream emulator on {root}: {len(emulator.scenarios)} scenario(s), "
        f"{len(args.replay)} capture(s)",
        f"  OpenAI     base_url={root}/openai/v1",
        f"  xAI        base_url={root}/xai/v1 (OpenAI SDK), {root}/xai (Anthropic SDK)",
        f"  Anthropic  base_url={root}/anthropic",
        f"  Gemini     http_options={{'base_url': '{root}/gemini'}}",
    ]
    if tls is not None:
        lines.append(trust_hint(tls))
    print("\n".join(lines), file=sys.stderr, flush=True)
    quiet_dropped_connections()
    app = create_app(emulator)
    settle_heap()
    try:
        if args.server == "polystream":
            from polystream.scenario import MAX_BODY_SIZE
            from polystream.server._app import emulator_refusal
            from polystream.server._h1server import run

            run(
                app,
                sock=sock,
                refusal=emulator_refusal,
                max_connections=args.max_connections,
                max_body_bytes=MAX_BODY_SIZE,
                ssl=tls.server_context() if tls is not None else None,
            )
        else:
            from polystream.server._run import uvicorn_limit_concurrency

            config = uvicorn.Config(
                app,
                log_level=args.log_level,
                lifespan="off",
                limit_concurrency=uvicorn_limit_concurrency(args.max_connections),
                ssl_certfile=tls.cert_file if tls is not None else None,
                ssl_keyfile=tls.key_file if tls is not None else None,
            )
            uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    return 0
