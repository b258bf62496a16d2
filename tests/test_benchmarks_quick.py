"""The benchmark suite works end to end (quick mode: tiny workloads, one repetition).

This checks the machinery and that the comparison is like for like: every workload
decodes to its expected text and tool arguments with polystream AND with every peer.
It never asserts a timing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import mmap
import os
import random
import re
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
from benchmarks import floor, gateway, linearity, peers, run, workloads
from benchmarks._wakeup import GAPS

import polystream
from polystream.dialects import get_dialect
from polystream.errors import LocalProtocolError
from polystream.events import UsageUpdate

SCHEDSTAT = Path("/proc/self/schedstat").exists()
PROC = Path("/proc/self/stat").exists()
QUICK_PEERS = (
    "polystream",
    "polystream_client",
    "minimal",
    "whole_array",
    "generic",
    "sdk",
    "sdk_raw",
)


def _dialect_available(name: str) -> bool:
    try:
        get_dialect(name).module().Decoder  # noqa: B018 - the attribute is the check
    except (LocalProtocolError, AttributeError):
        return False
    return True


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench") / "quick.json"
    status = run.main(["--quick", "--json", str(out), "--peers", ",".join(QUICK_PEERS)])
    data: dict[str, Any] = json.loads(out.read_text())
    data["status"] = status
    return data


@pytest.fixture(scope="module")
def small() -> list[workloads.Workload]:
    return workloads.build_all(run.QUICK_SCALE)


def test_quick_run_exits_clean(quick: dict[str, Any]) -> None:
    assert quick["status"] == 0
    assert quick["quick"] is True
    assert set(quick["workloads"]) == set(workloads.WORKLOADS)


@pytest.mark.parametrize("name", workloads.WORKLOADS)
def test_every_peer_gets_the_same_answer(quick: dict[str, Any], name: str) -> None:
    work = workloads.build(name, run.QUICK_SCALE)
    for level in peers.LEVELS:
        cells = quick["times"][name][level]
        expected = {p for p in QUICK_PEERS if peers.applies(peers.PEERS[p], work, level)}
        assert set(cells) == expected, (name, level)
        for peer, cell in cells.items():
            if peer.startswith("polystream"):
                assert _dialect_available(work.dialect), work.dialect
            assert "median" in cell, (name, level, peer, cell)
            assert cell["check"] is None, (name, level, peer, cell["check"])
            assert cell["sha256"] == work.sha256  # the very same bytes
            assert len(cell["times"]) == 1


def test_targets_are_reported(quick: dict[str, Any]) -> None:
    names = [t["target"] for t in quick["targets"]]
    assert any("import polystream" in n for n in names)
    assert any("polystream decode" in n for n in names)
    assert any(n.startswith("memory ") for n in names)
    for target in quick["targets"]:
        assert target["status"] in {"PASS", "FAIL", "N/A"}
    startup = quick["startup"]
    assert startup["imports"]["polystream"]["median"] > 0
    assert "failed" not in startup["cli"], startup["cli"]


def test_transcoding_round_trips_the_answer(quick: dict[str, Any]) -> None:
    measured = 0
    for name, cell in quick["transcode"].items():
        for target, value in cell.get("targets", {}).items():
            if "ratio" in value:
                measured += 1
                assert value["check"] is None, (name, target, value["check"])
    assert measured > 0


def test_memory_is_measured_on_the_result(quick: dict[str, Any]) -> None:
    for name in run.MEMORY_WORKLOADS:
        for peer, cell in quick["memory"][name].items():
            if "skipped" in cell:
                assert peer == "polystream"
                continue
            assert cell["peak"] > 0
            assert cell["check"] is None, (name, peer)


def _lf_array(work: workloads.Workload) -> workloads.Workload:
    """``work`` (a CRLF JSON array) with LF line ends, its event offsets moved along."""
    body = work.body.replace(b"\r\n", b"\n")
    ends = [end - work.body[:end].count(b"\r\n") for end in work.events]
    return dataclasses.replace(work, body=body, events=ends)


@pytest.mark.parametrize("chunks", [1, 2, 7])
@pytest.mark.parametrize("lf", [False, True])
@pytest.mark.parametrize("level", peers.LEVELS)
def test_the_array_minimal_loop_splits_on_comma_lines(chunks: int, lf: bool, level: str) -> None:
    # Written from the workload generator: Google's layout, one element or several,
    # CRLF or LF. At the http level the body comes one wire event per read, so the
    # opening bracket arrives with the first element and the closing one alone.
    work = workloads.gemini_array("w", chunks=chunks)
    if lf:
        work = _lf_array(work)
        assert b"\r" not in work.body
    assert work.body.count(peers._separator(work)) == chunks - 1
    for name in ("minimal", "whole_array"):
        outcome = peers.prepare(name, work, level)()
        assert outcome.text == work.text, (name, level)
        assert peers.check(work, outcome) is None


def test_the_array_minimal_loop_decodes_each_element_on_its_own() -> None:
    # A payload that is not one element (two run together, no comma line between them)
    # is no element: the per-element loop fails on it, the whole-array decode does not
    # see it (msgspec reads the array as JSON, whatever its layout).
    work = workloads.gemini_array("w", chunks=3)
    joined = work.body.replace(b"\r\n,\r\n", b",", 1)
    broken = dataclasses.replace(work, body=joined, events=[len(joined)])
    with pytest.raises(msgspec.DecodeError):
        peers.prepare("minimal", broken, "core")()
    assert peers.prepare("whole_array", broken, "core")().text == work.text


def test_check_catches_a_wrong_answer(small: list[workloads.Workload]) -> None:
    work = next(w for w in small if w.name == "chat_tool")
    right = peers.Outcome(work.text, list(work.tools))
    assert peers.check(work, right) is None
    assert peers.check(work, peers.Outcome(work.text + "x", list(work.tools))) is not None
    assert peers.check(work, peers.Outcome(work.text, work.tools[:1])) is not None
    name, args = work.tools[0]
    broken = [(name, args.replace("1", "2", 1)), *work.tools[1:]]
    assert peers.check(work, peers.Outcome(work.text, broken)) is not None


def test_workloads_are_deterministic() -> None:
    first = workloads.build("responses_text", run.QUICK_SCALE)
    again = workloads.build("responses_text", run.QUICK_SCALE)
    assert first.body == again.body
    assert first.text == again.text


def test_workloads_have_the_documented_shape(small: list[workloads.Workload]) -> None:
    by_name = {w.name: w for w in small}
    responses = by_name["responses_text"].body.decode()
    deltas = responses.count("event: response.output_text.delta\n")
    assert deltas == by_name["responses_text"].deltas
    assert len(re.findall(r'"obfuscation":"[A-Za-z0-9]+"', responses)) == deltas
    tool = by_name["responses_tool"].body.decode()
    assert (
        tool.count("event: response.function_call_arguments.delta\n")
        == by_name["responses_tool"].deltas
    )
    chat = by_name["chat_tool"].body.decode()
    assert chat.count('"arguments":"') - 2 == by_name["chat_tool"].deltas
    assert chat.endswith("data: [DONE]\n\n")
    anthropic = by_name["anthropic_text"].body.decode()
    text_deltas = anthropic.count('"type":"text_delta"')
    assert text_deltas == by_name["anthropic_text"].deltas
    assert anthropic.count("event: ping\n") == 1 + text_deltas // 100
    big_tool = by_name["anthropic_tool_20k"]
    assert big_tool.body.decode().count('"input_json_delta"') == big_tool.deltas
    gemini = by_name["gemini_sse"].body.decode()
    assert gemini.count("data: ") == gemini.count('"usageMetadata"') == by_name["gemini_sse"].deltas
    assert "\r\n\r\n" in gemini and "\n\n" not in gemini.replace("\r\n\r\n", "")
    array = by_name["gemini_array"]
    assert array.body.startswith(b"[{") and array.body.endswith(b"\r\n]")
    assert json.loads(array.body)[-1]["candidates"][0]["finishReason"] == "STOP"
    interactions = by_name["interactions_text"].body.decode()
    assert interactions.count("event: step.delta\n") == by_name["interactions_text"].deltas
    assert interactions.count('"event_id":"') == interactions.count("event: ") - 1


def test_workload_files_round_trip(tmp_path: Path, small: list[workloads.Workload]) -> None:
    work = small[0]
    work.write(tmp_path)
    loaded = workloads.Workload.load(tmp_path, work.name)
    assert loaded.body == work.body
    assert loaded.tools == work.tools
    assert b"".join(loaded.chunks()) == work.body


def test_profile_reports_hot_spots(tmp_path: Path, small: list[workloads.Workload]) -> None:
    work = next(w for w in small if w.name == "anthropic_text")
    target = tmp_path / "profile.txt"
    breakdown = run.profile([work], target, lambda message: None)
    parts = breakdown[work.name]
    assert set(parts) == {
        "framing",
        "decoder (incl. framing)",
        "accumulate",
        "decode() total",
        "minimal loop",
    }
    assert all(value > 0 for value in parts.values())
    text = target.read_text()
    assert "tottime" in text and "_on_event" in text


def test_gateway_quick_mode_measures_every_part(quick: dict[str, Any]) -> None:
    bench = quick["gateway"]
    assert bench["quick"] is True
    assert set(bench["latency"]) == {route.name for route in gateway.ROUTES}
    # The unpaced run again with the client on a short slice, where Linux lets it choose.
    short = bench["latency_short_slice"]
    if gateway.set_slice(gateway.SHORT_SLICE_NS) and gateway.set_slice(0):
        assert set(short) == set(bench["latency"])
    else:
        assert short == {}
    # Chat pass-through through a gateway journalling to SQLite, paced and unpaced.
    chat = gateway.ROUTES[0].name
    assert set(bench["paced_sqlite"]) == set(bench["latency_sqlite"]) == {chat}
    durable = [bench["paced_sqlite"][chat], bench["latency_sqlite"][chat]]
    assert all(cell["journal"] == "sqlite" for cell in durable)
    runs = [(name, cell, None) for name, cell in bench["latency"].items()]
    runs += [(name, cell, gateway.SHORT_SLICE_NS) for name, cell in short.items()]
    runs += [(chat, cell, None) for cell in durable]
    for name, cell, client_slice in runs:
        assert cell["client_slice_ns"] == client_slice
        for side in ("direct", "gateway"):
            assert cell[side]["errors"] == 0, (name, side, cell[side]["error_examples"])
            assert cell[side]["total"]["median"] > 0
            assert cell[side]["first"]["median"] <= cell[side]["total"]["median"]
            waits = cell[side]["run_queue_wait"]
            assert set(waits) == {"client", "emulator", "gateway"}
            if SCHEDSTAT:  # Linux reports each process's wait for a core
                assert all(value is not None and value >= 0 for value in waits.values()), waits
        assert set(cell["added_total"]) == set(cell["added_first"]) == {"median", "p99"}
    # The byte relay, called in the same rotation at the default slice (paced and
    # unpaced), on the same bytes as the direct call: every reply correct.
    for pace in ("paced", "latency"):
        assert set(bench[pace]) == {route.name for route in gateway.ROUTES}
        for name, cell in bench[pace].items():
            assert cell["relay"]["errors"] == 0, (name, cell["relay"]["error_examples"])
            assert cell["relay"]["bytes"] == cell["direct"]["bytes"] > 0
            assert cell["relay"]["first"]["median"] <= cell["relay"]["total"]["median"]
            assert set(cell["relay_added_first"]) == {"median", "p99"}
            # The gateway's added latency over the relay's, from the measured figures
            # (none where the relay added nothing); the quick mode's p99s not judged.
            assert cell["p99_judged"] is False
            assert cell["requests"] < gateway.P99_REQUESTS
            for what in ("total", "first"):
                for stat in ("median", "p99"):
                    via = cell[f"added_{what}"][stat]
                    under = cell[f"relay_added_{what}"][stat]
                    ratio = cell[f"ratio_{what}"][stat]
                    assert ratio == (via / under if under > 0 else None), (name, what, stat)
            # LiteLLM's proxy in the same rotation when given, else named as not measured.
            if bench["litellm"]["measured"]:
                assert cell["litellm"]["errors"] == 0, cell["litellm"]["error_examples"]
                assert set(cell["litellm_added_first"]) == {"median", "p99"}
            else:
                assert "litellm" not in cell and "litellm_added_first" not in cell
    if not bench["litellm"]["measured"]:
        assert bench["litellm"]["reason"]
    if not os.environ.get(gateway.LITELLM_ENV):
        assert bench["litellm"] == {
            "executable": None,
            "measured": False,
            "reason": "no LiteLLM proxy given (set POLYSTREAM_BENCH_LITELLM or --litellm "
            "to its executable)",
        }
    for cell in [*short.values(), *durable]:
        assert "relay" not in cell and "relay_added_first" not in cell
        assert "ratio_first" not in cell and "litellm" not in cell
    # What the operating system did for each process in the middle, per request of its
    # own: counted for the gateway always, and for the relay where it was called.
    for pace in ("paced", "latency"):
        for cell in bench[pace].values():
            proxy = {"litellm"} if bench["litellm"]["measured"] else set()
            assert set(cell["os_per_request"]) == {"gateway", "relay", *proxy}
    for cell in [*short.values(), *durable]:
        assert set(cell["os_per_request"]) == {"gateway"}
    for cell in [*bench["paced"].values(), *bench["latency"].values(), *short.values()]:
        for counts in cell["os_per_request"].values():
            if not PROC:
                assert counts is None
                continue
            assert set(counts) == set(gateway.OS_COUNTERS)
            assert all(value >= 0 for value in counts.values()), counts
            # A request's bytes arrive while the process sleeps: at least one wake-up.
            assert counts["wakeups"] >= 1, counts
    # The minimal gateway, in one rotation with the direct call, the relay and the
    # gateway, paced and unpaced: every reply correct, the same text as the gateway's.
    assert set(bench["minimal"]) == {"paced", "latency"}
    for cells in bench["minimal"].values():
        assert set(cells) == {route.name for route in gateway.ROUTES}
        for name, cell in cells.items():
            for side in ("direct", "relay", "gateway", "minimal"):
                assert cell[side]["errors"] == 0, (name, side, cell[side]["error_examples"])
            assert set(cell["os_per_request"]) == {"gateway", "relay", "minimal"}
            for what in ("total", "first"):
                assert set(cell[f"minimal_added_{what}"]) == {"median", "p99"}
    # The gateway's work warm and after each sleep, in its own process.
    wakeup = bench["wakeup"]
    assert wakeup["samples"] == gateway.QUICK.wakeup_samples
    assert list(wakeup["units"]) == ["request", "event", "least"]
    for cells in wakeup["units"].values():
        assert [label for label, _, _ in GAPS] == list(cells)
        assert cells["warm"]["ratio"] == 1.0
        assert all(cell["median"] > 0 and cell["p90"] >= cell["median"] for cell in cells.values())
    # Where the time to the first delta went, through a probed gateway: every reply's
    # records found, each stage measured.
    assert set(bench["breakdown"]) == {"paced", "unpaced"}
    for cells in bench["breakdown"].values():
        assert set(cells) == {route.name for route in gateway.ROUTES}
        for cell in cells.values():
            assert cell["matched"] == cell["replies"] == gateway.QUICK.breakdown_requests
            stages = [cell["median"][key] for key, _ in gateway.STAGES]
            assert all(value > 0 for value in stages), cell
            assert cell["median"]["own"] > 0 and cell["median"]["last"] >= 0
    streams = gateway.QUICK.concurrency[0]
    cells = {cell["target"]: cell for cell in bench["concurrency"]}
    assert set(cells) == {"direct", "gateway"}
    for cell in cells.values():
        assert cell["ok"] == streams, cell["error_examples"]
        assert cell["max_overlap"] > 1  # the streams really ran at the same time
    memory = bench["memory"]["memory"]
    assert [int(n) for n in memory] == list(gateway.QUICK.memory_lengths)
    for cell in memory.values():
        assert cell["check"] is None
        assert cell["stream_bytes"] > 0
    names = [t["target"] for t in quick["targets"] if t["target"].startswith("gateway")]
    assert any("added latency per request" in n for n in names)
    assert any("added latency to first delta" in n for n in names)
    # The ratio targets: medians judged, the quick mode's p99s reported as indicative.
    ratios = [t for t in quick["targets"] if t["target"].endswith("at most 2.5x the byte relay's")]
    assert len(ratios) == 3 * (4 + 2)  # per route: paced 4, unpaced to the first delta 2
    for t in ratios:
        if ", p99," in t["target"]:
            assert t["status"] == "N/A" and "indicative, not judged" in t["figure"], t
        else:
            assert t["status"] in {"PASS", "FAIL"}, t
    assert any("concurrent streams" in n for n in names)
    assert any("by a minimal gateway" in n for n in names)


def test_gateway_client_checks_the_stream() -> None:
    text = "Hello, world"
    body = "".join(
        f'data: {{"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
        f'"choices":[{{"index":0,"delta":{{"content":"{part}"}},"finish_reason":null}}]}}\n\n'
        for part in ("Hello", ", world")
    )
    body += (
        'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
        '"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    reply = gateway.Reply(200, body.encode(), 0.0, 0.1, 0.2)
    assert gateway.check(reply, "openai_chat", text) is None
    assert gateway.check(reply, "openai_chat", text + "!") is not None
    cut = gateway.Reply(200, body.encode()[: len(body) // 2], 0.0, None, 0.2)
    assert gateway.check(cut, "openai_chat", text) is not None
    assert gateway.check(gateway.Reply(503, b"{}", 0.0, None, 0.1), "openai_chat", "") is not None
    assert gateway._max_overlap([(0, 2), (1, 3), (2.5, 4), (5, 6)]) == 2


def test_gateway_breakdown_cuts_each_reply_at_the_probed_reads_and_writes() -> None:
    # One reply: sent at 10, its first delta seen at 18, its end at 30. The gateway got the
    # request at 11, asked the upstream at 12.5; the upstream's head came at 13, the first
    # delta's bytes at 16 (written at 16.75), the last event's at 25 (written at 25.5).
    # Records of other replies (before 10, after 30) and a late upstream read of the
    # reply before (at 10.5, before the request) are left out.
    records = [
        ("out", 9.0, 10),
        ("upstream_in", 10.5, 5),
        ("request", 11.0, 300),
        ("upstream_out", 12.5, 340),
        ("upstream_in", 13.0, 260),
        ("upstream_in", 16.0, 200),
        ("out", 16.75, 700),
        ("upstream_in", 25.0, 200),
        ("out", 25.5, 150),
        ("request", 31.0, 300),
    ]
    reply = gateway.Reply(200, b"", 10.0, 18.0, 30.0)
    cut = gateway.breakdown(records, [reply])
    assert cut["replies"] == cut["matched"] == 1
    assert cut["median"] == {
        "to_gateway": 1.0,
        "request": 1.5,
        "upstream": 3.5,
        "first": 0.75,
        "to_client": 1.25,
        "own": 2.25,
        "last": 0.5,
    }
    assert sum(cut["median"][key] for key, _ in gateway.STAGES) == reply.first - reply.sent
    # A reply whose records are not all there (no upstream request) is not matched.
    lost = gateway.breakdown(records[:3], [reply])
    assert lost["matched"] == 0 and lost["median"]["own"] is None


def test_floor_quick_mode_measures_every_step(tmp_path: Path) -> None:
    out = tmp_path / "floor.json"
    assert floor.main(["--quick", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["chunks"] == 200
    sse = data["workloads"]["gemini_sse"]
    array = data["workloads"]["gemini_array"]
    assert list(sse) == [step for step in floor.STEPS if step != "whole array"]
    assert list(array) == list(floor.STEPS)
    for steps in (sse, array):
        assert steps["minimal"]["ratio"] == 1.0
        assert all(cell["seconds"] > 0 for cell in steps.values())
    for name in ("gemini_sse", "gemini_array"):
        cells = data["transcoding"][name]
        assert list(cells) == list(floor.TARGETS)
        assert all(cell["encode"] > 0 and cell["transcode"] > 0 for cell in cells.values())
        # The write floor: only into Gemini's own dialect, whose encoder it stands for.
        writes = {target for target, cell in cells.items() if "write" in cell}
        assert writes == {"gemini_generate", "gemini_generate:json_array"}
        assert all(cells[target]["write"] > 0 for target in writes)


def test_the_write_floor_checks_it_writes_the_encoders_bytes() -> None:
    work = workloads.gemini_sse("gemini_sse", chunks=50)
    info = get_dialect("gemini_generate")
    decoder = info.decoder(framing="sse")
    events = decoder.feed(work.body) + decoder.close()
    for framing in ("sse", "json_array"):
        # The 49 chunks of one text part (the last one holds a signature), but the
        # first and the last of them.
        assert len(floor._write_floor(events, info, {"framing": framing})()) == 47
    # A usage whose string holds a colon: the encoder spaces it otherwise than the
    # floor's one replace, and the floor says so.
    at = [i for i, e in enumerate(events) if type(e) is UsageUpdate][20]
    usage = events[at].usage
    raw = dict(usage.raw, promptTokensDetails=[{"modality": "A:B", "tokenCount": 1}])
    events[at] = UsageUpdate(usage=msgspec.structs.replace(usage, raw=raw), extra=events[at].extra)
    with pytest.raises(AssertionError, match="does not write what gemini_generate writes"):
        floor._write_floor(events, info, {"framing": "sse"})


@pytest.mark.parametrize("maker", [workloads.gemini_sse, workloads.gemini_array])
def test_floor_steps_compute_what_polystream_does(maker: Any) -> None:
    work = maker("w", chunks=50)
    steps = floor.steps_for(work)
    result = {name: step() for name, step in steps.items()}
    text, usage = result["polystream"]
    assert text == work.text
    assert usage.output_tokens == 50 * 4 + 23  # the last chunk's counts
    for name, (step_text, _usage) in result.items():
        assert step_text == work.text, name
    assert result["minimal"][1] is None
    # The usage dict step keeps the provider's object; the later steps its conversion,
    # equal to the usage polystream's whole decode ends with.
    assert result["+ usage dict"][1] == usage.raw
    for name in floor.STEPS[floor.STEPS.index("+ counts") : -1]:
        assert result[name][1] == usage, name


@pytest.mark.parametrize("maker", [workloads.gemini_sse, workloads.gemini_array])
def test_floor_framing_step_reads_elements_across_feeds(maker: Any) -> None:
    # 600 chunks are more than two 64 KiB feeds: chunks are cut between feeds.
    work = maker("w", chunks=600)
    assert len(work.body) > 2 * 65536
    expected = polystream.decode(work.body, work.dialect, framing=work.framing).usage
    steps = floor.steps_for(work)
    for name in ("+ incremental framing", "+ fields checked", "polystream decoder"):
        text, usage = steps[name]()
        assert text == work.text, name
        assert usage == expected, name


@pytest.mark.parametrize("maker", [workloads.gemini_sse, workloads.gemini_array])
@pytest.mark.parametrize(
    ("field", "other"),
    [
        (b'"role": "model"', b'"role": "user"'),
        (b'"index": 0', b'"index": 1'),
        (b'"modelVersion": "', b'"modelVersion": "x'),
        (b'"text": "', b'"thought": true, "text": "'),
    ],
)
def test_floor_fields_step_checks_each_chunk(maker: Any, field: bytes, other: bytes) -> None:
    work = maker("w", chunks=30)
    # The 11th chunk is no usual chunk any more: the step counts one usual chunk less.
    at = -1
    for _ in range(11):
        at = work.body.index(field, at + 1)
    body = work.body[:at] + other + work.body[at + len(field) :]
    changed = workloads.Workload(**{**work.__dict__, "body": body})
    assert floor.steps_for(work)["+ fields checked"]()[0] == work.text
    with pytest.raises(AssertionError, match="28 usual chunks of 30"):
        floor.steps_for(changed)["+ fields checked"]()


def test_floor_fields_step_rejects_an_unknown_field() -> None:
    work = workloads.gemini_sse("w", chunks=5)
    body = work.body.replace(b'"responseId"', b'"other": 1, "responseId"', 1)
    changed = workloads.Workload(**{**work.__dict__, "body": body})
    with pytest.raises(msgspec.ValidationError, match="unknown field"):
        floor.steps_for(changed)["+ fields checked"]()


def test_floor_rejects_a_step_that_loses_text() -> None:
    work = workloads.gemini_sse("w", chunks=20)
    broken = workloads.Workload(**{**work.__dict__, "text": work.text + "!"})
    with pytest.raises(AssertionError, match="gave another text"):
        floor.measure(broken, 1)


def test_floor_transcoding_checks_what_it_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    work = workloads.gemini_sse("w", chunks=20)
    assert set(floor.transcoding(work, 1)) == set(floor.TARGETS)
    # An encoder that loses the text is caught, not timed.
    from polystream.dialects import anthropic_messages

    original = anthropic_messages.Encoder.encode

    def lossy(self: Any, event: Any) -> bytes:
        data: bytes = original(self, event)
        return data.replace(b'"text_delta","text":"', b'"text_delta","text":"x')

    monkeypatch.setattr(anthropic_messages.Encoder, "encode", lossy)
    with pytest.raises(AssertionError, match="did not survive"):
        floor.transcoding(work, 1)


def test_os_counters_read_a_process_and_fail_soft() -> None:
    assert gateway.os_counters(2**31 - 1) is None  # no such process
    before = gateway.os_counters(os.getpid())
    if not PROC:
        assert before is None
        return
    assert before is not None and set(before) == set(gateway.OS_COUNTERS)
    # Fresh memory touched page by page: each page is a fault of this process.
    pages = 256
    block = mmap.mmap(-1, pages * mmap.PAGESIZE)
    for offset in range(0, pages * mmap.PAGESIZE, mmap.PAGESIZE):
        block[offset] = 1
    block.close()
    # A wait that the process is woken from: a voluntary switch.
    time.sleep(0.01)
    after = gateway.os_counters(os.getpid())
    assert after is not None
    grown = gateway.per_request(before, after, 1)
    assert grown is not None
    assert grown["page_faults"] >= pages
    assert grown["wakeups"] >= 1
    assert all(value >= 0 for value in grown.values()), grown
    halved = gateway.per_request(before, after, 2)
    assert halved == {name: value / 2 for name, value in grown.items()}
    assert gateway.per_request(None, after, 1) is None
    assert gateway.per_request(before, after, 0) is None


def test_run_delay_reads_this_process_and_fails_soft() -> None:
    assert gateway.RunDelay(2**31 - 1)() is None  # no such process
    reader = gateway.RunDelay()
    before = reader()
    if not SCHEDSTAT:  # run-queue waits come from Linux's schedstat: none elsewhere
        assert before is None
        return
    assert before is not None and before >= 0
    # Busy work cannot make the wait go backwards.
    sum(range(200_000))
    after = reader()
    assert after is not None and after >= before
    reader.close()


def test_run_delay_reader_keeps_its_files_open_and_lists_threads_again() -> None:
    if not SCHEDSTAT:
        assert gateway.RunDelay()() is None
        return
    done = threading.Event()
    worker = threading.Thread(target=done.wait)
    worker.start()
    reader = gateway.RunDelay()
    try:
        assert len(reader._files) >= 2  # this thread and the worker
        first = reader()
        assert first is not None
        # A thread that ended still reads (its wait no longer grows): the sum never
        # goes backwards, as a fresh listing would make it.
        done.set()
        worker.join()
        second = reader()
        assert second is not None and second >= first
        # A file that no longer reads: the threads are listed again.
        os.close(reader._files[0])
        third = reader()
        assert third is not None
        assert len(reader._files) == len(os.listdir("/proc/self/task"))
    finally:
        reader.close()
    assert reader._files == []
    assert reader() is not None  # closed: it lists again
    reader.close()


def test_linearity_quick(tmp_path: Path) -> None:
    # Every case runs at both sizes and checks its answer (the long text decoded, the
    # dialect detected); the figures are not asserted.
    out = tmp_path / "linearity.json"
    assert linearity.main(["--quick", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["quick"] is True
    assert set(data["cases"]) == set(linearity.CASES)
    for cell in data["cases"].values():
        assert cell["small_bytes"] > 0
        assert cell["small"] >= 0 and cell["large"] >= 0


def test_wakeup_units_do_the_gateways_work() -> None:
    from benchmarks import _wakeup

    request = _wakeup._request_unit()()
    assert request.url == "http://127.0.0.1:1/openai/v1/chat/completions"  # type: ignore[attr-defined]
    sent = json.loads(request.body)  # type: ignore[attr-defined]
    assert sent["model"] == "gpt-4o-mini" and sent["stream"] is True
    assert sent["messages"] == [{"role": "user", "content": "kw=paced; please answer"}]
    run_event = _wakeup._event_unit()
    for n in (3, 4):  # (the stream's first two entries are its opening)
        entries = run_event()
        assert isinstance(entries, list) and len(entries) == 1
        cursor, data = entries[0]
        # The chunk as the client gets it: its resume id, its text.
        assert data.startswith(b"id: ") and b'"content":" stream"' in data
        assert cursor.endswith(f".{n}")
    assert _wakeup._least_unit()() == sum(1 + i for i in range(20)) == 210


def test_the_relay_copies_bytes_both_ways_on_one_upstream_connection() -> None:
    from benchmarks import _relay

    async def scenario() -> tuple[list[bytes], int]:
        accepted = 0
        seen: list[bytes] = []

        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal accepted
            accepted += 1
            while data := await reader.read(65536):
                seen.append(data)
                writer.write(b"<" + data + b">")
            writer.close()

        upstream = await asyncio.start_server(echo, "127.0.0.1", 0)
        upstream_port = upstream.sockets[0].getsockname()[1]
        listen_port = gateway._free_port()
        relay = asyncio.get_running_loop().create_task(_relay.serve(listen_port, upstream_port))
        for _ in range(100):
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", listen_port)
                break
            except OSError:
                await asyncio.sleep(0.01)
        replies = []
        for message in (b"one", b"two"):
            writer.write(message)
            replies.append(await reader.readexactly(len(message) + 2))
        writer.close()
        relay.cancel()
        upstream.close()
        return replies, accepted

    replies, accepted = asyncio.run(scenario())
    assert replies == [b"<one>", b"<two>"]
    assert accepted == 1  # one upstream connection for the client's, kept


def _chunked_reply(events: list[bytes]) -> bytes:
    """An HTTP/1.1 reply whose chunked body carries ``events``, one chunk each."""
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
    head += b"transfer-encoding: chunked\r\n\r\n"
    return head + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


# Anthropic Messages events as the emulator writes them (the benchmark's upstream).
_MESSAGES_EVENTS = [
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":'
    b'"message","role":"assistant","model":"m","content":[],"stop_reason":null,'
    b'"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":0}}}\n\n',
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"Hello"}}\n\n',
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":", world"}}\n\n',
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
    b'"stop_sequence":null},"usage":{"output_tokens":2}}\n\n',
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
]


class _Recorder:
    """Stands for the minimal gateway's client side: records what its upstream hands it."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []
        self.ends = 0
        self.transport = None

    def events(self, events: list[bytes]) -> None:
        self.seen.extend(events)

    def end(self) -> None:
        self.ends += 1


@pytest.mark.parametrize("split", ["whole", "bytes", "random"])
def test_the_minimal_gateway_unframes_its_upstream_across_any_split(split: str) -> None:
    from benchmarks import _minimal

    client = _Recorder()
    upstream = _minimal._Upstream(client)  # type: ignore[arg-type]
    reply = _chunked_reply(_MESSAGES_EVENTS)
    wire = reply + reply  # two replies on one kept-alive connection
    if split == "whole":
        reads = [wire]
    elif split == "bytes":
        reads = [wire[i : i + 1] for i in range(len(wire))]
    else:
        rng = random.Random(7)
        reads, start = [], 0
        while start < len(wire):
            step = rng.randint(1, 40)
            reads.append(wire[start : start + step])
            start += step
    for data in reads:
        upstream.data_received(data)
    assert client.seen == [e[:-2] for e in _MESSAGES_EVENTS] * 2
    assert client.ends == 2
    assert upstream.buffer == b"" and upstream.sse == b"" and upstream.in_head


def test_the_minimal_gateway_gives_a_chat_client_a_correct_chat_stream() -> None:
    from benchmarks import _minimal

    written: list[bytes] = []
    client = _minimal._Client(1)
    client.transport = type("T", (), {"write": staticmethod(written.append)})()  # type: ignore[assignment]
    client.waiting = []
    body = json.dumps({"model": "bench-claude", "stream": True, "messages": []}).encode()
    client.data_received(
        b"POST /openai/v1/chat/completions HTTP/1.1\r\ncontent-length: %d\r\n\r\n%s"
        % (len(body), body)
    )
    sent = client.waiting[0]
    assert sent.startswith(b"POST /anthropic/v1/messages HTTP/1.1\r\n")
    upstream = json.loads(sent.split(b"\r\n\r\n", 1)[1])
    assert upstream["model"] == gateway.CLAUDE_MODEL and upstream["max_tokens"] == 4096
    client.events([e[:-2] for e in _MESSAGES_EVENTS])
    client.end()
    reply = b"".join(written)
    head, _, chunked = reply.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in head
    size, _, rest = chunked.partition(b"\r\n")
    body_bytes = rest[: int(size, 16)]
    assert rest[int(size, 16) :] == b"\r\n0\r\n\r\n"
    result = polystream.decode(body_bytes, "openai_chat")
    assert result.text == "Hello, world"
    assert result.status == "completed" and result.finish_reason is not None
    assert result.finish_reason.unified == "stop"
    assert result.usage is not None and result.usage.output_tokens == 2


def test_the_minimal_gateways_figures_name_any_wrong_reply_in_the_rotation() -> None:
    def side(errors: int = 0) -> dict[str, Any]:
        return {"errors": errors, "total": {"median": 0.2}, "first": {"median": 0.01}}

    cell: dict[str, Any] = {
        "direct": side(),
        "relay": side(),
        "gateway": side(),
        "minimal": side(),
        "added_total": {"median": 0.0015, "p99": 0.002},
        "added_first": {"median": 0.0012, "p99": 0.002},
        "minimal_added_total": {"median": 0.0003, "p99": 0.0004},
        "minimal_added_first": {"median": 0.0004, "p99": 0.0005},
    }
    data = {"minimal": {"paced": {"chat -> chat (pass-through)": cell}}}
    figures = [t["figure"] for t in gateway.targets(data)]
    assert figures == ["0.30 ms; 1.20 ms", "0.40 ms; 0.80 ms"]
    cell["gateway"]["errors"] = 2
    cell["minimal"]["errors"] = 1
    figures = [t["figure"] for t in gateway.targets(data)]
    assert figures == ["0.30 ms; 1.20 ms, 3 WRONG replies", "0.40 ms; 0.80 ms, 3 WRONG replies"]


def _latency_cell(requests: int) -> dict[str, Any]:
    """A paced latency cell as the latency phase records it, with the relay called."""

    def side(errors: int = 0) -> dict[str, Any]:
        return {"errors": errors, "total": {"median": 0.2}, "first": {"median": 0.01}}

    cell: dict[str, Any] = {
        "requests": requests,
        "direct": side(),
        "relay": side(),
        "gateway": side(),
        "added_total": {"median": 0.0009, "p99": 0.002},
        "added_first": {"median": 0.0008, "p99": 0.003},
        "relay_added_total": {"median": 0.0004, "p99": 0.001},
        "relay_added_first": {"median": 0.0004, "p99": 0.001},
    }
    cell.update(gateway.relay_ratios(cell))
    return cell


def test_the_gateway_is_judged_against_the_relay_in_its_rotation() -> None:
    chat = gateway.ROUTES[0].name
    cell = _latency_cell(gateway.P99_REQUESTS)
    assert cell["p99_judged"] is True
    assert cell["ratio_total"] == {"median": 0.0009 / 0.0004, "p99": 2.0}
    assert cell["ratio_first"] == {"median": 2.0, "p99": 3.0}
    rows = [
        (t["status"], t["target"], t["figure"]) for t in gateway.targets({"paced": {chat: cell}})
    ]
    where = f"gateway {chat}, paced: added latency"
    assert rows == [
        ("PASS", f"{where} per request, median, at most 2.5x the byte relay's",
         "gateway 0.90 ms, relay 0.40 ms: 2.25x"),
        ("PASS", f"{where} per request, p99, at most 2.5x the byte relay's",
         "gateway 2.00 ms, relay 1.00 ms: 2.00x"),
        ("PASS", f"{where} to first delta, median, at most 2.5x the byte relay's",
         "gateway 0.80 ms, relay 0.40 ms: 2.00x"),
        ("FAIL", f"{where} to first delta, p99, at most 2.5x the byte relay's",
         "gateway 3.00 ms, relay 1.00 ms: 3.00x"),
    ]  # fmt: skip


def test_a_p99_of_few_requests_is_indicative_and_a_relay_adding_nothing_gives_no_ratio() -> None:
    chat = gateway.ROUTES[0].name
    cell = _latency_cell(5)
    cell["relay_added_first"] = {"median": -0.0001, "p99": 0.0}
    cell.update(gateway.relay_ratios(cell))
    assert cell["p99_judged"] is False
    assert cell["ratio_first"] == {"median": None, "p99": None}
    rows = [(t["status"], t["figure"]) for t in gateway.targets({"paced": {chat: cell}})]
    assert rows == [
        ("PASS", "gateway 0.90 ms, relay 0.40 ms: 2.25x"),
        ("N/A", "gateway 2.00 ms, relay 1.00 ms: 2.00x "
         "(p99 of 5 requests: indicative, not judged)"),
        ("FAIL", "gateway 0.80 ms, relay -0.10 ms: no ratio (the relay added nothing)"),
        ("N/A", "gateway 3.00 ms, relay 0.00 ms: no ratio (the relay added nothing) "
         "(p99 of 5 requests: indicative, not judged)"),
    ]  # fmt: skip
    # A wrong reply from the relay fails the ratio it enters.
    cell["relay"]["errors"] = 1
    statuses = [t["status"] for t in gateway.targets({"paced": {chat: cell}})]
    assert statuses == ["FAIL", "N/A", "FAIL", "N/A"]
    assert gateway.targets({"paced": {chat: cell}})[0]["figure"].endswith(", 1 WRONG replies")


def test_the_gateway_is_judged_lower_than_litellm_only_where_it_was_measured() -> None:
    chat = gateway.ROUTES[0].name
    cell = _latency_cell(gateway.P99_REQUESTS)
    cell["litellm"] = {"errors": 0}
    cell["litellm_added_total"] = {"median": 0.02, "p99": 0.0015}
    cell["litellm_added_first"] = {"median": 0.01, "p99": 0.04}
    data: dict[str, Any] = {
        "paced": {chat: cell},
        "litellm": {"executable": "litellm", "measured": True, "reason": None},
    }
    lower = [
        (t["status"], t["figure"])
        for t in gateway.targets(data)
        if t["target"].endswith("lower than LiteLLM's proxy")
    ]
    assert lower == [
        ("PASS", "gateway 0.90 ms, LiteLLM 20.00 ms"),
        ("FAIL", "gateway 2.00 ms, LiteLLM 1.50 ms"),
        ("PASS", "gateway 0.80 ms, LiteLLM 10.00 ms"),
        ("PASS", "gateway 3.00 ms, LiteLLM 40.00 ms"),
    ]
    cell["litellm"]["errors"] = 2
    figures = [t["figure"] for t in gateway.targets(data) if "LiteLLM" in t["target"]]
    assert figures[0] == "gateway 0.90 ms, LiteLLM 20.00 ms, 2 WRONG replies"
    # Not measured: no comparison is made up, and the run says why.
    for key in ("litellm", "litellm_added_total", "litellm_added_first"):
        del cell[key]
    data["litellm"] = {"executable": None, "measured": False, "reason": "no LiteLLM proxy given"}
    rows = [(t["status"], t["target"], t["figure"]) for t in gateway.targets(data)]
    assert [row for row in rows if "LiteLLM" in row[1]] == [
        (
            "N/A",
            "gateway added latency lower than LiteLLM's proxy",
            "not measured: no LiteLLM proxy given",
        )
    ]
    table = gateway.relay_table(data)
    assert table is not None
    assert "LiteLLM not measured: no LiteLLM proxy given" in table
    cells = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in table.splitlines()
        if line.startswith("| chat")
    ]
    assert cells == [
        [chat, "paced", "per request", "0.40 ms / 1.00 ms", "0.90 ms / 2.00 ms",
         "2.25x / 2.00x", "not measured"],
        [chat, "paced", "to first delta", "0.40 ms / 1.00 ms", "0.80 ms / 3.00 ms",
         "2.00x / 3.00x", "not measured"],
    ]  # fmt: skip
    assert "p99s judged" in table


def test_litellm_is_configured_for_the_gateways_routes(tmp_path: Path) -> None:
    config = gateway.litellm_config(4321)
    routes = gateway._gateway_config(4321, 1)
    upstreams = {r["model"]: routes["upstreams"][r["upstream"]] for r in routes["routes"]}
    rewrites = {r["model"]: r["rewrite"] for r in routes["routes"]}
    assert [m["model_name"] for m in config["model_list"]] == list(upstreams)
    for model in config["model_list"]:
        params = model["litellm_params"]
        upstream = upstreams[model["model_name"]]
        # The same endpoint as the gateway's upstream, in the same dialect, same model.
        assert params["api_base"] == upstream["base_url"]
        provider = {"openai_chat": "openai", "anthropic_messages": "anthropic"}[upstream["dialect"]]
        assert params["model"] == f"{provider}/{rewrites[model['model_name']]}"
    env = gateway.litellm_env()
    assert "PYTHONPATH" not in env and env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


def test_a_litellm_proxy_that_does_not_start_is_named_with_its_log(tmp_path: Path) -> None:
    # A stand-in executable: records its arguments and the configuration, then exits.
    fake = tmp_path / "litellm"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > {tmp_path}/argv\n'
        'cat "$2" > ' + f"{tmp_path}/config\n"
        "echo 'no such option' >&2\nexit 2\n"
    )
    fake.chmod(0o755)
    emulator = type("Emulator", (), {"port": 4321})()
    with pytest.raises(RuntimeError, match=r"^LiteLLM proxy exited: no such option\n$"):
        gateway.start_litellm(tmp_path, emulator, str(fake))  # type: ignore[arg-type]
    argv = (tmp_path / "argv").read_text().split()
    assert argv[:5] == ["--config", str(tmp_path / "litellm.yaml"), "--host", "127.0.0.1", "--port"]
    assert json.loads((tmp_path / "config").read_text()) == gateway.litellm_config(4321)
    with pytest.raises(FileNotFoundError):
        gateway.start_litellm(tmp_path, emulator, str(tmp_path / "missing"))  # type: ignore[arg-type]


@pytest.mark.slow  # LiteLLM's proxy takes 10-20 s to start
@pytest.mark.skipif(
    not os.environ.get(gateway.LITELLM_ENV), reason=f"{gateway.LITELLM_ENV} not set"
)
def test_litellm_is_measured_in_the_rotation_on_every_route(tmp_path: Path) -> None:
    settings = dataclasses.replace(gateway.QUICK, paced_requests=2, warmup=1)
    emulator, texts = gateway.start_emulator(tmp_path, settings)
    servers = [emulator]
    try:
        servers.append(main := gateway.start_gateway(tmp_path, emulator, "memory", "t"))
        servers.append(relay := gateway.start_peer(tmp_path, emulator, "relay"))
        proxy = gateway.start_litellm(tmp_path, emulator, os.environ[gateway.LITELLM_ENV])
        servers.append(proxy)
        for route in gateway.ROUTES:
            cell = asyncio.run(
                gateway.measure_latency(
                    route, emulator, main, "".join(texts["paced"]), settings,
                    lambda message: None, keyword="paced", relay=relay, litellm=proxy,
                )
            )  # fmt: skip
            assert cell["litellm"]["errors"] == 0, (route.name, cell["litellm"]["error_examples"])
            assert cell["litellm"]["first"]["median"] > 0
            added = cell["litellm"]["total"]["median"] - cell["direct"]["total"]["median"]
            assert cell["litellm_added_total"]["median"] == added
    finally:
        for server in servers:
            server.stop()


def test_the_added_p99_pairs_each_request_with_the_direct_one_of_its_rotation() -> None:
    # 100 rotations: the direct call stalls by 5 ms on the first two, the gateway on the
    # third; otherwise the gateway takes 1 ms more, and its first delta 0.5 ms more.
    direct = [gateway.Reply(200, b"", 0.0, 0.010, 0.200) for _ in range(100)]
    via = [gateway.Reply(200, b"", 0.0, 0.0105, 0.201) for _ in range(100)]
    for i in (0, 1):
        direct[i] = gateway.Reply(200, b"", 0.0, 0.015, 0.205)
    via[2] = gateway.Reply(200, b"", 0.0, 0.0155, 0.206)
    # The gateway's stall counts once, on its side; the direct stalls make no negative
    # p99 (the difference of the two p99s would be 0.201 - 0.205 s).
    assert gateway.added_p99(direct, via, "total") == pytest.approx(0.001)
    via[3] = gateway.Reply(200, b"", 0.0, 0.0155, 0.206)
    assert gateway.added_p99(direct, via, "total") == pytest.approx(0.006)
    assert gateway.added_p99(direct, via, "first") == pytest.approx(0.0055)
    # A rotation without a first delta on either side is left out of the first's.
    via = [gateway.Reply(200, b"", 0.0, None, 0.201)] * 99 + [via[3]]
    assert gateway.added_p99(direct, via, "first") == pytest.approx(0.0055)
    assert gateway.added_p99(direct[:1], via[:1], "first") is None


def test_speech_benchmark_checks_both_peers_on_the_same_audio() -> None:
    from benchmarks import speech

    work = workloads.speech_sse("speech_sse", deltas=20, size=300)
    assert work.body.count(b"speech.audio.delta") == 20
    cells = speech.measure(work, repeat=1)
    assert set(cells) == {"polystream", "polystream_native", "sdk", "minimal"}
    for cell in cells.values():
        assert cell["check"] is None and len(cell["times"]) == 1
    # The check is of the audio and the usage: a wrong digest or usage fails every peer.
    wrong_audio = dataclasses.replace(work, meta={**work.meta, "audio_sha256": "0" * 64})
    wrong_usage = dataclasses.replace(work, meta={**work.meta, "usage": {"input_tokens": 1}})
    for wrong, what in ((wrong_audio, "audio differs"), (wrong_usage, "usage differs")):
        for cell in speech.measure(wrong, repeat=1).values():
            assert cell["check"].startswith(what)


@pytest.fixture(scope="module")
def realtime_session() -> Any:
    from benchmarks import realtime

    return realtime.realtime_session(
        responses=4,
        audio_deltas=6,
        chunk_ms=20,
        transcript_deltas=3,
        text_deltas=5,
        arg_fragments=4,
    )


def test_realtime_session_has_the_documented_shape(realtime_session: Any) -> None:
    from benchmarks import realtime
    from benchmarks.realtime import _Frames
    from openai.resources.realtime.realtime import RealtimeConnection
    from openai.types.realtime import ResponseAudioDeltaEvent

    from polystream.dialects._realtime_api.wire import SERVER_MESSAGES
    from polystream.events import ErrorEvent, Unknown
    from polystream.realtime import open_session

    session = realtime_session
    counts = session.counts
    # Four turns, the fourth in text mode: 3 x 6 audio deltas of 20 ms (960 bytes each).
    assert counts["response.created"] == counts["response.done"] == 4
    assert counts["response.output_audio.delta"] == 18
    assert counts["response.output_audio_transcript.delta"] == 9
    assert counts["response.output_text.delta"] == 5
    assert counts["response.function_call_arguments.delta"] == 16
    assert len(session.messages) == sum(counts.values())
    assert set(counts) <= SERVER_MESSAGES
    again = realtime.realtime_session(
        responses=4,
        audio_deltas=6,
        chunk_ms=20,
        transcript_deltas=3,
        text_deltas=5,
        arg_fragments=4,
    )
    assert again.sha256 == session.sha256 and again.answer == session.answer
    assert realtime.realtime_session(responses=4).sha256 != session.sha256
    answer = session.answer
    assert len(answer.audio) == 18 * 960
    assert len(answer.tools) == len(answer.usage) == 4
    assert all(json.loads(arguments)["rows"] for _, arguments in answer.tools)
    first = json.loads(session.messages[0])
    assert list(first)[:2] == ["type", "event_id"]
    assert first["session"]["audio"]["output"]["format"] == {"type": "audio/pcm", "rate": 24000}
    # polystream reads every message, strictly, as known messages.
    strict = open_session("openai_realtime", strict=True)
    events = [routed.event for message in session.messages for routed in strict.feed(message)]
    assert not [e for e in events if isinstance(e, ErrorEvent | Unknown)]
    # The SDK's receive path gives its typed models.
    connection = RealtimeConnection(_Frames(session.messages))  # type: ignore[arg-type]
    parsed = [connection.recv() for _ in session.messages]
    assert sum(type(event) is ResponseAudioDeltaEvent for event in parsed) == 18


def test_realtime_benchmark_peers_agree(realtime_session: Any) -> None:
    from benchmarks import realtime

    cells = realtime.measure(realtime_session, repeat=1)
    assert set(cells) == {"polystream", "sdk", "minimal", "minimal_msgspec"}
    for name, cell in cells.items():
        assert cell["check"] is None, (name, cell["check"])
        assert len(cell["times"]) == 1 and cell["messages_per_second"] > 0


def test_realtime_check_catches_a_wrong_answer(realtime_session: Any) -> None:
    from benchmarks import realtime

    right = realtime_session.answer
    assert realtime.check(realtime_session, right) is None
    name, arguments = right.tools[0]
    wrong = [
        dataclasses.replace(right, text=right.text + "x"),
        dataclasses.replace(right, transcript=right.transcript[1:]),
        dataclasses.replace(right, audio=right.audio[:-1] + bytes([right.audio[-1] ^ 1])),
        dataclasses.replace(right, tools=[(name, arguments[:-1]), *right.tools[1:]]),
        dataclasses.replace(right, usage=[(*right.usage[0][:5], None), *right.usage[1:]]),
    ]
    for answer in wrong:
        assert realtime.check(realtime_session, answer) is not None
