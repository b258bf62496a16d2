"""``polystream inspect``: look at captures in a browser, as one HTML file or served."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from polystream.cli._io import EXIT_OK, EXIT_USAGE, read_chunks

__all__ = ["register"]


def register(sub: Any) -> None:
    """Add the ``inspect`` subcommand to the parser."""
    from polystream.dialects import DIALECTS

    parser = sub.add_parser(
        "inspect",
        help="inspect captures in a browser: timeline, native and unified events, result, "
        "diff, transcoding preview",
        description="Decode captures of any dialect and show them in a browser page: the "
        "timeline, the native events beside the unified events they became, the rebuilt "
        "result, warnings and errors with their byte offsets, the provider's final object, "
        "a diff of two captures and a transcoding preview with its loss report. --html "
        "writes one self-contained page; otherwise the page is served on this machine "
        "(the server extra). See docs/inspect.md.",
    )
    parser.add_argument("files", nargs="*", metavar="FILE", help="captures (- for stdin)")
    parser.add_argument("--html", metavar="OUT", help="write one self-contained page to OUT")
    parser.add_argument(
        "--dialect",
        choices=["auto", *DIALECTS],
        default="auto",
        metavar="NAME|auto",
        help="the captures' dialect (default: detect each)",
    )
    parser.add_argument(
        "--content-type",
        metavar="TYPE",
        help="the responses' Content-Type (an audio type: a raw audio body)",
    )
    parser.add_argument("--strict", action="store_true", help="protocol anomalies are errors")
    parser.add_argument("--host", default="127.0.0.1", help="interface (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8766, help="port (default: 8766; 0: any)")
    parser.add_argument("--no-browser", action="store_true", help="serve without opening a browser")
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from polystream.inspector import build_capture

    if args.html is not None and not args.files:
        print("polystream: error: inspect --html needs at least one FILE", file=sys.stderr)
        return EXIT_USAGE
    options: dict[str, Any] = {"dialect": args.dialect, "strict": args.strict}
    if args.content_type:
        options["content_type"] = args.content_type
    captures = []
    for path in args.files:
        data = b"".join(read_chunks(path))
        name = "stdin" if path == "-" else path.replace("\\", "/").rsplit("/", 1)[-1]
        capture = build_capture(data, name=name, **options)
        fatal = capture["fatal"]
        if fatal is not None:
            print(
                f"polystream: warning: {path}: decoding stopped at byte "
                f"{fatal['byte_offset']}: {fatal['message']}",
                file=sys.stderr,
            )
        captures.append(capture)
    if args.html is not None:
        return _write(args.html, captures)
    return _serve(args, captures)


def _write(path: str, captures: list[dict[str, Any]]) -> int:
    from polystream.inspector import page_data, render_page

    page = render_page(page_data(captures))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(page)
    print(f"polystream: wrote {path} ({len(captures)} capture(s))", file=sys.stderr)
    return EXIT_OK


def _serve(args: argparse.Namespace, captures: list[dict[str, Any]]) -> int:
    try:
        from polystream.server._h1server import run
        from polystream.server._inspect import MAX_CAPTURE_BYTES, PREFIX, Inspector
    except ImportError as exc:
        print(
            "polystream: error: serving the inspector needs the server extra "
            f"(pip install 'polystream[server]'), or use --html OUT: {exc}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    import socket

    from polystream.cli._listen import bind

    sock = bind("inspect", args.host, args.port)
    if sock is None:
        return EXIT_USAGE
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if sock.family == socket.AF_INET6 else args.host
    url = f"http://{host}:{port}{PREFIX}"
    print(f"polystream inspector on {url} (Ctrl-C stops it)", file=sys.stderr, flush=True)
    inspector = Inspector(captures=captures)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/":
            await send(
                {
                    "type": "http.response.start",
                    "status": 302,
                    "headers": [(b"location", b"/inspect")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        await inspector(scope, receive, send)

    if not args.no_browser:
        import webbrowser

        webbrowser.open(url)
    try:
        run(app, sock=sock, max_body_bytes=MAX_CAPTURE_BYTES)
    finally:
        sock.close()
    return EXIT_OK
