"""The gateway's added latency per WebSocket message: ``python -m benchmarks.ws_gateway
[--quick] [--json OUT]``.

A scripted upstream (a ``websockets`` server), the gateway (``polystream gateway`` with
an ``openai_realtime`` upstream, once on polystream's own server and once on uvicorn)
and a minimal byte relay (:func:`relay`: a ``websockets`` server that opens the
upstream for each client and copies every message both ways, a few lines: the floor
under any WebSocket gateway in Python) run as real processes on loopback. One client
(the ``websockets`` asyncio client, no compression, as the openai SDK connects) keeps
one connection open through each path (directly to the upstream, through the relay,
through each gateway) and measures one-way latencies, per message: the sender puts
its ``time.monotonic_ns()`` (one clock for every process on the machine) in the
message, the receiver subtracts it from its own on arrival.

* **down** (upstream to client: what a Realtime session mostly carries, audio and text
  deltas): asked by the client, the upstream sends messages paced 2 ms apart, each
  alone on the wire;
* **up** (client to upstream): the client sends messages paced 2 ms apart; the upstream
  reports what it measured at the end of the burst;
* **burst** (down, unpaced): the upstream sends a whole burst at once (as a Realtime
  server sends a reply's audio, faster than it plays); the time from the burst's first
  send to its last message's arrival.

Two message sizes: a text delta (about 150 bytes of JSON) and an audio delta (100 ms of
24 kHz PCM16 in base64: about 6.5 KB). The paths are called in rotation, a burst of
each per round, so that all see the same machine load. Added latency is via - direct:
the difference of the medians, and the p99 of each message's latency less the direct
one of the same position in the same round. For each process in the middle, its CPU
time per relayed message over the measurement (``/proc``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.gateway import Server, _free_port, _pct, os_counters

__all__ = ["main", "relay", "upstream"]

PACE = 0.002
"""Seconds between paced messages."""

SIZES = {"text": 150, "audio": 6500}
"""The message sizes measured (bytes of JSON)."""

UPSTREAM_KEY = "bench-upstream-key-0123456789"
GATEWAY_KEY = "bench-gateway-key-0123456789"


def _message(kind: str, size: int) -> str:
    """A message of about ``size`` bytes whose ``t`` is its send time."""
    head = f'{{"type":"{kind}","t":{time.monotonic_ns()},"delta":"'
    return head + "A" * max(0, size - len(head) - 2) + '"}'


# -- the upstream and the relay (each its own process) -------------------------------------


async def _serve_upstream(port: int) -> None:
    from websockets.asyncio.server import ServerConnection, serve

    async def handle(ws: ServerConnection) -> None:
        measured: list[int] = []
        async for raw in ws:
            now = time.monotonic_ns()
            message = json.loads(raw)
            kind = message["type"]
            if kind == "up":
                measured.append(now - message["t"])
            elif kind == "report":
                await ws.send(json.dumps({"type": "report", "latencies": measured}))
                measured = []
            elif kind == "down":
                count, size, paced = message["count"], message["size"], message["paced"]
                for _ in range(count):
                    await ws.send(_message("d", size))
                    if paced:
                        await asyncio.sleep(PACE)
                await ws.send('{"type":"down.done"}')

    async with serve(handle, "127.0.0.1", port, compression=None, max_size=None):
        await asyncio.Future()


def upstream(port: int) -> None:
    """Serve the scripted upstream on ``port`` until stopped."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_upstream(port))


async def _serve_relay(port: int, upstream_port: int) -> None:
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import ServerConnection, serve

    async def handle(client: ServerConnection) -> None:
        path = client.request.path if client.request is not None else "/"
        url = f"ws://127.0.0.1:{upstream_port}{path}"
        async with connect(url, compression=None, max_size=None) as up:

            async def pump(source: Any, target: Any) -> None:
                async for message in source:
                    await target.send(message)

            tasks = [asyncio.create_task(pump(client, up)), asyncio.create_task(pump(up, client))]
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                task.cancel()

    async with serve(handle, "127.0.0.1", port, compression=None, max_size=None):
        await asyncio.Future()


def relay(port: int, upstream_port: int) -> None:
    """Serve the minimal byte relay on ``port`` in front of ``upstream_port``."""
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_relay(port, upstream_port))


# -- the measuring client -----------------------------------------------------------------------


async def _down(ws: Any, count: int, size: int) -> list[int]:
    """A paced downstream burst: each message's one-way latency (ns)."""
    await ws.send(json.dumps({"type": "down", "count": count, "size": size, "paced": True}))
    out: list[int] = []
    while True:
        raw = await ws.recv()
        now = time.monotonic_ns()
        if raw == '{"type":"down.done"}':
            return out
        out.append(now - int(raw[raw.index('"t":') + 4 : raw.index(',"delta"')]))


async def _burst(ws: Any, count: int, size: int) -> int:
    """An unpaced burst: from the first message's send to the last one's arrival."""
    await ws.send(json.dumps({"type": "down", "count": count, "size": size, "paced": False}))
    first = last = 0
    while True:
        raw = await ws.recv()
        now = time.monotonic_ns()
        if raw == '{"type":"down.done"}':
            return last - first
        sent = int(raw[raw.index('"t":') + 4 : raw.index(',"delta"')])
        first = first or sent
        last = now


async def _up(ws: Any, count: int, size: int) -> list[int]:
    for _ in range(count):
        await ws.send(_message("up", size))
        await asyncio.sleep(PACE)
    await ws.send('{"type":"report"}')
    report = json.loads(await ws.recv())
    latencies: list[int] = report["latencies"]
    return latencies


async def _measure(urls: dict[str, str], rounds: int, count: int) -> dict[str, Any]:
    from websockets.asyncio.client import connect

    headers = {"Authorization": f"Bearer {GATEWAY_KEY}"}
    conns = {
        name: await connect(url, additional_headers=headers, compression=None, max_size=None)
        for name, url in urls.items()
    }
    data: dict[str, Any] = {}
    try:
        for size_name, size in SIZES.items():
            cells: dict[str, dict[str, list[list[int]]]] = {
                name: {"down": [], "up": [], "burst": []} for name in urls
            }
            for ws in conns.values():  # (a warm-up round, not counted)
                await _down(ws, count, size)
                await _up(ws, count, size)
            for _ in range(rounds):
                for name, ws in conns.items():
                    cells[name]["down"].append(await _down(ws, count, size))
                    cells[name]["up"].append(await _up(ws, count, size))
                    cells[name]["burst"].append([await _burst(ws, 100, size)])
            data[size_name] = cells
    finally:
        for ws in conns.values():
            await ws.close()
    return data


def _summary(cells: dict[str, dict[str, list[list[int]]]], what: str) -> dict[str, Any]:
    """Per path: the median and p99 latency (µs), and the added ones against direct."""
    direct = cells["direct"][what]
    flat_direct = [v for burst in direct for v in burst]
    out: dict[str, Any] = {}
    for name, cell in cells.items():
        rounds = cell[what]
        flat = [v for burst in rounds for v in burst]
        entry = {
            "median_us": _pct(flat, 0.5) / 1000,
            "p99_us": _pct(flat, 0.99) / 1000,
            "messages": len(flat),
        }
        if name != "direct":
            pairs = [
                via - base
                for via_round, base_round in zip(rounds, direct, strict=True)
                for via, base in zip(via_round, base_round, strict=False)
            ]
            entry["added_median_us"] = (_pct(flat, 0.5) - _pct(flat_direct, 0.5)) / 1000
            entry["added_p99_us"] = _pct(pairs, 0.99) / 1000
        out[name] = entry
    return out


def run(quick: bool = False) -> dict[str, Any]:
    """Start the processes, measure, stop them; the results."""
    rounds, count = (5, 20) if quick else (30, 40)
    folder = Path(tempfile.mkdtemp(prefix="polystream-ws-bench-"))
    up_port = _free_port()
    servers: dict[str, Server] = {}
    try:
        servers["upstream"] = Server(
            "upstream",
            ["upstream", str(up_port)],
            up_port,
            folder / "upstream.log",
            module="benchmarks.ws_gateway",
        )
        relay_port = _free_port()
        servers["relay"] = Server(
            "relay",
            ["relay", str(relay_port), str(up_port)],
            relay_port,
            folder / "relay.log",
            module="benchmarks.ws_gateway",
        )
        config = folder / "gateway.json"
        config.write_text(
            json.dumps(
                {
                    "upstreams": {
                        "rt": {
                            "dialect": "openai_realtime",
                            "base_url": f"http://127.0.0.1:{up_port}/v1",
                            "api_key": UPSTREAM_KEY,
                        }
                    },
                    "api_key": GATEWAY_KEY,
                }
            )
        )
        for server in ("polystream", "uvicorn"):
            port = _free_port()
            argv = [
                "gateway",
                "--listen",
                f"127.0.0.1:{port}",
                "--config",
                str(config),
                "--server",
                server,
            ]
            servers[f"gateway ({server})"] = Server(
                f"gateway ({server})", argv, port, folder / f"gateway-{server}.log"
            )
        path = "/v1/realtime?model=gpt-realtime"
        urls = {
            "direct": f"ws://127.0.0.1:{up_port}{path}",
            "relay": f"ws://127.0.0.1:{relay_port}{path}",
            **{
                name: f"ws://127.0.0.1:{servers[name].port}/openai{path}"
                for name in servers
                if name.startswith("gateway")
            },
        }
        middle = [name for name in urls if name != "direct"]
        before = {name: os_counters(servers[name].proc.pid) for name in middle}
        measured = asyncio.run(_measure(urls, rounds, count))
        after = {name: os_counters(servers[name].proc.pid) for name in middle}
    finally:
        for server in servers.values():
            server.stop()
    # Each path relayed, per size, warm-up included: paced down and up, and bursts.
    relayed = len(SIZES) * ((rounds + 1) * count * 2 + rounds * 100)
    cpu: dict[str, float | None] = {}
    for name in middle:
        start, end = before[name], after[name]
        cpu[name] = (
            None
            if start is None or end is None
            else (end["user"] + end["kernel"] - start["user"] - start["kernel"]) / relayed * 1e6
        )
    results: dict[str, Any] = {
        "rounds": rounds,
        "messages_per_burst": count,
        "pace_ms": PACE * 1000,
        "cpu_us_per_message": cpu,
        "sizes": {},
    }
    for size_name, cells in measured.items():
        results["sizes"][size_name] = {
            "bytes": SIZES[size_name],
            "down": _summary(cells, "down"),
            "up": _summary(cells, "up"),
            "burst": _summary(cells, "burst"),
        }
    return results


def table(results: dict[str, Any]) -> str:
    """A markdown table of the added latencies (µs)."""
    lines = [
        "| message | path | down: added median / p99 µs | up: added median / p99 µs "
        "| burst of 100: median ms |",
        "|---|---|---|---|---|",
    ]
    for size_name, cell in results["sizes"].items():
        for name in cell["down"]:
            down, up, burst = cell["down"][name], cell["up"][name], cell["burst"][name]
            if name == "direct":
                added_down = f"({down['median_us']:.0f} / {down['p99_us']:.0f} itself)"
                added_up = f"({up['median_us']:.0f} / {up['p99_us']:.0f} itself)"
            else:
                added_down = f"{down['added_median_us']:.0f} / {down['added_p99_us']:.0f}"
                added_up = f"{up['added_median_us']:.0f} / {up['added_p99_us']:.0f}"
            lines.append(
                f"| {size_name} ({cell['bytes']:,} B) | {name} | {added_down} | {added_up} "
                f"| {burst['median_us'] / 1000:.2f} |"
            )
    cpu = ", ".join(
        f"{name} {value:.0f}" for name, value in results["cpu_us_per_message"].items() if value
    )
    lines.append("")
    lines.append(f"CPU µs per relayed message: {cpu}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["upstream"]:
        upstream(int(args[1]))
        return 0
    if args[:1] == ["relay"]:
        relay(int(args[1]), int(args[2]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ws_gateway")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (indicative)")
    parser.add_argument("--json", metavar="OUT", help="write the results as JSON")
    options = parser.parse_args(args)
    results = run(quick=options.quick)
    if options.json:
        Path(options.json).write_text(json.dumps(results, indent=2))
    print(table(results))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
