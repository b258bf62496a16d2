"""``polystream demo``: one agent turn through every dialect, over real HTTP.

Starts the emulator on a free loopback port, then for each of the eight dialects runs
the demo turn (see :mod:`polystream.scenario._demo`): step 1 asks for the weather and
gets reasoning and a ``get_weather`` call; step 2 sends the tool result and gets
reasoning and the answer. The responses are read with httpx streaming and decoded by
polystream's own decoders (no official SDK involved); the unified results are shown
side by side with the time to first event, the event and byte counts. No API key and
no network needed. Exit 0 when every dialect produced the expected result, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Final

import msgspec

__all__ = ["STEPS", "register", "render", "run_demo"]


def register(sub: Any) -> None:
    """Add the ``demo`` subcommand to the parser."""
    demo = sub.add_parser(
        "demo",
        help="run one turn (reasoning, tool call, answer) through every dialect, offline",
        description="Start the emulator on a free loopback port and run one agent turn "
        "with reasoning, a tool call and a final answer through all eight dialects over "
        "real HTTP, decoding each stream with polystream. Exit 0 when every dialect gives "
        "the expected result, 1 otherwise.",
    )
    demo.add_argument("--json", action="store_true", help="one JSON document for machines")
    demo.set_defaults(run=_cmd_demo)


def _call(client: Any, dialect: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """One streamed request, decoded as it arrives. Returns figures and the result."""
    from polystream.decoding import StreamDecoder
    from polystream.errors import PolystreamError

    decoder = StreamDecoder(dialect)
    first: float | None = None
    count = 0
    size = 0
    started = time.perf_counter()
    error: str | None = None
    try:
        with client.stream("POST", path, json=body) as response:
            if response.status_code != 200:
                response.read()
                error = f"HTTP {response.status_code}: {response.text[:200]}"
            else:
                for chunk in response.iter_raw():
                    size += len(chunk)
                    events = decoder.feed(chunk)
                    if events and first is None:
                        first = time.perf_counter() - started
                    count += len(events)
        count += len(decoder.close())
    except (PolystreamError, OSError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # httpx transport errors: report, never crash the demo
        error = f"{type(exc).__name__}: {exc}"
    elapsed = time.perf_counter() - started
    result = decoder.result()
    return {
        "ttfe": first,
        "elapsed": elapsed,
        "events": count,
        "bytes": size,
        "result": result,
        "error": error,
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def _run_dialect(client: Any, dialect: str) -> dict[str, Any]:
    from polystream.scenario._demo import (
        DEMO_ANSWER,
        DEMO_ARGUMENTS,
        DEMO_REASONING,
        DEMO_TOOL,
        demo_request,
    )

    first = demo_request(dialect, 1)
    step1 = _call(client, dialect, first.path, first.body)
    calls = step1["result"].tool_calls
    call = calls[0] if calls else None
    second = demo_request(dialect, 2, call.id if call is not None else None)
    step2 = _call(client, dialect, second.path, second.body)
    r1, r2 = step1["result"], step2["result"]
    problems: list[str] = []
    for number, step in ((1, step1), (2, step2)):
        if step["error"] is not None:
            problems.append(f"step {number}: {step['error']}")
        elif step["result"].status != "completed":
            problems.append(f"step {number}: status {step['result'].status}")
    if call is None or call.name != DEMO_TOOL or call.arguments != DEMO_ARGUMENTS:
        problems.append("step 1: expected the get_weather call with its arguments")
    if (r1.reasoning, r2.reasoning) != DEMO_REASONING:
        problems.append("unexpected reasoning")
    if r2.text != DEMO_ANSWER:
        problems.append(f"step 2: unexpected text {r2.text!r}")
    usage = r2.usage
    return {
        "dialect": dialect,
        "ok": not problems,
        "status": r2.status if r1.status == "completed" else r1.status,
        "ttfe_ms": _ms(step1["ttfe"]),
        "ttfe_ms_step2": _ms(step2["ttfe"]),
        "elapsed_ms": _ms(step1["elapsed"] + step2["elapsed"]),
        "events": step1["events"] + step2["events"],
        "bytes": step1["bytes"] + step2["bytes"],
        "reasoning": [r1.reasoning, r2.reasoning],
        "tool_call": None
        if call is None
        else {
            "id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        },
        "text": r2.text,
        "finish_reasons": [
            None
            if r.finish_reason is None
            else {"unified": r.finish_reason.unified, "raw": r.finish_reason.raw}
            for r in (r1, r2)
        ],
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
            "total_tokens": usage.total_tokens,
        },
        "problems": problems,
    }


def _safe_run(client: Any, dialect: str) -> dict[str, Any]:
    """Run one dialect; a dialect that fails to run is reported, never a crash."""
    try:
        return _run_dialect(client, dialect)
    except Exception as exc:
        return {
            "dialect": dialect,
            "ok": False,
            "status": "error",
            "ttfe_ms": None,
            "ttfe_ms_step2": None,
            "elapsed_ms": None,
            "events": 0,
            "bytes": 0,
            "reasoning": ["", ""],
            "tool_call": None,
            "text": "",
            "finish_reasons": [],
            "usage": {},
            "problems": [f"{type(exc).__name__}: {exc}"],
        }


def run_demo() -> dict[str, Any]:
    """Run the demo and return its JSON document (see ``docs/emulator.md``)."""
    import httpx

    from polystream.dialects import SSE_DIALECTS
    from polystream.scenario import Emulator
    from polystream.scenario._demo import DEMO_ANSWER, DEMO_QUESTION, DEMO_SCENARIOS
    from polystream.server import ServerThread

    with (
        ServerThread(Emulator(DEMO_SCENARIOS)) as server,
        httpx.Client(base_url=server.base_url, timeout=30.0) as client,
    ):
        dialects = [_safe_run(client, dialect) for dialect in SSE_DIALECTS]
    return {
        "ok": all(d["ok"] for d in dialects),
        "question": DEMO_QUESTION,
        "expected_text": DEMO_ANSWER,
        "dialects": dialects,
    }


STEPS: Final = ("the question -> a tool call", "the tool result -> the answer")
"""What each of the demo's two requests does."""


def _console() -> Any:
    """A console for stdout: a terminal's own width, else 120 columns without colours."""
    from rich.console import Console

    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        "✓ — °C ━".encode(encoding)
    except (LookupError, UnicodeEncodeError):
        # A terminal that cannot show the table's characters (PYTHONIOENCODING=ascii):
        # replace what it cannot encode rather than fail.
        reconfigure = getattr(sys.stdout, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=120, color_system=None)
    return console


def render(report: dict[str, Any], console: Any) -> None:
    """Print the demo's report on ``console`` (a rich Console): the unified result of
    both steps, then one row per dialect. Readable down to 80 columns: the finish
    reasons of the two steps go on two lines, and no figure is ever cut."""
    from rich import box
    from rich.table import Table

    from polystream.scenario._demo import DEMO_SCENARIOS

    scripted = round(1000 * max(s.timing.first_event for s in DEMO_SCENARIOS))
    rows = report["dialects"]
    console.print(
        f"[bold]polystream demo[/bold]: one agent turn, two requests, through {len(rows)} "
        "dialects over HTTP (the emulator on loopback, each stream decoded by polystream)"
    )
    console.print(f"[bold]user:[/bold] {report['question']}")
    reference = next((row for row in rows if row["ok"]), None)
    if reference is not None:
        call = reference["tool_call"]
        arguments = msgspec.json.encode(call["arguments"]).decode()
        console.print("[bold]unified result[/bold] (the same in every dialect marked ✓):")
        console.print(f"[bold]step 1[/bold]: {STEPS[0]}")
        console.print(f"  reasoning: {reference['reasoning'][0]}")
        console.print(f"  tool call: {call['name']}({arguments})")
        console.print(f"[bold]step 2[/bold]: {STEPS[1]}")
        console.print(f"  reasoning: {reference['reasoning'][1]}")
        console.print(f"  answer:    {reference['text']}")

    def number(header: str, values: list[str]) -> None:
        # (Never cut: as wide as its widest figure.)
        width = max(len(v) for v in values) if values else 1
        table.add_column(header, justify="right", no_wrap=True, min_width=width)

    table = Table(
        title="per dialect: step 1 and step 2",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 0, 0, 1),  # (and the box's blank divider: two spaces between columns)
        pad_edge=False,
    )
    cells = [
        (
            "—" if row["ttfe_ms"] is None else f"{row['ttfe_ms']:.1f}",
            str(row["events"]),
            str(row["bytes"]),
        )
        for row in rows
    ]
    table.add_column("dialect", no_wrap=True)
    number("first\nevent\nms*", [c[0] for c in cells])
    number("events", [c[1] for c in cells])
    number("bytes", [c[2] for c in cells])
    reasons = [[r for r in row["finish_reasons"] if r is not None] for row in rows]
    for header, key in (("native\nfinish", "raw"), ("unified\nfinish", "unified")):
        words = [len(str(r[key])) for rs in reasons for r in rs]
        table.add_column(header, overflow="fold", min_width=max(words, default=1))
    table.add_column("ok", no_wrap=True)
    for row, (ttfe, events, size), finish in zip(rows, cells, reasons, strict=True):
        table.add_row(
            row["dialect"],
            ttfe,
            events,
            size,
            "\n".join(str(r["raw"]) for r in finish) or "—",
            "\n".join(str(r["unified"]) for r in finish) or "—",
            "[green]✓[/green]" if row["ok"] else "[red]✗[/red]",
        )
    console.print(table)
    console.print(
        f"* from the request to the first event of step 1, including the {scripted} ms the "
        "emulator waits before a reply's first event (scripted)"
    )
    for row in rows:
        for problem in row["problems"]:
            console.print(f"[red]{row['dialect']}: {problem}[/red]")
    good = sum(1 for row in rows if row["ok"])
    console.print(f"{good}/{len(rows)} dialects produced the expected result.")


def _cmd_demo(args: argparse.Namespace) -> int:
    try:
        report = run_demo()
    except ImportError as exc:
        print(
            f"polystream: error: demo needs the server extra "
            f"(pip install 'polystream[server]'): {exc}",
            file=sys.stderr,
        )
        return 2
    if args.json:
        sys.stdout.buffer.write(msgspec.json.encode(report) + b"\n")
        sys.stdout.flush()
    else:
        render(report, _console())
    return 0 if report["ok"] else 1
