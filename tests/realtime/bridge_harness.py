"""A bridge (:class:`polystream.realtime._bridge.Bridge`) in front of the emulator's
sans-I/O connection of the upstream family: what the client is sent, what the upstream
is sent and what the upstream answered, all in memory, on a clock the test moves."""

from __future__ import annotations

import array
import json
import math
from typing import Any

from polystream.realtime._bridge import Bridge
from polystream.scenario import Emulator, SocketEmulation


def tone(seconds: float, rate: int, *, amplitude: float = 0.5, frequency: float = 440.0) -> bytes:
    """PCM16 mono of a sine (loud enough for the emulator's voice activity detection)."""
    samples = array.array(
        "h",
        (
            round(amplitude * 32767 * math.sin(2 * math.pi * frequency * n / rate))
            for n in range(round(seconds * rate))
        ),
    )
    return samples.tobytes()


class Harness:
    """A client of ``client`` bridged to an emulated upstream of ``upstream``."""

    def __init__(
        self, client: str, upstream: str, model: str, emulator: Emulator | None = None
    ) -> None:
        self.upstream = SocketEmulation(emulator or Emulator(), upstream, query={"model": model})
        self.bridge = Bridge(client, upstream, model=model, seed="test")
        self.now = 0.0
        self.client: list[str | bytes] = []  # sent to the client, not taken yet
        self.sent: list[str | bytes] = []  # sent to the upstream
        self.answered: list[str | bytes] = []  # what the upstream sent
        self.closed: tuple[int, str] | None = None  # the client's close, if any
        self.upstream.start(0.0)
        step = self.bridge.open()
        self.client += step.client
        self._pump(step.upstream)

    def _pump(self, pending: list[str | bytes]) -> None:
        queue = list(pending)
        while True:
            if queue:
                message = queue.pop(0)
                self.sent.append(message)
                self.upstream.receive(message, self.now)
            sends = self.upstream.due(self.now)
            if not sends and not queue:
                return
            for send in sends:
                assert send.text is not None
                self.answered.append(send.text)
                step = self.bridge.upstream(send.text)
                self.client += step.client
                self.closed = self.closed or step.close
                queue += step.upstream

    def send(self, message: dict[str, Any] | bytes) -> None:
        """One client message (a dict is sent as its JSON)."""
        data = message if isinstance(message, bytes) else json.dumps(message)
        step = self.bridge.client(data)
        self.client += step.client
        self.closed = self.closed or step.close
        self._pump(step.upstream)

    def at(self, now: float) -> None:
        """Move the clock: what the upstream has due by then is read."""
        self.now = now
        self._pump([])

    def take(self) -> list[dict[str, Any]]:
        """The client's messages so far (JSON parsed), taken."""
        out, self.client = self.client, []
        return [json.loads(m) for m in out if isinstance(m, str)]

    def take_sent(self) -> list[dict[str, Any]]:
        """The upstream's received messages so far (JSON parsed), taken."""
        out, self.sent = self.sent, []
        return [json.loads(m) for m in out if isinstance(m, str)]

    def upstream_messages(self) -> list[dict[str, Any]]:
        """Everything the upstream sent (JSON parsed)."""
        return [json.loads(m) for m in self.answered if isinstance(m, str)]
