"""The official ``anthropic`` SDK on the same bytes: ``beta.sessions.events.stream(...)``
yields the session events it reads, and they must be the events polystream decodes and
rebuilds (the list endpoint's page, plus the previews the stream alone carries), for
every fixture and for what polystream's encoder writes from another dialect's events.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from polystream import decode_events
from polystream.dialects import get_dialect
from polystream.dialects.anthropic_agent_session import Encoder, rebuild
from tests.helpers import FIXTURES, stream_fixtures

DIALECT = "anthropic_agent_session"
OURS = stream_fixtures(DIALECT)


def client_for(data: bytes, seen: list[httpx2.Request]) -> anthropic.Anthropic:
    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=data)

    return anthropic.Anthropic(
        api_key="x",
        base_url="http://test",
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        max_retries=0,
    )


def sdk_events(data: bytes, seen: list[httpx2.Request] | None = None) -> list[dict[str, Any]]:
    """What the SDK's stream yields, as JSON values (as the wire spelled them)."""
    client = client_for(data, seen if seen is not None else [])
    out: list[dict[str, Any]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an event outside the SDK's union
        for event in client.beta.sessions.events.stream("sesn_011CZkZbQm7tWq2x"):
            out.append(event.to_dict(mode="json", exclude_unset=True))
    return out


def _tidy(event: dict[str, Any]) -> dict[str, Any]:
    """An event with its timestamp as the SDK writes it back (pydantic's ISO form)."""
    return {k: v for k, v in event.items() if k != "processed_at"}


def ours(path: Path) -> list[dict[str, Any]]:
    events = decode_events(path.read_bytes(), DIALECT)
    return [_tidy(e) for e in rebuild(events)["data"]]


@pytest.mark.parametrize(
    "path", [p for p in OURS if p.stem not in ("api_error", "truncated")], ids=lambda p: p.stem
)
def test_sdk_yields_the_rebuilt_events(path: Path) -> None:
    seen: list[httpx2.Request] = []
    theirs = [_tidy(e) for e in sdk_events(path.read_bytes(), seen)]
    history = [e for e in theirs if e["type"] not in ("event_start", "event_delta")]
    assert history == ours(path)
    assert seen[0].method == "GET"
    assert seen[0].url.path == "/v1/sessions/sesn_011CZkZbQm7tWq2x/events/stream"
    assert get_dialect(DIALECT).routes[0].path == "/v1/sessions/{id}/events/stream"


def test_sdk_reads_the_previews_as_we_do() -> None:
    data = (FIXTURES / DIALECT / "deltas_custom_tool.sse").read_bytes()
    deltas = [e for e in sdk_events(data) if e["type"] == "event_delta"]
    texts = [e["delta"]["content"]["text"] for e in deltas]
    assert texts == ["Let me ", "check the ", "forecast."]
    result = get_dialect(DIALECT).decoder()
    events = result.feed(data) + result.close()
    from polystream.accumulate import accumulate

    text = accumulate(events).blocks[1]
    assert text.text == "".join(texts)


def test_sdk_raises_on_the_api_error_event() -> None:
    data = (FIXTURES / DIALECT / "api_error.sse").read_bytes()
    with pytest.raises(anthropic.APIStatusError) as caught:
        sdk_events(data)
    assert "overloaded_error" in str(caught.value)


@pytest.mark.parametrize(
    "path",
    [
        p
        for p in stream_fixtures()
        if p.parent.name == "anthropic_messages"
        and p.stem in ("skeleton", "parallel_tools", "thinking")
    ],
    ids=lambda p: p.stem,
)
def test_sdk_reads_what_we_write_from_messages(path: Path) -> None:
    source = decode_events(path.read_bytes(), "anthropic_messages")
    data = Encoder().encode_all(source)
    theirs = sdk_events(data)
    assert [e["type"] for e in theirs] == [e["type"] for e in rebuild(source)["data"]]
    assert theirs[-1]["type"] == "session.status_idle"
