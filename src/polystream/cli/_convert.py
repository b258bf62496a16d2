"""``polystream convert``: re-emit a stream in another dialect."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from polystream.cli._io import fail, read_chunks
from polystream.errors import PolystreamError

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from polystream.transcode import Transcoder

    source_options: dict[str, Any] = {}
    if args.from_framing != "auto":
        source_options["framing"] = args.from_framing
    target_options: dict[str, Any] = {}
    if args.framing is not None:
        target_options["framing"] = args.framing
    out = sys.stdout.buffer
    try:
        transcoder = Transcoder(
            args.to,
            source=args.source,
            strict=args.strict,
            source_options=source_options,
            target_options=target_options,
        )
        for chunk in read_chunks(args.file):
            out.write(transcoder.feed(chunk))
            out.flush()
        out.write(transcoder.close())
        out.flush()
    except PolystreamError as exc:
        return fail(str(exc))
    if args.loss_report:
        report = {
            "source": transcoder.source,
            "target": args.to,
            "losses": msgspec.to_builtins(transcoder.losses),
        }
        with open(args.loss_report, "wb") as handle:
            handle.write(msgspec.json.format(msgspec.json.encode(report), indent=2) + b"\n")
    return 0


def register(sub: Any) -> None:
    """Add the ``convert`` subcommand to the parser."""
    from polystream.dialects import DIALECTS

    parser = sub.add_parser(
        "convert",
        help="re-emit a stream in another dialect",
        description="Decode a stream of any dialect and write it as another dialect's "
        "wire bytes to stdout. What the target cannot carry is listed in the loss "
        "report (--loss-report FILE, JSON). Exit 0 on success, 1 when the input is not "
        "a valid stream, 2 for usage errors.",
    )
    parser.add_argument(
        "--from",
        dest="source",
        choices=["auto", *DIALECTS],
        default="auto",
        metavar="NAME|auto",
        help="source dialect (default: detect)",
    )
    parser.add_argument(
        "--to", required=True, choices=list(DIALECTS), metavar="NAME", help="target dialect"
    )
    parser.add_argument(
        "--framing",
        choices=["sse", "json_array"],
        default=None,
        help="output framing for gemini_generate (default sse)",
    )
    parser.add_argument(
        "--from-framing",
        choices=["auto", "sse", "json_array"],
        default="auto",
        help="input framing for gemini_generate (default: detect)",
    )
    parser.add_argument("--strict", action="store_true", help="protocol anomalies are errors")
    parser.add_argument("--loss-report", metavar="FILE", help="write the loss report here")
    parser.add_argument("file", metavar="FILE|-", help="input file, or - for stdin")
    parser.set_defaults(run=_run)
