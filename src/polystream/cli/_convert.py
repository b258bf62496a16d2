"""``polystream convert``: re-emit a stream in another dialect."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

import msgspec

from polystream.cli._io import EXIT_INVALID, EXIT_OK, fail
from polystream.cli._progress import progress_chunks
from polystream.errors import PolystreamError

if TYPE_CHECKING:
    from polystream.accumulate import Result

__all__ = ["register", "source_problems"]


def source_problems(result: Result) -> list[str]:
    """What was wrong with the source stream, as warnings to print: it was cut short
    (the target's stream then ends where it did), or its decoder skipped over errors
    (tolerant decoding)."""
    problems: list[str] = []
    if result.status == "truncated":
        cause = result.error.message if result.error is not None else "no terminal event"
        problems.append(f"the source stream was truncated ({cause}): the output ends where it did")
    skipped = [error for error in result.errors if error.kind == "protocol"]
    if skipped:
        first = skipped[0]
        where = f" at byte {first.byte_offset}" if first.byte_offset is not None else ""
        problems.append(
            f"{len(skipped)} decode error(s) in the source stream were skipped "
            f"(the first{where}: {first.message})"
        )
    return problems


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
        for chunk in progress_chunks(args.file, "convert"):
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
    problems = source_problems(transcoder.result())
    label = "error" if args.strict else "warning"
    for problem in problems:
        print(f"polystream: {label}: {problem}", file=sys.stderr)
    return EXIT_INVALID if problems and args.strict else EXIT_OK


def register(sub: Any) -> None:
    """Add the ``convert`` subcommand to the parser."""
    from polystream.dialects import DIALECTS

    names = ", ".join(DIALECTS)
    parser = sub.add_parser(
        "convert",
        help="re-emit a stream in another dialect",
        description="Decode a stream of any dialect and write it as another dialect's "
        "wire bytes to stdout. What the target cannot carry, and the values it requires "
        "that the source did not have, are listed in the loss report (--loss-report "
        "FILE, JSON). A source that was cut short or had decode errors is warned about "
        "on stderr. Exit 0 on success, 1 when the input is not a valid stream (with "
        "--strict: also when it was cut short or had errors), 2 for usage errors.",
    )
    parser.add_argument(
        "--from",
        dest="source",
        choices=["auto", *DIALECTS],
        default="auto",
        metavar="NAME|auto",
        help=f"the source dialect, one of: {names}; auto: detect it",
    )
    parser.add_argument(
        "--to",
        required=True,
        choices=list(DIALECTS),
        metavar="NAME",
        help=f"the target dialect, one of: {names}",
    )
    parser.add_argument(
        "--framing",
        choices=["sse", "json_array"],
        default=None,
        help="the output framing of gemini_generate (default: sse)",
    )
    parser.add_argument(
        "--from-framing",
        choices=["auto", "sse", "json_array"],
        default="auto",
        help="the input framing of gemini_generate; auto: detect it",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="protocol anomalies of the source are errors, and a source cut short or "
        "with decode errors exits 1",
    )
    parser.add_argument(
        "--loss-report", metavar="FILE", help="write the loss report (JSON) to FILE"
    )
    parser.add_argument("file", metavar="FILE|-", help="input file, or - for stdin")
    parser.set_defaults(run=_run)
