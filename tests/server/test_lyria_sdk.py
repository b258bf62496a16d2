"""The google-genai SDK's Lyria RealTime client (``client.aio.live.music.connect``) as the
reference client of the emulator: prompts (one filtered), a configuration, PLAY, the
music's exact bytes, PAUSE.

The SDK opens ``wss://`` whenever it has an API key (it replaces the base URL's scheme):
it is read over TLS from the emulator (``ServerThread(tls=DIR)``, the local authority
trusted through ``SSL_CERT_FILE``), untouched. Against the plain emulator, the one SDK
method that derives the WebSocket base URL is made to say ``ws://``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from google import genai
from google.genai import types
from google.genai._api_client import BaseApiClient

from polystream.scenario import Emulator
from polystream.scenario._format import Faults, HttpError, Match, Scenario, Timing
from polystream.server import ServerThread
from tests.server.test_gemini_lyria import CHUNK, MIME, MODEL, expected

SCENARIOS = [
    Scenario(
        match=Match(dialect="gemini_lyria", contains="violence"),
        faults=Faults(http_error=HttpError(status=400, message="The prompt was blocked.")),
    ),
    Scenario(match=Match(dialect="gemini_lyria"), timing=Timing(audio_delay=0.01)),
]


@pytest.fixture(scope="module")
def root() -> Iterator[str]:
    with ServerThread(Emulator(SCENARIOS)) as server:
        yield server.base_url


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The emulator over HTTPS and WSS, and its authority's certificate."""
    tls = tmp_path_factory.mktemp("tls")
    with ServerThread(Emulator(SCENARIOS), tls=tls) as server:
        yield server.base_url, tls / "ca.pem"


async def play(root: str) -> list[types.LiveMusicServerMessage]:
    """Two prompts (one filtered), a configuration, PLAY, three chunks, PAUSE."""
    client = genai.Client(
        api_key="g-test",
        http_options=types.HttpOptions(base_url=root + "/gemini", api_version="v1alpha"),
    )
    got: list[types.LiveMusicServerMessage] = []
    async with client.aio.live.music.connect(model=MODEL) as session:
        await session.set_weighted_prompts(
            [
                types.WeightedPrompt(text="minimal techno", weight=1.0),
                types.WeightedPrompt(text="a song about violence", weight=0.5),
            ]
        )
        await session.set_music_generation_config(
            types.LiveMusicGenerationConfig(bpm=120, density=0.8, scale=types.Scale.D_MAJOR_B_MINOR)
        )
        await session.play()
        async for message in session.receive():
            got.append(message)
            if sum(m.server_content is not None for m in got) == 3:
                break
        await session.pause()
    return got


@pytest.mark.filterwarnings("ignore:Realtime music generation is experimental")
def test_the_sdk_plays_the_emulator_s_music_over_wss(
    secure: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, authority = secure
    assert root.startswith("https://")
    monkeypatch.setenv("SSL_CERT_FILE", str(authority))
    check(asyncio.run(play(root)))


@pytest.mark.filterwarnings("ignore:Realtime music generation is experimental")
def test_the_sdk_plays_the_emulator_s_music_over_ws(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    derive = BaseApiClient._websocket_base_url

    def plain(self: BaseApiClient, http_options: types.HttpOptions | None = None) -> str:
        # The SDK's own derivation, ws:// where it says wss://.
        return derive(self, http_options).replace("wss://", "ws://", 1)

    monkeypatch.setattr(BaseApiClient, "_websocket_base_url", plain)
    check(asyncio.run(play(root)))


def check(got: list[types.LiveMusicServerMessage]) -> None:
    """The filtered prompt, then three chunks of exactly the emulator's music."""
    assert got[0].filtered_prompt == types.LiveMusicFilteredPrompt(
        text="a song about violence", filtered_reason="The prompt was blocked."
    )
    chunks = [m.server_content.audio_chunks for m in got[1:] if m.server_content is not None]
    assert len(got) == 4 and all(len(c or []) == 1 for c in chunks)
    for n, listed in enumerate(chunks):
        assert listed is not None
        chunk = listed[0]
        assert chunk.mime_type == MIME
        assert chunk.data == expected([("minimal techno", 1.0)], n * CHUNK, CHUNK, 0.8, 120)
        assert chunk.source_metadata == types.LiveMusicSourceMetadata(
            client_content=types.LiveMusicClientContent(
                weighted_prompts=[types.WeightedPrompt(text="minimal techno", weight=1.0)]
            ),
            music_generation_config=types.LiveMusicGenerationConfig(
                bpm=120, density=0.8, scale=types.Scale.D_MAJOR_B_MINOR
            ),
        )
