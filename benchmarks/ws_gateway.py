"""The gateway's added latency per WebSocket message: ``python -m benchmarks.ws_gateway
[--quick] [--json OUT]``.

A scripted upstream (a ``websockets`` server speaking the Realtime API's reply messages),
the gateway (``polystream gateway`` with an ``openai_realtime`` upstream: on polystream's
own server, on uvicorn, and on its own server once more with ``log_socket_usage``) and a
minimal byte relay (:func:`relay`: a ``websockets`` server that opens the upstream for
each client and copies every message both ways, a few lines: the floor under any
WebSocket gateway in Python) run as real processes on loopback. One client (the
``websockets`` asyncio client, without compression, as the openai SDK connects) keeps
one connection open through each path (directly to the upstream, through the relay,
through each gateway) and measures one-way latencies, per message: the sender puts its
``time.monotonic_ns()`` (one clock for every process on the machine) in the message,
the receiver subtracts it from its own on arrival.

* **down** (upstream to client: what a Realtime session mostly carries): asked by the
  client, the upstream sends a reply (``response.created``, its item and part, untimed),
  then ``response.output_audio.delta`` messages paced 2 ms apart, each alone on the wire,
  then ``response.done``;
* **up** (client to upstream): the client sends messages paced 2 ms apart; the upstream
  reports what it measured at the end of the burst;
* **burst** (down, unpaced): the upstream sends a reply's 100 deltas at once (as a
  Realtime server sends a reply's audio, faster than it plays): the time from the first
  delta's send to the last one's arrival.

Two message sizes: a small delta (about 250 bytes of JSON) and an audio delta (100 ms of
24 kHz PCM16 in base64: about 6.5 KB). The paths are called in rotation, a burst of each
per round, so that all see the same machine load. Added latency is via - direct: the
difference of the medians, and the p99 of each message's latency less the direct one's
at the same place in the same round. For each process in the middle, its CPU time
(user and kernel) per relayed message over the whole measurement (``/proc``).
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

SIZES = {"small": 250, "audio": 6500}
"""The message sizes measured (bytes of JSON)."""

GATEWAYS = (
    ("gateway (polystream)", "polystream", False),
    ("gateway (uvicorn)", "uvicorn", False),
    ("gateway (polystream), usage logged", "polystream", True),
)
"""The gateways measured: their name, server, and whether they log each reply's usage
(``log_socket_usage``: the family's session reads every relayed message)."""

UPSTREAM_KEY = "bench-upstream-key-0123456789"
GATEWAY_KEY = "bench-gateway-key-0123456789"


def _message(kind: str, size: int, reply: int = 0) -> str:
    """A message of about ``size`` bytes whose ``t`` is its send time: a Realtime
    ``response.output_audio.delta`` of reply ``reply`` (``kind`` ``d``), or the client's
    ``up``."""
    if kind == "d":
        head = (
            f'{{"type":"response.output_audio.delta","event_id":"event_{reply}",'
            f'"response_id":"resp_{reply}","item_id":"item_{reply}","output_index":0,'
            f'"content_index":0,"t":{time.monotonic_ns()},"delta":"'
        )
    else:
        head = f'{{"type":"{kind}","t":{time.monotonic_ns()},"delta":"'
    return head + "A" * max(0, size - len(head) - 2) + '"}'


def _reply_opening(reply: int) -> list[str]:
    """What a Realtime server sends before a reply's audio deltas (not timed)."""
    ids = f'"response_id":"resp_{reply}","item_id":"item_{reply}","output_index":0'
    return [
        f'{{"type":"response.created","event_id":"e","response":{{"id":"resp_{reply}",'
        '"object":"realtime.response","status":"in_progress","output":[]}}',
        f'{{"type":"response.output_item.added","event_id":"e","response_id":"resp_{reply}",'
        f'"output_index":0,"item":{{"id":"item_{reply}","type":"message","role":"assistant",'
        '"content":[]}}',
        f'{{"type":"response.content_part.added","event_id":"e",{ids},"content_index":0,'
        '"part":{"type":"audio","transcript":""}}',
    ]


def _reply_end(reply: int) -> str:
    """The ``response.done`` that ends a reply (not timed)."""
    return (
        f'{{"type":"response.done","event_id":"e","response":{{"id":"resp_{reply}",'
        '"object":"realtime.response","status":"completed","output":[],"usage":'
        '{"total_tokens":30,"input_tokens":10,"output_tokens":20}}}'
    )


# -- the upstream and the relay (each its own process) -------------------------------------


async def _serve_upstream(port: int) -> None:
    from websockets.asyncio.server import ServerConnection, serve

    async def handle(ws: ServerConnection) -> None:
        measured: list[int] = []
        replies = 0
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
                replies += 1
                for opening in _reply_opening(replies):
                    await ws.send(opening)
                for _ in range(count):
                    await ws.send(_message("d", size, replies))
                    if paced:
                        await asyncio.sleep(PACE)
                await ws.send(_reply_end(replies))
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
        at = raw.find(',"t":')
        if at >= 0:
            out.append(now - int(raw[at + 5 : raw.index(',"delta"')]))


async def _burst(ws: Any, count: int, size: int) -> int:
    """An unpaced burst: from the first message's send to the last one's arrival."""
    await ws.send(json.dumps({"type": "down", "count": count, "size": size, "paced": False}))
    first = last = 0
    while True:
        raw = await ws.recv()
        now = time.monotonic_ns()
        if raw == '{"type":"down.done"}':
            return last - first
        at = raw.find(',"t":')
        if at >= 0:
            first = first or int(raw[at + 5 : raw.index(',"delta"')])
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
        config = {
            "upstreams": {
                "rt": {
                    "dialect": "openai_realtime",
                    "base_url": f"http://127.0.0.1:{up_port}/v1",
                    "api_key": UPSTREAM_KEY,
                }
            },
            "api_key": GATEWAY_KEY,
        }
        for name, server, usage in GATEWAYS:
            port = _free_port()
            file = folder / f"gateway-{len(servers)}.json"
            file.write_text(json.dumps({**config, "log_socket_usage": usage}))
            argv = ["gateway", "--listen", f"127.0.0.1:{port}", "--config", str(file)]
            servers[name] = Server(
                name, [*argv, "--server", server], port, folder / f"{file.stem}.log"
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
    # Each path relayed, per size, warm-up included: paced down and up, and bursts (each
    # reply with its four untimed messages, and the end of each burst).
    relayed = len(SIZES) * ((rounds + 1) * (count * 2 + 6) + rounds * 106)
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
