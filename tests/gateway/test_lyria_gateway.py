"""Lyria RealTime relayed by the gateway (both servers) to polystream's emulator, read by
polystream's own client with the gateway's key: the music arrives exactly as the
emulator makes it."""

from __future__ import annotations

import asyncio
import base64

import pytest

from polystream.events import DataDelta
from polystream.gateway_core import GatewayConfig, Upstream
from polystream.realtime import Routed, connect
from polystream.scenario import Emulator
from polystream.scenario._format import Match, Scenario, Timing
from polystream.server import ServerThread
from polystream.server.gateway import create_gateway
from tests.gateway.conftest import GATEWAY_KEY, AppThread
from tests.server.test_gemini_lyria import CHUNK, MODEL, expected

FAST = Scenario(match=Match(dialect="gemini_lyria"), timing=Timing(audio_delay=0.05))


async def listen(base_url: str) -> list[Routed]:
    """One prompt, PLAY, two chunks, PAUSE (the upstream stops before the socket
    closes)."""
    async with connect(
        "gemini_lyria",
        model=MODEL,
        api_key=GATEWAY_KEY,
        base_url=base_url,
        idle_timeout=10,
        reconnect=None,
    ) as conn:
        await conn.send_text("calm piano")
        got: list[Routed] = []
        async for routed in conn:
            got.append(routed)
            if sum(type(r.event) is DataDelta for r in got) == 2:
                break
        await conn.command("pause")
        await asyncio.sleep(0.1)
        got += await conn.close()
    return got


@pytest.mark.parametrize("server", ["polystream", "uvicorn"])
def test_the_gateway_relays_the_music(server: str) -> None:
    with ServerThread(Emulator([FAST])) as upstream:
        config = GatewayConfig(
            upstreams={
                "lyria": Upstream(
                    name="lyria",
                    dialect="gemini_lyria",
                    base_url=upstream.base_url + "/gemini",
                    api_key="upstream-key",
                )
            },
            api_key=GATEWAY_KEY,
        )
        front = AppThread(create_gateway(config), server=server).start()
        try:
            got = asyncio.run(listen(front.base_url + "/gemini"))
        finally:
            front.stop()
    audio = [r.event.delta for r in got if type(r.event) is DataDelta]
    assert [base64.b64decode(a) for a in audio] == [
        expected([("calm piano", 1.0)], n * CHUNK, CHUNK) for n in range(2)
    ]
    assert got[-1].event.status == "incomplete"  # type: ignore[union-attr]
