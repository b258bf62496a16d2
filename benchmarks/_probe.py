"""``polystream`` with the bytes at its HTTP boundaries timestamped:
``python -m benchmarks._probe OUT ARGS...`` runs ``polystream ARGS...`` and, when the
process exits, writes to ``OUT`` (JSON) one ``[what, seconds, bytes]`` record per

* ``request``: a request's first bytes reaching the server (a read with no request
  under way on its connection);
* ``out``: a write of the server (the response head leaves with the first body bytes);
* ``upstream_out``: a write of the upstream client (a request);
* ``upstream_in``: a read of the upstream client.

The times are ``time.perf_counter()``, which on Linux reads ``CLOCK_MONOTONIC``: one
clock for every process of the machine, so they compare with a measuring client's.
Each record costs the process about a microsecond; :mod:`benchmarks.gateway` runs a
probed gateway only for its breakdown, never for the latency it judges.
"""

from __future__ import annotations

import atexit
import json
import sys
import time
from pathlib import Path
from typing import Any

from polystream.client import _h1 as client_h1
from polystream.server import _h1server as server_h1

Record = tuple[str, float, int]


def install(records: list[Record]) -> None:
    """Wrap the four boundaries (see the module's docstring) to append to ``records``."""
    clock = time.perf_counter
    server = server_h1._Connection
    client = client_h1._Connection
    server_read = server.data_received
    server_write = server.write
    client_read = client.data_received
    client_write = client.write

    def read_request(self: Any, data: bytes) -> None:
        if self.cycle is None:
            records.append(("request", clock(), len(data)))
        server_read(self, data)

    def write_response(self: Any, data: bytes) -> None:
        records.append(("out", clock(), len(data)))
        server_write(self, data)

    def read_upstream(self: Any, data: bytes) -> None:
        records.append(("upstream_in", clock(), len(data)))
        client_read(self, data)

    async def write_upstream(self: Any, data: bytes, timeout: float | None) -> None:
        records.append(("upstream_out", clock(), len(data)))
        await client_write(self, data, timeout)

    server.data_received = read_request  # type: ignore[method-assign]
    server.write = write_response  # type: ignore[method-assign]
    client.data_received = read_upstream  # type: ignore[method-assign]
    client.write = write_upstream  # type: ignore[method-assign]


def main() -> int:
    out = Path(sys.argv[1])
    records: list[Record] = []
    install(records)
    atexit.register(lambda: out.write_text(json.dumps(records)))
    from polystream.cli import main as polystream

    return polystream(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
