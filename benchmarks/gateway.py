"""The gateway under load: ``python -m benchmarks.gateway [--quick] [--json OUT]``.

Options: ``--phases latency,minimal,breakdown,wakeup,concurrency,memory`` (default all),
``--src DIR`` (run the servers from another source tree, to compare revisions),
``--litellm PATH`` (LiteLLM's proxy executable, default ``$POLYSTREAM_BENCH_LITELLM``).
``python -m benchmarks.run`` runs it with its extras (``--gateway``: only this;
``--no-gateway``: not this).

The emulator (``polystream serve``) and the gateway (``polystream gateway``) run as real
servers on loopback, each in its own process, started as a user starts them. One load
client (raw HTTP/1.1 over asyncio sockets, the same code for both) calls the emulator
directly and through the gateway, so that the difference is the gateway:

* **latency**: many sequential requests on a keep-alive connection, direct and via the
  gateway interleaved (both see the same machine load). Per request: the time to the
  complete response and the time to the first content delta. Added latency is
  via - direct: the difference of the medians, and the p99 of each request's time
  less the direct request's of the same rotation (:func:`added_p99`). Routes:
  pass-through (same dialect in and out) and transcoding (the client speaks Chat, the
  upstream Anthropic Messages; its direct baseline is the emulator answering in Anthropic
  Messages, so both sides get the same upstream wire events at the same pace).
  Two upstream paces: *paced* (the emulator sends a delta every 2 ms, faster than any
  model streams: what a client of a real model sees), and *unpaced* (all 300 deltas at
  once: the gateway's throughput, where every event's processing adds up). Unpaced,
  the emulator and the gateway both run while the client waits for the first delta;
  on two cores the client, woken by it, may wait for one until a running process's
  scheduler slice ends (Linux's default slice is recorded as ``client_slice_ns``).
  Where Linux lets a thread choose its slice (6.12 and later), the unpaced routes run
  once more with the measuring client on a 0.1 ms slice, which lets it take a core at
  once: the difference is the client's wait for a core, not the gateway's work. Chat
  pass-through is measured both ways once more through a gateway journalling to SQLite
  (written off the client's path; reported beside the targets, judged on the default
  in-memory journal). The paced and unpaced runs at the default slice also call a
  byte relay (:mod:`benchmarks._relay`: a Python process that only copies bytes between
  the client and the emulator) with the direct request, in the same rotation: what it
  adds is the floor under any gateway on this machine (two more loopback hops and one
  more process's wake-ups), and the gateway's added latency less the relay's is the
  gateway's own work. The target is a ratio in that rotation: the gateway's added
  latency (median and p99, per request and to the first delta) at most 2.5 times the
  relay's, judged paced and, unpaced, to the first delta; a p99 counts with at least 200
  requests per target (the quick mode's are indicative). Where LiteLLM's proxy is given
  (``--litellm``), it is called in the same rotation with the gateway's request (one
  worker, the same routes to the emulator) and the gateway's added latency is judged
  lower than its. For each process in the middle (the gateway, the relay, in the
  minimal phase the minimal gateway), what the operating system did for it over the
  measured requests, per request (:func:`os_counters`: CPU time in user space and in
  the kernel, wake-ups, preemptions, page faults).
* **minimal**: the paced and unpaced routes once more, calling in one rotation the
  emulator directly, the byte relay, the gateway and a minimal gateway
  (:mod:`benchmarks._minimal`: the smallest Python gateway that understands the streams,
  decoding and encoding each event in its protocols' callbacks, with nothing else a
  gateway does), which is to the gateway what the minimal loop is to the decoders. Its
  figures are reported beside the targets, which are judged on the latency phase.
* **breakdown**: the paced and unpaced routes once more (fewer requests) through a
  gateway run by :mod:`benchmarks._probe`, which timestamps the bytes at its HTTP
  boundaries (a request in, each upstream write and read, each write to the client).
  The measuring client's times and the probe's share one clock, so each request's time
  to its first delta is cut into stages that add up to it: to the gateway, the
  gateway's request handling (request in -> upstream request out), the upstream (->
  the read that completes the first delta), the gateway's handling of that read (->
  its write to the client), and back to the client. This gateway is not the one the
  targets are judged on (each record costs it about a microsecond).
* **wakeup**: the gateway's work on a request and on one event, timed in a fresh
  process without I/O, warm and after the sleeps it takes between paced events and
  between requests (:mod:`benchmarks._wakeup`): what a wake-up costs the same work on
  this machine, and beside it the least Python work (a short loop), the interpreter's
  own floor.
* **concurrency**: N streams at once (each on its own connection), paced by the
  emulator so that they really overlap (the measured overlap is reported); every
  stream's final text, status and finish reason are checked.
* **memory**: the gateway process's resident memory (sampled every few ms) while it
  passes one stream of 1,000, 20,000 and 100,000 events through, once with the default
  in-memory journal (which keeps each stream's events for resume, bounded per stream by
  the journal's retention) and once with the journal in a SQLite file, which leaves the
  streaming path alone in the process.

Every stream read is decoded afterwards with :func:`polystream.decode` and compared with
the scenario's text (outside the timings).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import dataclasses
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import tables
from benchmarks.workloads import _rng, _token_stream

__all__ = ["main", "run_gateway_bench"]

ROOT = Path(__file__).resolve().parent.parent
SOURCE_ENV = "POLYSTREAM_BENCH_SRC"
"""Where the servers import polystream from (default ``./src``; ``--src`` sets it to
compare another revision)."""

LATENCY_EVENTS = 300
"""Text deltas per stream in the latency and concurrency scenarios (a realistic reply)."""

TIMEOUT = 600.0
"""Seconds a stream may take before it counts as an error."""

CHAT_MODEL = "gpt-5.4-nano"
CLAUDE_MODEL = "claude-haiku-4-5"


@dataclass(frozen=True)
class Route:
    """One way of calling: the client's dialect and path, and the model that selects
    the upstream (directly: the emulator's own endpoint in the client's dialect)."""

    name: str
    dialect: str
    path: str
    direct_model: str
    gateway_model: str
    first: re.Pattern[bytes]
    """Matches the first content delta in the client's dialect."""
    baseline: Route | None = None
    """What the direct call is, when not this route itself: for a transcoding route,
    the emulator answering in the upstream's dialect, so that both sides get the same
    upstream wire events at the same pace."""


_CHAT_FIRST = re.compile(rb'"content":"[^"]')
_MESSAGES_FIRST = re.compile(rb'"type":"text_delta","text":"[^"]')

ROUTES = (
    Route(
        "chat -> chat (pass-through)",
        "openai_chat",
        "/openai/v1/chat/completions",
        CHAT_MODEL,
        "bench-chat",
        _CHAT_FIRST,
    ),
    Route(
        "messages -> messages (pass-through)",
        "anthropic_messages",
        "/anthropic/v1/messages",
        CLAUDE_MODEL,
        "bench-claude",
        _MESSAGES_FIRST,
    ),
    Route(
        "chat -> messages (transcoding)",
        "openai_chat",
        "/openai/v1/chat/completions",
        CHAT_MODEL,
        "bench-claude",
        _CHAT_FIRST,
        baseline=Route(
            "messages (direct)",
            "anthropic_messages",
            "/anthropic/v1/messages",
            CLAUDE_MODEL,
            "bench-claude",
            _MESSAGES_FIRST,
        ),
    ),
)


@dataclass(frozen=True)
class Settings:
    requests: int
    warmup: int
    concurrency: tuple[int, ...]
    overlap_events: int
    overlap_delay: float
    memory_lengths: tuple[int, ...]
    memory_journals: tuple[str, ...]
    paced_requests: int
    paced_events: int
    paced_delay: float
    breakdown_requests: int
    wakeup_samples: int


FULL = Settings(
    requests=300,
    warmup=20,
    concurrency=(200, 400, 1000),
    overlap_events=LATENCY_EVENTS,
    overlap_delay=0.01,
    memory_lengths=(1_000, 20_000, 100_000),
    memory_journals=("memory", "sqlite"),
    # 200 paced requests (each about 0.2 s): the median of 60 moved by 0.1-0.2 ms from
    # run to run, as much as the differences measured, and a p99 needs P99_REQUESTS.
    paced_requests=200,
    paced_events=100,
    paced_delay=0.002,
    breakdown_requests=60,
    wakeup_samples=300,
)
QUICK = Settings(
    requests=5,
    warmup=2,
    concurrency=(20,),
    overlap_events=30,
    overlap_delay=0.005,
    memory_lengths=(100, 500, 1_000),
    memory_journals=("memory",),
    paced_requests=3,
    paced_events=20,
    paced_delay=0.002,
    breakdown_requests=3,
    wakeup_samples=5,
)


# -- the servers ---------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p
        for p in (env.get(SOURCE_ENV) or str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", ""))
        if p
    )
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


class Server:
    """A ``polystream`` subcommand serving on a loopback port, in its own process."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        port: int,
        log: Path,
        module: str = "polystream",
        *,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
        startup: float = 30,
    ) -> None:
        """``command``: the program to run instead of ``python -m module`` (``argv``
        follows it), with ``env`` (default: this tree's, see ``--src``); ``startup``:
        seconds it may take to accept a connection."""
        self.name = name
        self.port = port
        self.log = log
        self._log_file = log.open("wb")
        self.proc = subprocess.Popen(
            [*(command or [sys.executable, "-m", module]), *argv],
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env=_env() if env is None else env,
            cwd=ROOT,
        )
        deadline = time.monotonic() + startup
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited: {log.read_text()[-500:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"{name} did not start: {log.read_text()[-500:]}") from None
                time.sleep(0.05)

    def rss(self) -> int:
        """Resident memory in bytes."""
        return _status_kib(self.proc.pid, "VmRSS") * 1024

    def cpu(self) -> float:
        """User + system CPU seconds so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log_file.close()


class RunDelay:
    """Seconds a process's threads have spent runnable but waiting for a core, from
    Linux's ``/proc/PID/task/*/schedstat`` (None where there is none), cheap enough to
    read around every request: the files are opened once and read again with
    ``pread``. (Listing and opening them on each read cost the measuring client 0.1-0.3
    ms of CPU just before it sent the next request, and that delayed the gateway's first
    delta by up to 0.4 ms, the direct one's not.) A thread that
    has ended still reads (its wait frozen), so the sum never goes backwards; the
    threads are listed again when a file no longer reads. A thread started after the
    listing is not counted, so a reader is made per measurement, after its connections
    are open."""

    def __init__(self, pid: int | str = "self") -> None:
        self.pid = pid
        self._files: list[int] = []
        self._list()

    def _list(self) -> None:
        self.close()
        folder = f"/proc/{self.pid}/task"
        try:
            for task in os.listdir(folder):
                self._files.append(os.open(f"{folder}/{task}/schedstat", os.O_RDONLY))
        except OSError:
            self.close()

    def __call__(self) -> float | None:
        for listed_again in (False, True):
            try:
                if not self._files:
                    raise OSError("no thread listed")
                total = sum(int(os.pread(fd, 128, 0).split()[1]) for fd in self._files)
            except (OSError, IndexError, ValueError):
                if listed_again:
                    return None
                self._list()
                continue
            return total / 1e9
        return None

    def close(self) -> None:
        for fd in self._files:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._files = []


OS_COUNTERS = ("user", "kernel", "wakeups", "preemptions", "page_faults")
"""What :func:`os_counters` reads: CPU seconds in user space and in the kernel, context
switches summed over the process's threads (voluntary: the process waited and was woken,
one per wake-up; involuntary: a running thread was preempted), and minor page faults (a
page touched for the first time, fresh memory the process grew into)."""


def os_counters(pid: int) -> dict[str, float] | None:
    """A process's :data:`OS_COUNTERS` from Linux's ``/proc`` (None where there is none,
    or the process has gone). Read once before and once after a measurement: a
    thread that ends in between takes its switches with it."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        ticks = os.sysconf("SC_CLK_TCK")
        out = {
            "user": int(fields[11]) / ticks,
            "kernel": int(fields[12]) / ticks,
            "wakeups": 0.0,
            "preemptions": 0.0,
            "page_faults": float(fields[7]),
        }
        folder = Path(f"/proc/{pid}/task")
        for task in folder.iterdir():
            for line in (task / "status").read_text().splitlines():
                name, _, value = line.partition(":")
                if name == "voluntary_ctxt_switches":
                    out["wakeups"] += int(value)
                elif name == "nonvoluntary_ctxt_switches":
                    out["preemptions"] += int(value)
    except (OSError, IndexError, ValueError):
        return None
    return out


def per_request(
    before: dict[str, float] | None, after: dict[str, float] | None, requests: int
) -> dict[str, float] | None:
    """The counters' growth from ``before`` to ``after``, per request."""
    if before is None or after is None or requests <= 0:
        return None
    return {name: (after[name] - before[name]) / requests for name in OS_COUNTERS}


SHORT_SLICE_NS = 100_000
"""The measuring client's scheduler slice in the second unpaced run (0.1 ms)."""

_SCHED_ATTR = "IIQiIQQQII"  # struct sched_attr, 56 bytes
_SCHED_CALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}  # sched_setattr, getattr


def scheduler_slice(nanoseconds: int | None = None) -> int | None:
    """The calling thread's scheduler slice in nanoseconds (``sched_runtime`` of
    ``SCHED_OTHER``), set first to ``nanoseconds`` if given (0: the default; Linux 6.12
    and later let a thread choose it). None where it cannot be set or read."""
    import ctypes
    import platform
    import struct

    calls = _SCHED_CALLS.get(platform.machine())
    if sys.platform != "linux" or calls is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    size = struct.calcsize(_SCHED_ATTR)
    if nanoseconds is not None:
        fields = (size, 0, 0, os.nice(0), 0, nanoseconds, 0, 0, 0, 0)
        attr = ctypes.create_string_buffer(struct.pack(_SCHED_ATTR, *fields), size)
        if libc.syscall(calls[0], 0, attr, 0) != 0:
            return None
    read = ctypes.create_string_buffer(size)
    if libc.syscall(calls[1], 0, read, size, 0) != 0:
        return None
    runtime: int = struct.unpack(_SCHED_ATTR, read.raw)[5]
    return runtime


def set_slice(nanoseconds: int) -> bool:
    """Whether the calling thread's slice is now ``nanoseconds`` (0: the default)."""
    runtime = scheduler_slice(nanoseconds)
    return runtime is not None and (nanoseconds == 0 or runtime == nanoseconds)


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _scenarios(settings: Settings) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """Scenario list and the text deltas of each scenario keyword."""
    texts: dict[str, list[str]] = {}
    scenarios: list[dict[str, Any]] = []
    texts["latency"] = _token_stream(_rng("gateway-latency"), LATENCY_EVENTS)
    scenarios.append(
        {
            "name": "latency",
            "match": {"contains": "kw=latency;"},
            "reply": {"text": texts["latency"]},
        }
    )
    texts["paced"] = _token_stream(_rng("gateway-paced"), settings.paced_events)
    scenarios.append(
        {
            "name": "paced",
            "match": {"contains": "kw=paced;"},
            "reply": {"text": texts["paced"]},
            "timing": {"first_event": 0, "delay": settings.paced_delay},
        }
    )
    texts["overlap"] = _token_stream(_rng("gateway-overlap"), settings.overlap_events)
    scenarios.append(
        {
            "name": "overlap",
            "match": {"contains": "kw=overlap;"},
            "reply": {"text": texts["overlap"]},
            "timing": {"first_event": settings.overlap_delay, "delay": settings.overlap_delay},
        }
    )
    for length in settings.memory_lengths:
        key = f"memory{length}"
        texts[key] = _token_stream(_rng(f"gateway-{key}"), length)
        scenarios.append(
            {"name": key, "match": {"contains": f"kw={key};"}, "reply": {"text": texts[key]}}
        )
    return scenarios, texts


def _gateway_config(emulator_port: int, max_concurrency: int) -> dict[str, Any]:
    root = f"http://127.0.0.1:{emulator_port}"
    return {
        "upstreams": {
            "chat": {"dialect": "openai_chat", "base_url": root + "/openai/v1", "api_key": "x"},
            "claude": {
                "dialect": "anthropic_messages",
                "base_url": root + "/anthropic",
                "api_key": "x",
            },
        },
        "routes": [
            {"model": "bench-chat", "upstream": "chat", "rewrite": CHAT_MODEL},
            {"model": "bench-claude", "upstream": "claude", "rewrite": CLAUDE_MODEL},
        ],
        # Above the default (512) so that the concurrency test finds the real limit.
        "limits": {"max_concurrency": max_concurrency},
    }


def start_gateway(
    folder: Path, emulator: Server, journal: str, tag: str, probe: Path | None = None
) -> Server:
    """A gateway in front of ``emulator`` (``probe``: run by :mod:`benchmarks._probe`,
    which writes its records to that file when the gateway stops)."""
    port = _free_port()
    config = folder / f"gateway-{tag}.json"
    config.write_text(json.dumps(_gateway_config(emulator.port, 4096)))
    spec = "memory" if journal == "memory" else f"sqlite:{folder / f'journal-{tag}.db'}"
    argv = ["gateway", "--listen", f"127.0.0.1:{port}", "--config", str(config), "--journal", spec]
    return Server(
        f"gateway ({journal} journal)",
        argv if probe is None else [str(probe), *argv],
        port,
        folder / f"gateway-{tag}.log",
        module="polystream" if probe is None else "benchmarks._probe",
    )


_PEERS = {"relay": "relay", "minimal": "minimal gateway"}
"""The processes put in front of the emulator beside the gateway: :mod:`benchmarks._relay`
and :mod:`benchmarks._minimal` (each takes ``LISTEN_PORT UPSTREAM_PORT``), and how the
logs name them."""


def start_peer(folder: Path, emulator: Server, kind: str) -> Server:
    """A ``kind`` (a key of :data:`_PEERS`) in front of ``emulator``."""
    port = _free_port()
    return Server(
        _PEERS[kind],
        [str(port), str(emulator.port)],
        port,
        folder / f"{kind}.log",
        module=f"benchmarks._{kind}",
    )


LITELLM_ENV = "POLYSTREAM_BENCH_LITELLM"
"""The path of LiteLLM's proxy executable (``litellm``, installed apart from the project,
e.g. ``/tmp/litellm-venv/bin/litellm``); ``--litellm`` sets it. Unset: LiteLLM is not
measured, and the latency phase says so."""

LITELLM_PATHS = {"openai_chat": "/v1/chat/completions", "anthropic_messages": "/v1/messages"}
"""Where LiteLLM's proxy serves each client dialect."""

LITELLM_STARTUP = 180.0
"""Seconds LiteLLM's proxy may take to accept a connection (it imports for several
seconds, more on a loaded machine)."""


def litellm_config(emulator_port: int) -> dict[str, Any]:
    """LiteLLM's proxy configuration for the same routes as the gateway's: each model name
    (``bench-chat``, ``bench-claude``) passed to the emulator's endpoint in its own
    dialect, the model rewritten as the gateway rewrites it. (JSON is YAML: the proxy
    reads it as its ``config.yaml``.)"""
    root = f"http://127.0.0.1:{emulator_port}"
    return {
        "model_list": [
            {
                "model_name": "bench-chat",
                "litellm_params": {
                    "model": f"openai/{CHAT_MODEL}",
                    "api_base": root + "/openai/v1",
                    "api_key": "x",
                },
            },
            {
                "model_name": "bench-claude",
                "litellm_params": {
                    "model": f"anthropic/{CLAUDE_MODEL}",
                    "api_base": root + "/anthropic",
                    "api_key": "x",
                },
            },
        ]
    }


def litellm_env() -> dict[str, str]:
    """The environment LiteLLM's proxy runs in: this one without ``PYTHONPATH`` (it runs
    from its own environment), with its bundled model cost map (it would fetch one from
    the network at start) and without a master key (it refuses to start unkeyed
    otherwise; the gateway is not keyed either)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env["LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY"] = "true"
    return env


def start_litellm(folder: Path, emulator: Server, executable: str) -> Server:
    """LiteLLM's proxy (``executable``: its ``litellm`` program) in front of ``emulator``,
    one worker, as :func:`litellm_config` configures it.

    Raises:
        RuntimeError: it exited, or did not accept a connection in
            :data:`LITELLM_STARTUP` seconds (the message ends with its log's tail).
        OSError: ``executable`` cannot be run.
    """
    port = _free_port()
    config = folder / "litellm.yaml"
    config.write_text(json.dumps(litellm_config(emulator.port)))
    return Server(
        "LiteLLM proxy",
        ["--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        port,
        folder / "litellm.log",
        command=[executable],
        env=litellm_env(),
        startup=LITELLM_STARTUP,
    )


def start_emulator(folder: Path, settings: Settings) -> tuple[Server, dict[str, list[str]]]:
    scenarios, texts = _scenarios(settings)
    path = folder / "scenarios.json"
    path.write_text(json.dumps({"scenarios": scenarios}))
    port = _free_port()
    server = Server(
        "emulator",
        ["serve", "--port", str(port), "--scenarios", str(path), "--log-level", "warning"],
        port,
        folder / "emulator.log",
    )
    return server, texts


# -- the client ----------------------------------------------------------------------------


def _body(route: Route, model: str, keyword: str) -> bytes:
    message = {"role": "user", "content": f"kw={keyword}; please answer"}
    payload: dict[str, Any] = {"model": model, "stream": True, "messages": [message]}
    if route.dialect == "anthropic_messages":
        payload["max_tokens"] = 4096
    return json.dumps(payload).encode()


@dataclass
class Reply:
    status: int
    body: bytes
    sent: float
    first: float | None
    end: float


class _QuickAck(asyncio.StreamReaderProtocol):
    """Acknowledges every read at once (``TCP_QUICKACK``, re-armed after each read).

    On a keep-alive connection Linux delays ACKs (up to 40 ms) once a connection looks
    interactive; a server that writes one small segment per event then stalls on them.
    That is a property of the client's socket, not of the servers measured, so the load
    client turns it off, the same way for direct and gateway calls.
    """

    _sock: socket.socket | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._sock = transport.get_extra_info("socket")
        self._quickack()
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._quickack()
        super().data_received(data)

    def _quickack(self) -> None:
        if self._sock is not None and hasattr(socket, "TCP_QUICKACK"):
            with contextlib.suppress(OSError):
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)


class Connection:
    """One HTTP/1.1 keep-alive connection (the same client for direct and gateway)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 20, loop=loop)
        transport, protocol = await loop.create_connection(
            lambda: _QuickAck(reader, loop=loop), "127.0.0.1", port
        )
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        return cls(reader, writer)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()

    async def post(self, path: str, body: bytes, first: re.Pattern[bytes]) -> Reply:
        head = (
            f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"accept: text/event-stream\r\nauthorization: Bearer x\r\nx-api-key: x\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode()
        reader = self.reader
        sent = time.perf_counter()
        self.writer.write(head + body)
        header = await reader.readuntil(b"\r\n\r\n")
        lines = header.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        parts: list[bytes] = []
        first_at: float | None = None
        tail = b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                data = (await reader.readexactly(size + 2))[:-2]
                if first_at is None:
                    if first.search(tail + data):
                        first_at = time.perf_counter()
                    tail = data[-64:]
                parts.append(data)
        else:
            data = await reader.readexactly(int(headers.get("content-length", "0")))
            parts.append(data)
        end = time.perf_counter()
        if first_at is None and first.search(b"".join(parts)):
            first_at = end
        return Reply(status, b"".join(parts), sent, first_at, end)


def check(reply: Reply, dialect: str, expected: str) -> str | None:
    """None when the reply is a complete, correct stream of ``expected``."""
    import polystream

    if reply.status != 200:
        return f"HTTP {reply.status}: {reply.body[:200]!r}"
    try:
        result = polystream.decode(reply.body, dialect)
    except Exception as exc:
        return f"decode failed: {type(exc).__name__}: {exc}"[:200]
    if result.status != "completed":
        return f"status {result.status} ({result.error})"[:200]
    if result.finish_reason is None or result.finish_reason.unified != "stop":
        return f"finish reason {result.finish_reason}"
    if result.text != expected:
        return f"wrong text ({len(result.text)} chars, expected {len(expected)})"
    return None


# -- measurements --------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def added_p99(direct: list[Reply], via: list[Reply], what: str) -> float | None:
    """The p99 of the latency ``via`` adds per request: each of its replies' time
    (``total``: to the complete response; ``first``: to the first delta) less the
    direct reply's of the same rotation (the lists are in rotation order, one reply
    each; a rotation without both times is left out; None if none has). Paired in the
    rotation, a stall that hits one side only counts once, on its side; the difference
    of two p99s would subtract one target's stalls from another's."""
    diffs = []
    for base, reply in zip(direct, via, strict=True):
        if what == "total":
            diffs.append((reply.end - reply.sent) - (base.end - base.sent))
        elif reply.first is not None and base.first is not None:
            diffs.append((reply.first - reply.sent) - (base.first - base.sent))
    return _pct(diffs, 0.99) if diffs else None


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "p99": _pct(values, 0.99),
        "mean": statistics.fmean(values),
        "min": min(values),
        "max": max(values),
    }


async def measure_latency(
    route: Route,
    emulator: Server,
    gateway: Server,
    expected: str,
    settings: Settings,
    log: Callable[[str], None],
    *,
    keyword: str = "latency",
    client_slice: int = 0,
    gateway_replies: list[Reply] | None = None,
    relay: Server | None = None,
    minimal: Server | None = None,
    litellm: Server | None = None,
) -> dict[str, Any]:
    """Sequential requests, direct and via the gateway interleaved, keep-alive
    (``keyword`` picks the scenario: ``latency`` unpaced, ``paced``; ``client_slice``:
    the measuring client's scheduler slice in nanoseconds, see :func:`set_slice`;
    ``gateway_replies``: gets the gateway's replies, warm-up excluded; ``relay``: a
    :mod:`benchmarks._relay` in front of the emulator, called with the direct request
    in the same rotation: the floor under any gateway; ``minimal``: a
    :mod:`benchmarks._minimal` gateway, called with the gateway's request in the same
    rotation: the least a gateway does; ``litellm``: LiteLLM's proxy (see
    :func:`start_litellm`), called with the gateway's request at its own path in the
    same rotation). With the relay, the gateway's added latency over the relay's is
    computed (:func:`relay_ratios`).

    Raises:
        OSError: ``client_slice`` cannot be set.
    """
    paced = keyword == "paced"
    requests = settings.paced_requests if paced else settings.requests
    direct = route.baseline or route
    targets = {
        "direct": (emulator.port, _body(direct, direct.direct_model, keyword)),
        "gateway": (gateway.port, _body(route, route.gateway_model, keyword)),
    }
    routes = {"direct": direct, "gateway": route}
    if relay is not None:
        targets["relay"] = (relay.port, targets["direct"][1])
        routes["relay"] = direct
    if minimal is not None:
        targets["minimal"] = (minimal.port, targets["gateway"][1])
        routes["minimal"] = route
    if litellm is not None:
        targets["litellm"] = (litellm.port, targets["gateway"][1])
        routes["litellm"] = dataclasses.replace(route, path=LITELLM_PATHS[route.dialect])
    kinds = tuple(targets)
    connections = {k: await Connection.open(port) for k, (port, _) in targets.items()}
    cpu: dict[str, float] = {}
    samples: dict[str, dict[str, list[float]]] = {k: {"total": [], "first": []} for k in targets}
    # Per request, the time each process spent waiting for a core (three busy processes
    # on a 2-core machine: a wait shows in the latency without being the gateway's work).
    processes = {
        "client": RunDelay(),
        "emulator": RunDelay(emulator.proc.pid),
        "gateway": RunDelay(gateway.proc.pid),
    }
    waits: dict[str, dict[str, list[float]]] = {k: {p: [] for p in processes} for k in targets}
    errors: dict[str, list[str]] = {k: [] for k in targets}
    replies: dict[str, list[Reply]] = {k: [] for k in targets}
    if client_slice and not set_slice(client_slice):
        raise OSError(f"cannot set this thread's scheduler slice to {client_slice} ns")
    # The processes in the middle each serve only their own target's requests: what the
    # operating system did for them over the measured requests is theirs (see
    # os_counters; the emulator serves every target, so it is not counted).
    middle = {
        k: server
        for k, server in (
            ("gateway", gateway),
            ("relay", relay),
            ("minimal", minimal),
            ("litellm", litellm),
        )
        if server is not None
    }
    counted: dict[str, dict[str, float] | None] = {}
    ended: dict[str, dict[str, float] | None] = {}
    try:
        for i in range(settings.warmup + requests):
            if i == settings.warmup:
                cpu = {"emulator": emulator.cpu(), "gateway": gateway.cpu()}
                counted = {k: os_counters(server.proc.pid) for k, server in middle.items()}
            # Each target first in turn (two: alternately), so that none is always
            # the one called after another's request.
            shift = i % len(kinds)
            for kind in kinds[shift:] + kinds[:shift]:
                _, body = targets[kind]
                way = routes[kind]
                before = {name: read() for name, read in processes.items()}
                reply = await connections[kind].post(way.path, body, way.first)
                if i < settings.warmup:
                    continue
                for name, read in processes.items():
                    start, end = before[name], read()
                    if start is not None and end is not None:
                        waits[kind][name].append(end - start)
                replies[kind].append(reply)
                samples[kind]["total"].append(reply.end - reply.sent)
                if reply.first is not None:
                    samples[kind]["first"].append(reply.first - reply.sent)
        ended = {k: os_counters(server.proc.pid) for k, server in middle.items()}
    finally:
        if client_slice:
            set_slice(0)
        for reader in processes.values():
            reader.close()
        for connection in connections.values():
            await connection.close()
    if gateway_replies is not None:
        gateway_replies.extend(replies["gateway"])
    for kind, done in replies.items():
        for reply in done:
            problem = check(reply, routes[kind].dialect, expected)
            if problem is not None:
                errors[kind].append(problem)
    out: dict[str, Any] = {
        "requests": requests,
        "events": settings.paced_events if paced else LATENCY_EVENTS,
        "delay": settings.paced_delay if paced else 0.0,
        "client_slice_ns": client_slice or None,
        # CPU time per request (less sensitive to other load than the wall clock): the
        # emulator's for one direct and one gateway request, the gateway's for one.
        "cpu_per_request": {
            "emulator": (emulator.cpu() - cpu["emulator"]) / requests / 2,
            "gateway": (gateway.cpu() - cpu["gateway"]) / requests,
        },
        # Per request of its own, what the operating system did for each process in the
        # middle (None off Linux).
        "os_per_request": {k: per_request(counted.get(k), ended.get(k), requests) for k in middle},
    }
    for kind in targets:
        out[kind] = {
            "total": _summary(samples[kind]["total"]),
            "first": _summary(samples[kind]["first"]) if samples[kind]["first"] else None,
            "errors": len(errors[kind]),
            "error_examples": errors[kind][:3],
            "bytes": len(replies[kind][0].body) if replies[kind] else 0,
            # Mean seconds per request each process waited for a core (None off Linux).
            "run_queue_wait": {
                name: (sum(values) / len(values) if values else None)
                for name, values in waits[kind].items()
            },
        }
    for what in ("total", "first"):
        direct, via = out["direct"][what], out["gateway"][what]
        if direct and via:
            out[f"added_{what}"] = {
                "median": via["median"] - direct["median"],
                "p99": added_p99(replies["direct"], replies["gateway"], what),
            }
        for other in ("relay", "minimal", "litellm"):
            floor = out[other][what] if other in out else None
            if direct and floor:
                out[f"{other}_added_{what}"] = {
                    "median": floor["median"] - direct["median"],
                    "p99": added_p99(replies["direct"], replies[other], what),
                }
    if relay is not None:
        out.update(relay_ratios(out))
    log(
        f"  latency{' (paced)' if paced else ''} {route.name:36} "
        f"direct {_ms(out['direct']['total']['median'])} "
        f"via {_ms(out['gateway']['total']['median'])} "
        f"(added {_ms(out.get('added_total', {}).get('median'))}, first event "
        f"{_ms(out.get('added_first', {}).get('median'))})"
        + (
            f"; relay added {_ms(out.get('relay_added_total', {}).get('median'))}, first event "
            f"{_ms(out.get('relay_added_first', {}).get('median'))}"
            if relay is not None
            else ""
        )
        + (
            f"; minimal gateway added {_ms(out.get('minimal_added_total', {}).get('median'))}, "
            f"first event {_ms(out.get('minimal_added_first', {}).get('median'))}"
            if minimal is not None
            else ""
        )
        + (
            f"; LiteLLM added {_ms(out.get('litellm_added_total', {}).get('median'))}, "
            f"first event {_ms(out.get('litellm_added_first', {}).get('median'))}"
            if litellm is not None
            else ""
        )
    )
    return out


RELAY_RATIO = 2.5
"""The target: the gateway's added latency at most this many times the byte relay's,
measured in one rotation (median and p99, per request and to the first delta)."""

P99_REQUESTS = 200
"""Requests per target a p99 is judged on: with fewer (the quick mode), a p99 is the
largest or second largest of a handful, reported as indicative and not judged."""


def relay_ratios(cell: dict[str, Any]) -> dict[str, Any]:
    """The gateway's added latency over the byte relay's, from a latency cell's figures
    (``added_*`` and ``relay_added_*``): ``ratio_total`` and ``ratio_first``, each with
    ``median`` and ``p99`` (None where the relay added nothing or the figure is missing:
    no ratio), and ``p99_judged`` (whether the cell has :data:`P99_REQUESTS` per
    target)."""
    out: dict[str, Any] = {"p99_judged": cell["requests"] >= P99_REQUESTS}
    for what in ("total", "first"):
        added = cell.get(f"added_{what}") or {}
        floor = cell.get(f"relay_added_{what}") or {}
        ratios: dict[str, float | None] = {}
        for stat in ("median", "p99"):
            via, under = added.get(stat), floor.get(stat)
            ratios[stat] = (
                via / under if via is not None and under is not None and under > 0 else None
            )
        out[f"ratio_{what}"] = ratios
    return out


STAGES: tuple[tuple[str, str], ...] = (
    ("to_gateway", "client -> gateway"),
    ("request", "gateway: request -> upstream"),
    ("upstream", "upstream: request -> first delta read"),
    ("first", "gateway: first delta read -> written"),
    ("to_client", "gateway -> client"),
)
"""The stages of a request's time to its first delta through the gateway, in order (they
add up to it), and how the report names them."""


def breakdown(records: list[tuple[str, float, int]], replies: list[Reply]) -> dict[str, Any]:
    """Where the time to the first delta of each reply went, from a probed gateway's
    ``records`` (see :mod:`benchmarks._probe`): per stage (:data:`STAGES`), and for the
    gateway's own work (``own``: its request and first-delta stages together) and for
    its last event (``last``: the upstream read that completed it to its write), the
    median over the replies whose records are complete (``matched``)."""
    times = [t for _, t, _ in records]
    per: dict[str, list[float]] = {key: [] for key, _ in STAGES}
    per["own"] = []
    per["last"] = []
    for reply in replies:
        if reply.first is None:
            continue
        window = records[
            bisect.bisect_left(times, reply.sent) : bisect.bisect_right(times, reply.end)
        ]
        request = next((t for what, t, _ in window if what == "request"), None)
        if request is None:
            continue
        sent_up = next(
            (t for what, t, _ in window if what == "upstream_out" and t >= request), None
        )
        if sent_up is None:
            continue
        reads = [t for what, t, _ in window if what == "upstream_in" and t >= sent_up]
        writes = [t for what, t, _ in window if what == "out" and t >= sent_up]
        # The write that carried the first delta: the last before the client saw it.
        first_out = max((t for t in writes if t <= reply.first), default=None)
        if first_out is None or not reads or reads[0] > first_out:
            continue
        first_read = max(t for t in reads if t <= first_out)
        last_read = max(t for t in reads if t <= writes[-1])
        stages = {
            "to_gateway": request - reply.sent,
            "request": sent_up - request,
            "upstream": first_read - sent_up,
            "first": first_out - first_read,
            "to_client": reply.first - first_out,
        }
        for key, value in stages.items():
            per[key].append(value)
        per["own"].append(stages["request"] + stages["first"])
        per["last"].append(writes[-1] - last_read)
    matched = len(per["own"])
    return {
        "replies": len(replies),
        "matched": matched,
        "median": {key: statistics.median(v) if v else None for key, v in per.items()},
    }


async def measure_breakdown(
    folder: Path,
    emulator: Server,
    texts: dict[str, list[str]],
    settings: Settings,
    log: Callable[[str], None],
) -> dict[str, dict[str, Any]]:
    """The latency runs (paced and unpaced, fewer requests) through a probed gateway, and
    where each route's time to the first delta went (:func:`breakdown`)."""
    records = folder / "probe.json"
    probed = start_gateway(folder, emulator, "memory", "probed", probe=records)
    runs: dict[tuple[str, str], tuple[dict[str, Any], list[Reply]]] = {}
    few = dataclasses.replace(
        settings, requests=settings.breakdown_requests, paced_requests=settings.breakdown_requests
    )
    try:
        for route in ROUTES:
            for keyword, text in (("paced", texts["paced"]), ("latency", texts["latency"])):
                replies: list[Reply] = []
                cell = await measure_latency(
                    route,
                    emulator,
                    probed,
                    "".join(text),
                    few,
                    lambda message: log(f"  breakdown: {message.strip()}"),
                    keyword=keyword,
                    gateway_replies=replies,
                )
                runs[(_PACES[keyword], route.name)] = (cell, replies)
    finally:
        probed.stop()
    # (No file when the gateway did not exit cleanly: then no reply is matched.)
    found = json.loads(records.read_text()) if records.exists() else []
    out: dict[str, dict[str, Any]] = {}
    for (pace, name), (cell, replies) in runs.items():
        figures = breakdown(found, replies)
        figures["added_first"] = (cell.get("added_first") or {}).get("median")
        figures["via_first"] = cell["gateway"]["first"] and cell["gateway"]["first"]["median"]
        out.setdefault(pace, {})[name] = figures
    return out


def measure_wakeup(settings: Settings, log: Callable[[str], None]) -> dict[str, Any]:
    """The gateway's request and event work, warm and after sleeps, in a fresh process
    (see :mod:`benchmarks._wakeup`)."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks._wakeup", str(settings.wakeup_samples)],
        capture_output=True,
        check=True,
        env=_env(),
        cwd=ROOT,
    )
    out: dict[str, Any] = json.loads(done.stdout)
    for name, cells in out["units"].items():
        log(
            f"  wake-up: {name:8} warm {_us(cells['warm']['median'])}, "
            + ", ".join(
                f"{label} {cell['ratio']:.1f}x" for label, cell in cells.items() if label != "warm"
            )
        )
    return out


def _max_overlap(intervals: list[tuple[float, float]]) -> int:
    points = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    best = current = 0
    for _, step in points:
        current += step
        best = max(best, current)
    return best


async def _one_stream(port: int, route: Route, body: bytes) -> Reply | str:
    connection: Connection | None = None
    try:
        connection = await Connection.open(port)
        return await asyncio.wait_for(connection.post(route.path, body, route.first), TIMEOUT)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:200]
    finally:
        if connection is not None:
            await connection.close()


async def measure_concurrency(
    n: int,
    target: str,
    port: int,
    servers: list[Server],
    expected: str,
    events: int,
    delay: float,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """``n`` streams at once on their own connections; each one checked."""
    route = ROUTES[0]
    model = route.direct_model if target == "direct" else route.gateway_model
    body = _body(route, model, "overlap")
    cpu_before = {s.name: s.cpu() for s in servers}
    rss_before = {s.name: s.rss() for s in servers}
    peak = dict(rss_before)
    started = time.perf_counter()
    task = asyncio.gather(*(_one_stream(port, route, body) for _ in range(n)))
    while not task.done():
        await asyncio.sleep(0.05)
        for s in servers:
            with contextlib.suppress(OSError):
                peak[s.name] = max(peak[s.name], s.rss())
    results = await task
    wall = time.perf_counter() - started
    cpu = {s.name: s.cpu() - cpu_before[s.name] for s in servers}
    problems: list[str] = []
    intervals: list[tuple[float, float]] = []
    in_flight: list[tuple[float, float]] = []
    durations: list[float] = []
    firsts: list[float] = []
    for result in results:
        if isinstance(result, str):
            problems.append(result)
            continue
        problem = check(result, route.dialect, expected)
        if problem is not None:
            problems.append(problem)
            continue
        intervals.append((result.first or result.end, result.end))
        in_flight.append((result.sent, result.end))
        durations.append(result.end - result.sent)
        if result.first is not None:
            firsts.append(result.first - result.sent)
    out: dict[str, Any] = {
        "streams": n,
        "target": target,
        "ok": len(results) - len(problems),
        "errors": len(problems),
        "error_kinds": sorted({p.split(":")[0] for p in problems})[:5],
        "error_examples": problems[:3],
        # Streams delivering at once (first delta to end, as the client read them) and
        # requests open at once.
        "max_overlap": _max_overlap(intervals) if intervals else 0,
        "max_in_flight": _max_overlap(in_flight) if in_flight else 0,
        "wall": wall,
        "nominal_stream_seconds": delay * (events + 1),
        "duration": _summary(durations) if durations else None,
        "first_event": _summary(firsts) if firsts else None,
        "cpu_seconds": cpu,
        "rss_growth": {name: peak[name] - rss_before[name] for name in peak},
    }
    log(
        f"  concurrency {target:8} {n:5} streams: {out['ok']} ok, {out['errors']} errors, "
        f"overlap {out['max_overlap']}, wall {wall:.1f} s, "
        f"median stream {_ms(out['duration']['median'] if durations else None)}"
    )
    return out


class _Sampler:
    """Samples a process's resident memory every few milliseconds in a thread."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.peak = server.rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.peak = max(self.peak, self.server.rss())
            time.sleep(0.002)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.server.rss())


async def measure_memory(
    gateway: Server,
    texts: dict[str, list[str]],
    lengths: tuple[int, ...],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """One pass-through stream of each length through ``gateway``; RSS growth."""
    route = ROUTES[0]
    # Warm up: the first streams allocate the process's lasting structures.
    for _ in range(3):
        warm = await _one_stream(
            gateway.port, route, _body(route, route.gateway_model, f"memory{lengths[0]}")
        )
        assert not isinstance(warm, str), warm
    out: dict[str, Any] = {}
    for length in lengths:
        body = _body(route, route.gateway_model, f"memory{length}")
        time.sleep(0.2)
        before = gateway.rss()
        with _Sampler(gateway) as sampler:
            reply = await _one_stream(gateway.port, route, body)
        time.sleep(0.2)
        after = gateway.rss()
        problem = (
            reply
            if isinstance(reply, str)
            else check(reply, route.dialect, "".join(texts[f"memory{length}"]))
        )
        out[str(length)] = {
            "events": length,
            "stream_bytes": 0 if isinstance(reply, str) else len(reply.body),
            "seconds": 0.0 if isinstance(reply, str) else reply.end - reply.sent,
            "rss_before": before,
            "peak_growth": sampler.peak - before,
            "retained": after - before,
            "check": problem,
        }
        log(
            f"  memory {gateway.name:24} {length:7} events: peak +{_mib(sampler.peak - before)}, "
            f"retained +{_mib(after - before)}{'' if problem is None else ' WRONG ' + problem}"
        )
    return out


# -- the run -------------------------------------------------------------------------------


PHASES = ("latency", "minimal", "breakdown", "wakeup", "concurrency", "memory")


def run_gateway_bench(
    quick: bool,
    log: Callable[[str], None],
    phases: tuple[str, ...] = PHASES,
    litellm: str | None = None,
) -> dict[str, Any]:
    """Everything above (or the ``phases`` named); returns the figures (see
    :func:`targets`). ``litellm``: LiteLLM's proxy executable, measured in the latency
    phase's rotation (default: :data:`LITELLM_ENV`'s value; none: not measured, and
    ``data["litellm"]`` says why)."""
    settings = QUICK if quick else FULL
    data: dict[str, Any] = {"quick": quick, "settings": settings.__dict__}
    executable = litellm if litellm is not None else os.environ.get(LITELLM_ENV) or None
    data["litellm"] = {
        "executable": executable,
        "measured": False,
        "reason": (
            f"no LiteLLM proxy given (set {LITELLM_ENV} or --litellm to its executable)"
            if executable is None
            else "the latency phase was not run"
        ),
    }
    with tempfile.TemporaryDirectory(prefix="polystream-gateway-bench-") as tmp:
        folder = Path(tmp)
        emulator, texts = start_emulator(folder, settings)
        servers = [emulator]
        try:
            gateway = start_gateway(folder, emulator, "memory", "main")
            servers.append(gateway)
            relay = None
            if {"latency", "minimal"} & set(phases):
                relay = start_peer(folder, emulator, "relay")
                servers.append(relay)
            expected = "".join(texts["latency"])
            data["latency"] = {}
            data["paced"] = {}
            # (Filled where the client's slice can be set: see the module's docstring.)
            data["latency_short_slice"] = {}
            data["client_slice_ns"] = scheduler_slice()  # the default, where Linux says
            short = "latency" in phases and set_slice(SHORT_SLICE_NS) and set_slice(0)
            proxy = None
            if "latency" in phases and executable is not None:
                try:
                    proxy = start_litellm(folder, emulator, executable)
                except (OSError, RuntimeError) as exc:
                    data["litellm"]["reason"] = f"LiteLLM's proxy did not start: {exc}"[:600]
                    log(f"  {data['litellm']['reason']}")
                else:
                    servers.append(proxy)
                    data["litellm"].update(measured=True, reason=None)
            for route in ROUTES if "latency" in phases else ():
                data["paced"][route.name] = asyncio.run(
                    measure_latency(
                        route,
                        emulator,
                        gateway,
                        "".join(texts["paced"]),
                        settings,
                        log,
                        keyword="paced",
                        relay=relay,
                        litellm=proxy,
                    )
                )
                data["latency"][route.name] = asyncio.run(
                    measure_latency(
                        route,
                        emulator,
                        gateway,
                        expected,
                        settings,
                        log,
                        relay=relay,
                        litellm=proxy,
                    )
                )
                if short:
                    data["latency_short_slice"][route.name] = asyncio.run(
                        measure_latency(
                            route,
                            emulator,
                            gateway,
                            expected,
                            settings,
                            log,
                            client_slice=SHORT_SLICE_NS,
                        )
                    )
            if proxy is not None:
                proxy.stop()
                servers.remove(proxy)
            data["paced_sqlite"] = {}
            data["latency_sqlite"] = {}
            if "latency" in phases:
                durable = start_gateway(folder, emulator, "sqlite", "latency-sqlite")
                servers.append(durable)
                route = ROUTES[0]
                for key, keyword, text in (
                    ("paced_sqlite", "paced", "".join(texts["paced"])),
                    ("latency_sqlite", "latency", expected),
                ):
                    cell = asyncio.run(
                        measure_latency(
                            route, emulator, durable, text, settings, log, keyword=keyword
                        )
                    )
                    data[key][route.name] = {**cell, "journal": "sqlite"}
                durable.stop()
                servers.remove(durable)
            data["minimal"] = {}
            if "minimal" in phases:
                minimal = start_peer(folder, emulator, "minimal")
                servers.append(minimal)
                for route in ROUTES:
                    for keyword, text in (("paced", texts["paced"]), ("latency", texts["latency"])):
                        data["minimal"].setdefault(keyword, {})[route.name] = asyncio.run(
                            measure_latency(
                                route,
                                emulator,
                                gateway,
                                "".join(text),
                                settings,
                                log,
                                keyword=keyword,
                                relay=relay,
                                minimal=minimal,
                            )
                        )
                minimal.stop()
                servers.remove(minimal)
            if relay is not None:
                relay.stop()
                servers.remove(relay)
            data["breakdown"] = (
                asyncio.run(measure_breakdown(folder, emulator, texts, settings, log))
                if "breakdown" in phases
                else {}
            )
            data["wakeup"] = measure_wakeup(settings, log) if "wakeup" in phases else {}
            data["concurrency"] = []
            overlap = "".join(texts["overlap"])
            for n in settings.concurrency if "concurrency" in phases else ():
                for target, port in (("direct", emulator.port), ("gateway", gateway.port)):
                    data["concurrency"].append(
                        asyncio.run(
                            measure_concurrency(
                                n,
                                target,
                                port,
                                servers,
                                overlap,
                                settings.overlap_events,
                                settings.overlap_delay,
                                log,
                            )
                        )
                    )
            gateway.stop()
            servers.remove(gateway)
            data["memory"] = {}
            for journal in settings.memory_journals if "memory" in phases else ():
                fresh = start_gateway(folder, emulator, journal, f"memory-{journal}")
                servers.append(fresh)
                data["memory"][journal] = asyncio.run(
                    measure_memory(fresh, texts, settings.memory_lengths, log)
                )
                fresh.stop()
                servers.remove(fresh)
        finally:
            for server in servers:
                server.stop()
    return data


_PACES = {
    "paced": "paced",
    "latency": "unpaced",
    "latency_short_slice": "unpaced, client on a 0.1 ms slice",
    "paced_sqlite": "paced, SQLite journal",
    "latency_sqlite": "unpaced, SQLite journal",
}
"""The latency runs' keys in the figures, and how the targets name them (the targets
are judged on the first two; the others are reported beside them)."""


def targets(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The gateway targets, PASS/FAIL with their figures (as benchmarks.run does)."""
    out: list[dict[str, Any]] = []

    def add(name: str, ok: bool | None, figure: str) -> None:
        out.append(tables.target(name, ok, figure))

    for pace, how in _PACES.items():
        for name, cell in data.get(pace, {}).items():
            errors = cell["direct"]["errors"] + cell["gateway"]["errors"]
            for what, label in (("total", "per request"), ("first", "to first delta")):
                added = cell.get(f"added_{what}")
                where = f"gateway {name}, {how}"
                if added is None:
                    add(f"{where}: added latency {label}", False, "not measured")
                    continue
                figure = f"{_ms(added['median'])} (p99 {_ms(added['p99'])})" + (
                    f", {errors} WRONG replies" if errors else ""
                )
                if not pace.startswith("paced") and what == "total":
                    # All deltas at once: the sum of every event's processing (the
                    # gateway's throughput, see its CPU per request), not a latency.
                    ratio = (cell.get("ratio_total") or {}).get("median")
                    if ratio is not None:
                        figure += f", {ratio:.2f}x the byte relay's"
                    add(f"{where}: added time to the complete response", None, figure)
                    continue
                if pace not in ("paced", "latency"):
                    # Without the client's wait for a core, or with a durable journal:
                    # reported beside the targets, which are judged on the defaults.
                    add(f"{where}: median added latency {label}", None, figure)
                    continue
                for row in _judged(cell, what, f"{where}: added latency {label}"):
                    add(*row)
    litellm = data.get("litellm")
    if litellm is not None and not litellm["measured"] and data.get("paced"):
        add(
            "gateway added latency lower than LiteLLM's proxy",
            None,
            "not measured: " + litellm["reason"],
        )
    for pace, cells in data.get("minimal", {}).items():
        for name, cell in cells.items():
            # Any wrong reply in the rotation.
            wrong = sum(cell[side]["errors"] for side in ("direct", "relay", "gateway", "minimal"))
            for what, label in (("total", "per request"), ("first", "to first delta")):
                added = cell.get(f"added_{what}")
                least = cell.get(f"minimal_added_{what}")
                if not added or not least:
                    continue
                add(
                    f"gateway {name}, {_PACES[pace]}: added {label} by a minimal gateway "
                    "(the least a gateway does); the gateway over it",
                    None,
                    f"{_ms(least['median'])}; {_ms(added['median'] - least['median'])}"
                    + (f", {wrong} WRONG replies" if wrong else ""),
                )
    for cell in data.get("concurrency", []):
        if cell["target"] != "gateway":
            continue
        direct = next(
            (
                c
                for c in data["concurrency"]
                if c["target"] == "direct" and c["streams"] == cell["streams"]
            ),
            None,
        )
        figure = f"{cell['ok']}/{cell['streams']} correct, overlap {cell['max_overlap']}"
        if cell["duration"] and direct and direct["duration"]:
            figure += (
                f", median stream {cell['duration']['median']:.2f} s"
                f" (direct {direct['duration']['median']:.2f} s)"
            )
        if cell["errors"]:
            figure += f" ({', '.join(cell['error_kinds'])})"
        if cell["streams"] <= 200:
            add(
                f"gateway holds {cell['streams']} concurrent streams, no errors",
                cell["errors"] == 0,
                figure,
            )
        else:
            add(f"gateway holds {cell['streams']} concurrent streams (beyond target)", None, figure)
    for journal, cells in data.get("memory", {}).items():
        lengths = sorted(cells, key=int)
        if len(lengths) < 2:
            continue
        small, large = cells[lengths[0]], cells[lengths[-1]]
        growth = large["peak_growth"] - small["peak_growth"]
        wrong = [c["check"] for c in cells.values() if c["check"]]
        figure = (
            f"peak growth {_mib(small['peak_growth'])} at {int(lengths[0]):,} events, "
            f"{_mib(large['peak_growth'])} at {int(lengths[-1]):,}"
        )
        if journal == "memory":
            # The in-memory journal keeps every stream's events for resume (by design,
            # bounded per stream by the retention): reported, not a target.
            add(f"gateway pass-through memory, {journal} journal (keeps streams)", None, figure)
        else:
            add(
                f"gateway pass-through memory per stream flat ({journal} journal): "
                f"{int(lengths[-1]):,} events within 2 MiB of {int(lengths[0]):,}",
                growth < 2 * 1048576 and not wrong,
                figure + (f" WRONG {wrong[0]}" if wrong else ""),
            )
    return out


def _judged(cell: dict[str, Any], what: str, where: str) -> list[tuple[str, bool | None, str]]:
    """The judged targets of one latency cell's ``what`` (``total``, ``first``): the
    gateway's added latency at most :data:`RELAY_RATIO` times the byte relay's and lower
    than LiteLLM's proxy's where it was called, median and p99 (a p99 of fewer than
    :data:`P99_REQUESTS` requests per target is reported as indicative, not judged).
    Any wrong reply of the targets compared fails the target."""
    added = cell[f"added_{what}"]
    rows: list[tuple[str, bool | None, str]] = []
    wrong = cell["direct"]["errors"] + cell["gateway"]["errors"]
    floor = cell.get(f"relay_added_{what}")
    ratios = cell.get(f"ratio_{what}") or {}
    proxy = cell.get(f"litellm_added_{what}")
    for stat in ("median", "p99"):
        indicative = stat == "p99" and not cell.get("p99_judged", False)
        label = f"{where}, {stat}"
        note = (
            f" (p99 of {cell['requests']} requests: indicative, not judged)" if indicative else ""
        )
        if floor is None:
            rows.append(
                (f"{label}, at most {RELAY_RATIO}x the byte relay's", False, "relay not measured")
            )
        else:
            bad = wrong + cell["relay"]["errors"]
            ratio = ratios.get(stat)
            figure = (
                f"gateway {_ms(added[stat])}, relay {_ms(floor[stat])}: "
                + (f"{ratio:.2f}x" if ratio is not None else "no ratio (the relay added nothing)")
                + note
                + (f", {bad} WRONG replies" if bad else "")
            )
            ok = ratio is not None and ratio <= RELAY_RATIO and bad == 0
            rows.append(
                (
                    f"{label}, at most {RELAY_RATIO}x the byte relay's",
                    None if indicative else ok,
                    figure,
                )
            )
        if proxy is not None:
            bad = wrong + cell["litellm"]["errors"]
            figure = (
                f"gateway {_ms(added[stat])}, LiteLLM {_ms(proxy[stat])}"
                + note
                + (f", {bad} WRONG replies" if bad else "")
            )
            ok = None not in (added[stat], proxy[stat]) and added[stat] < proxy[stat] and bad == 0
            rows.append(
                (f"{label}, lower than LiteLLM's proxy", None if indicative else ok, figure)
            )
    return rows


# -- formatting ----------------------------------------------------------------------------


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.2f} ms"


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us"


def _waits(cell: dict[str, Any], kind: str) -> str:
    """``kind``'s mean run-queue wait per request of the three processes."""
    waits = cell[kind].get("run_queue_wait") or {}
    if not waits or any(value is None for value in waits.values()):
        return "-"
    return f"{kind}: " + ", ".join(_ms(waits[name]) for name in ("client", "emulator", "gateway"))


def _mib(size: float | None) -> str:
    return "-" if size is None else f"{size / 1048576:.2f} MiB"


def _pair(figures: dict[str, float] | None, unit: Callable[[float], str]) -> str:
    """A figure's median and p99, as ``median / p99``."""
    if not figures:
        return "-"
    return " / ".join(
        "-" if figures.get(s) is None else unit(figures[s]) for s in ("median", "p99")
    )


def relay_table(data: dict[str, Any]) -> str | None:
    """The latency phase's target table: per route and pace, the added latency of the byte
    relay, the gateway and LiteLLM's proxy (where measured) over the direct call, in one
    rotation, and the gateway's over the relay's (None without relay figures)."""
    litellm = data.get("litellm") or {}
    rows = [
        [
            "route",
            "pace",
            "what",
            "relay added (median / p99)",
            "gateway added (median / p99)",
            "gateway / relay (median / p99)",
            "LiteLLM added (median / p99)",
        ]
    ]
    requests: set[int] = set()
    judged = True
    for pace in ("paced", "latency"):
        for name, cell in data.get(pace, {}).items():
            if "relay" not in cell:
                continue
            requests.add(cell["requests"])
            judged = judged and cell.get("p99_judged", False)
            for what, label in (("total", "per request"), ("first", "to first delta")):
                rows.append(
                    [
                        name,
                        _PACES[pace],
                        label,
                        _pair(cell.get(f"relay_added_{what}"), _ms),
                        _pair(cell.get(f"added_{what}"), _ms),
                        _pair(cell.get(f"ratio_{what}"), lambda r: f"{r:.2f}x"),
                        _pair(cell.get(f"litellm_added_{what}"), _ms)
                        if "litellm" in cell
                        else "not measured",
                    ]
                )
    if len(rows) == 1:
        return None
    counts = ", ".join(str(n) for n in sorted(requests))
    return (
        "The gateway against the floor under any gateway (benchmarks/_relay.py, a process "
        "that only copies bytes between the client and the emulator) and against "
        "LiteLLM's proxy, in one rotation with the direct call: each one's added latency "
        f"is its time less the direct call's; the target is the gateway's at most "
        f"{RELAY_RATIO}x the relay's and lower than LiteLLM's, judged paced, and unpaced to "
        f"the first delta ({counts} requests per target; "
        + (
            "p99s judged"
            if judged
            else f"fewer than {P99_REQUESTS}: the p99s are indicative and not judged"
        )
        + "; LiteLLM "
        + (
            "measured"
            if litellm.get("measured")
            else f"not measured: {litellm.get('reason') or 'not configured'}"
        )
        + "):\n\n"
        + tables.markdown(rows)
    )


def report(data: dict[str, Any]) -> str:
    """The tables, as text."""
    parts: list[str] = []
    for pace in _PACES:
        if not data.get(pace):
            continue
        rows = [
            [
                "route",
                "what",
                "direct median",
                "direct p99",
                "gateway median",
                "gateway p99",
                "added median",
                "added p99",
                "CPU/request (emulator, gateway)",
                "waiting for a core/request (client, emulator, gateway)",
            ]
        ]
        for name, cell in data[pace].items():
            for what, label in (("total", "complete response"), ("first", "first delta")):
                direct, via = cell["direct"][what], cell["gateway"][what]
                added = cell.get(f"added_{what}") or {}
                rows.append(
                    [
                        name,
                        label,
                        _ms(direct and direct["median"]),
                        _ms(direct and direct["p99"]),
                        _ms(via and via["median"]),
                        _ms(via and via["p99"]),
                        _ms(added.get("median")),
                        _ms(added.get("p99")),
                        (
                            f"{_ms(cell['cpu_per_request']['emulator'])}, "
                            f"{_ms(cell['cpu_per_request']['gateway'])}"
                        )
                        if what == "total"
                        else "",
                        _waits(cell, "direct" if what == "total" else "gateway"),
                    ]
                )
        any_cell = next(iter(data[pace].values()))
        pacing = (
            f"one every {any_cell['delay'] * 1000:.0f} ms"
            if any_cell.get("delay")
            else "all at once (unpaced)"
        )
        if any_cell.get("client_slice_ns"):
            pacing += f", the client on a {any_cell['client_slice_ns'] / 1e6:g} ms slice"
        if any_cell.get("journal"):
            pacing += f", the gateway journalling to {any_cell['journal']}"
        parts.append(
            f"Gateway latency: {any_cell['requests']} sequential requests per route, "
            f"{any_cell['events']} text deltas each sent {pacing}, keep-alive, direct and "
            "gateway interleaved (wall clock):\n\n" + tables.markdown(rows)
        )
    against = relay_table(data)
    if against:
        parts.append(against)
    least_rows = [
        [
            "route",
            "pace",
            "what",
            "added by the relay",
            "added by a minimal gateway",
            "added by the gateway",
            "gateway over the minimal",
        ]
    ]
    for pace, cells in data.get("minimal", {}).items():
        for name, cell in cells.items():
            for what, label in (("total", "complete response"), ("first", "first delta")):
                relay = cell.get(f"relay_added_{what}")
                least = cell.get(f"minimal_added_{what}")
                added = cell.get(f"added_{what}")
                least_rows.append(
                    [
                        name,
                        _PACES[pace],
                        label,
                        _ms(relay and relay["median"]),
                        _ms(least and least["median"]),
                        _ms(added and added["median"]),
                        _ms(least and added and added["median"] - least["median"]),
                    ]
                )
    if len(least_rows) > 1:
        parts.append(
            "The least a gateway does: a minimal gateway (benchmarks/_minimal.py: it "
            "parses each request, routes it, and decodes and encodes each event in its "
            "protocols' callbacks, with nothing else), called in one rotation with the "
            "direct request, the relay and the gateway (medians):\n\n" + tables.markdown(least_rows)
        )
    os_rows = [
        [
            "route",
            "pace",
            "process",
            "CPU/request (user, kernel)",
            "kernel share",
            "wake-ups/request",
            "preemptions/request",
            "page faults/request",
        ]
    ]
    for pace, cells in (
        ("paced", data.get("paced", {})),
        ("unpaced", data.get("latency", {})),
        *((f"{_PACES[k]}, minimal phase", c) for k, c in data.get("minimal", {}).items()),
    ):
        for name, cell in cells.items():
            for process, counts in cell.get("os_per_request", {}).items():
                if counts is None:
                    continue
                cpu = counts["user"] + counts["kernel"]
                os_rows.append(
                    [
                        name,
                        pace,
                        _PEERS.get(process, process),
                        f"{_ms(counts['user'])}, {_ms(counts['kernel'])}",
                        f"{counts['kernel'] / cpu:.0%}" if cpu > 0 else "-",
                        f"{counts['wakeups']:.1f}",
                        f"{counts['preemptions']:.1f}",
                        f"{counts['page_faults']:.1f}",
                    ]
                )
    if len(os_rows) > 1:
        parts.append(
            "What the operating system does for the process in the middle, per request "
            "of its own, over the measured requests (Linux's /proc: CPU time in user "
            "space and in the kernel, in clock ticks; wake-ups are voluntary context "
            "switches, preemptions involuntary ones; page faults are first touches of "
            "fresh memory, such as the journal's growth):\n\n" + tables.markdown(os_rows)
        )
    if data.get("breakdown"):
        rows = [
            [
                "route",
                "pace",
                "requests",
                *(label for _, label in STAGES),
                "gateway's own (request + first delta)",
                "gateway: last read -> written",
                "via gateway, first delta",
                "added to first delta",
            ]
        ]
        for pace, cells in data["breakdown"].items():
            for name, cell in cells.items():
                median = cell["median"]
                rows.append(
                    [
                        name,
                        pace,
                        f"{cell['matched']}/{cell['replies']}",
                        *(_ms(median[key]) for key, _ in STAGES),
                        _ms(median["own"]),
                        _ms(median["last"]),
                        _ms(cell["via_first"]),
                        _ms(cell["added_first"]),
                    ]
                )
        parts.append(
            "Where the time to the first delta goes through the gateway (a gateway run by "
            "benchmarks._probe, timestamps at its reads and writes, medians per stage; the "
            "stages add up to the first delta):\n\n" + tables.markdown(rows)
        )
    if data.get("concurrency"):
        rows = [
            [
                "target",
                "streams",
                "correct",
                "delivering at once",
                "open at once",
                "wall",
                "stream median",
                "stream p99",
                "first delta p99",
                "CPU s (emulator / gateway)",
            ]
        ]
        for cell in data["concurrency"]:
            cpu = list(cell["cpu_seconds"].values())
            rows.append(
                [
                    cell["target"],
                    str(cell["streams"]),
                    f"{cell['ok']}/{cell['streams']}",
                    str(cell["max_overlap"]),
                    str(cell.get("max_in_flight", "-")),
                    f"{cell['wall']:.2f} s",
                    _ms(cell["duration"] and cell["duration"]["median"]),
                    _ms(cell["duration"] and cell["duration"]["p99"]),
                    _ms(cell["first_event"] and cell["first_event"]["p99"]),
                    " / ".join(f"{c:.1f}" for c in cpu),
                ]
            )
        first = data["concurrency"][0]
        parts.append(
            f"Concurrent streams (each {data['settings']['overlap_events']} deltas paced at "
            f"{data['settings']['overlap_delay'] * 1000:.0f} ms: "
            f"{first['nominal_stream_seconds']:.2f} s alone):\n\n" + tables.markdown(rows)
        )
    if data.get("wakeup"):
        from benchmarks._wakeup import GAPS

        rows = [["work", *(label for label, _, _ in GAPS)]]
        for name, cells in data["wakeup"]["units"].items():
            rows.append(
                [name]
                + [
                    _us(cells[label]["median"])
                    + ("" if label == "warm" else f" ({cells[label]['ratio']:.1f}x)")
                    for label, _, _ in GAPS
                ]
            )
        parts.append(
            "The same work, warm and after the process has slept (benchmarks/_wakeup.py: "
            f"medians of {data['wakeup']['samples']} runs each, in one fresh process; "
            "request: a Chat request's head, body and upstream call; event: one Chat "
            "chunk decoded, encoded, split into resume entries and journalled; least: "
            "twenty additions in a Python loop, the interpreter's own floor):\n\n"
            + tables.markdown(rows)
        )
    if data.get("memory"):
        rows = [["journal", "events", "stream bytes", "time", "peak RSS growth", "retained"]]
        for journal, cells in data["memory"].items():
            for length, cell in cells.items():
                rows.append(
                    [
                        journal,
                        f"{int(length):,}",
                        f"{cell['stream_bytes']:,}",
                        f"{cell['seconds']:.2f} s",
                        _mib(cell["peak_growth"]),
                        _mib(cell["retained"]),
                    ]
                )
        parts.append(
            "Gateway process memory per pass-through stream (RSS sampled every 2 ms):\n\n"
            + tables.markdown(rows)
        )
    return "\n\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gateway", description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="OUT")
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"what to measure (default: {','.join(PHASES)})",
    )
    parser.add_argument(
        "--src", metavar="DIR", help="run the servers from this source tree (default: ./src)"
    )
    parser.add_argument(
        "--litellm",
        metavar="PATH",
        help=f"LiteLLM's proxy executable, measured in the latency phase (default: ${LITELLM_ENV})",
    )
    args = parser.parse_args(argv)
    if args.src:
        os.environ[SOURCE_ENV] = str(Path(args.src).resolve())

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    phases = tuple(args.phases.split(","))
    unknown = set(phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phase(s): {', '.join(sorted(unknown))}")
    data = run_gateway_bench(args.quick, log, phases, litellm=args.litellm)
    data["targets"] = targets(data)
    print()
    print(report(data))
    print("\nTargets:\n")
    for t in data["targets"]:
        print(f"  {t['status']:4}  {t['target']}: {t['figure']}")
    if args.json:
        Path(args.json).write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
