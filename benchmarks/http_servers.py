"""The HTTP servers the gateway can run on, A/B, with a trivial app:
``python -m benchmarks.http_servers [--requests N] [--seconds S] [--src NAME=DIR ...]``.

Each server runs in its own process on loopback, serving an ASGI app that reads the
request body and streams a two-part chunked response (what a gateway's reply looks
like on the wire). One client process (raw HTTP/1.1 over asyncio sockets, the same code
for every server) measures:

* **latency**: sequential POSTs (a 300-byte body) on one keep-alive connection, the
  servers called in rotation, 100 requests at a time, so that all see the same machine
  load; per request the time from the write to the last byte of the response (median,
  p90, p99, in µs);
* **throughput**: 8 connections, each sending its next request when the last response
  is in, for ``--seconds`` per server (requests per second).

Servers: ``polystream`` (the gateway's default), ``uvicorn`` (``--server uvicorn``:
uvicorn's httptools protocol) and ``uvicorn-h11``; ``--src NAME=DIR`` adds
polystream's server from another source tree (to compare revisions).

``--gateway``: the gateway itself instead of the trivial app, on each server
(``polystream gateway --server polystream|uvicorn``, and ``--src`` trees with their own
server), in front of one emulator (``polystream serve``, as :mod:`benchmarks.gateway`
starts them): Chat pass-through streams of 300 deltas (unpaced) and of 100 deltas one
every 2 ms (paced), on one keep-alive connection per gateway, the gateways called in
rotation; per request the time to the first content delta and to the end (median,
p90, p99, in µs).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

APP = """
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": b"data: %d\\n\\n" % len(body),
                "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\\n\\n"})
"""

SERVE = {
    "polystream": "from polystream.server._h1server import run\nrun(app, '127.0.0.1', {port})",
    "uvicorn": "import uvicorn\nuvicorn.run(app, host='127.0.0.1', port={port}, "
    "log_level='warning', http='httptools')",
    "uvicorn-h11": "import uvicorn\nuvicorn.run(app, host='127.0.0.1', port={port}, "
    "log_level='warning', http='h11')",
}

BODY = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"x" * 250 + b'"}]}'
REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY)
)
END = b"0\r\n\r\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(name: str, kind: str, src: str) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": src}
    code = APP + SERVE[kind].format(port=port)
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return proc, port
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"{name} did not start") from None
            time.sleep(0.05)


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def call(self) -> float:
        started = time.perf_counter()
        self.writer.write(REQUEST)
        got = b""
        while not got.endswith(END):
            data = await self.reader.read(65536)
            if not data:
                raise RuntimeError("the server closed the connection")
            got += data
        return time.perf_counter() - started


async def _connect(port: int) -> _Conn:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return _Conn(reader, writer)


async def _latency(ports: dict[str, int], requests: int) -> dict[str, list[float]]:
    conns = {name: await _connect(port) for name, port in ports.items()}
    times: dict[str, list[float]] = {name: [] for name in ports}
    for conn in conns.values():  # warm-up
        for _ in range(200):
            await conn.call()
    while len(next(iter(times.values()))) < requests:
        for name, conn in conns.items():
            times[name] += [await conn.call() for _ in range(100)]
    for conn in conns.values():
        conn.writer.close()
    return times


async def _throughput(port: int, seconds: float, connections: int = 8) -> float:
    conns = [await _connect(port) for _ in range(connections)]
    done = 0
    stop = time.perf_counter() + seconds

    async def loop(conn: _Conn) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await conn.call()
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(loop(conn) for conn in conns))
    elapsed = time.perf_counter() - started
    for conn in conns:
        conn.writer.close()
    return done / elapsed


def _gateway_ab(requests: int, sources: dict[str, str]) -> int:
    import tempfile

    from benchmarks import gateway as bench

    settings = bench.QUICK
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        emulator, _ = bench.start_emulator(folder, settings)
        servers = [emulator]
        gateways: dict[str, bench.Server] = {}
        try:
            for name, (option, src) in {
                "polystream": ("polystream", ""),
                "uvicorn": ("uvicorn", ""),
                **{n: ("polystream", d) for n, d in sources.items()},
            }.items():
                port = bench._free_port()
                config = folder / f"gateway-{name}.json"
                config.write_text(json.dumps(bench._gateway_config(emulator.port, 4096)))
                argv = ["gateway", "--listen", f"127.0.0.1:{port}", "--config", str(config)]
                os.environ[bench.SOURCE_ENV] = src
                try:
                    gateways[name] = bench.Server(
                        name, [*argv, "--server", option], port, folder / f"{name}.log"
                    )
                finally:
                    os.environ.pop(bench.SOURCE_ENV, None)
                servers.append(gateways[name])
            route = bench.ROUTES[0]
            for keyword in ("latency", "paced"):
                body = bench._body(route, route.gateway_model, keyword)
                firsts, ends = asyncio.run(_gateway_latency(gateways, route, body, requests))
                print(f"\nchat pass-through, {keyword}: {requests} requests per gateway")
                print(
                    f"{'server':<16}{'first p50':>10}{'p90':>8}{'p99':>8}{'end p50':>9}{'p99':>8}"
                )
                for name in gateways:
                    f, e = firsts[name], ends[name]
                    print(
                        f"{name:<16}{_quantile(f, 0.5) * 1e6:>10.0f}{_quantile(f, 0.9) * 1e6:>8.0f}"
                        f"{_quantile(f, 0.99) * 1e6:>8.0f}{_quantile(e, 0.5) * 1e6:>9.0f}"
                        f"{_quantile(e, 0.99) * 1e6:>8.0f}"
                    )
        finally:
            for server in servers:
                server.stop()
    return 0


async def _gateway_latency(
    gateways: dict[str, Any], route: Any, body: bytes, requests: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    from benchmarks import gateway as bench

    conns = {name: await bench.Connection.open(g.port) for name, g in gateways.items()}
    firsts: dict[str, list[float]] = {name: [] for name in gateways}
    ends: dict[str, list[float]] = {name: [] for name in gateways}
    for conn in conns.values():
        for _ in range(10):
            await conn.post(route.path, body, route.first)
    for _ in range(requests):
        for name, conn in conns.items():
            reply = await conn.post(route.path, body, route.first)
            assert reply.status == 200 and reply.first is not None, reply.body[:200]
            firsts[name].append(reply.first - reply.sent)
            ends[name].append(reply.end - reply.sent)
    for conn in conns.values():
        await conn.close()
    return firsts, ends


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.http_servers", description=__doc__)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--src", action="append", default=[], metavar="NAME=DIR")
    parser.add_argument("--gateway", action="store_true")
    args = parser.parse_args(argv)
    if args.gateway:
        sources = dict(spec.partition("=")[::2] for spec in args.src)
        return _gateway_ab(args.requests, sources)
    here = str(Path(__file__).resolve().parents[1] / "src")
    servers = {
        name: (kind, here)
        for name, kind in (
            ("polystream", "polystream"),
            ("uvicorn", "uvicorn"),
            ("uvicorn-h11", "uvicorn-h11"),
        )
    }
    for spec in args.src:
        name, _, directory = spec.partition("=")
        servers[name] = ("polystream", directory)
    procs: list[subprocess.Popen[bytes]] = []
    ports: dict[str, int] = {}
    try:
        for name, (kind, src) in servers.items():
            proc, port = _start(name, kind, src)
            procs.append(proc)
            ports[name] = port
        times = asyncio.run(_latency(ports, args.requests))
        rates = {name: asyncio.run(_throughput(port, args.seconds)) for name, port in ports.items()}
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(5)
    print(f"{'server':<16}{'p50 µs':>9}{'p90 µs':>9}{'p99 µs':>9}{'mean µs':>9}{'req/s':>9}")
    for name, values in times.items():
        print(
            f"{name:<16}{_quantile(values, 0.5) * 1e6:>9.0f}{_quantile(values, 0.9) * 1e6:>9.0f}"
            f"{_quantile(values, 0.99) * 1e6:>9.0f}{statistics.fmean(values) * 1e6:>9.0f}"
            f"{rates[name]:>9.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
