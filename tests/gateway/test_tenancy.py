"""Nothing of one client's journalled stream reaches another: streams are journalled
under ids the gateway mints, bound to the tenant (client key) and dialect that created
them; native ids lead to them through aliases of that tenant and dialect; a resume by
anyone else is the 404 of an unknown id; a resume whose client leaves frees its slot."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from polystream import decode
from polystream.gateway_core import Client, GatewayConfig, Limits, Upstream, load_config
from polystream.journal import Journal, MemoryJournal
from polystream.server import _gateway_resume
from polystream.server.gateway import create_gateway
from polystream.server.journal_redis import RedisJournal
from polystream.server.journal_sqlite import SQLiteJournal
from polystream.wire.sse import ServerSentEvent, SSEDecoder
from tests.journal.test_journal import redis_url  # noqa: F401  (fixture)

from .conftest import CANARY, GATEWAY_KEY, AppThread

NATIVE_ID = "chatcmpl-123"
"""What the upstream answers for every reply (as some local servers do)."""
TEAM_A = "team-a-key-0123456789"
TEAM_B = "team-b-key-9876543210"
PARTS = 12
"""Deltas per reply, 40 ms apart: each stream runs about half a second."""


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": NATIVE_ID,
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class _Paced(httpx.AsyncByteStream):
    """A Chat Completions stream whose text is ``<word>1 <word>2 ...``, one delta every
    ``delay`` seconds, always under the id :data:`NATIVE_ID`."""

    def __init__(self, word: str, delay: float) -> None:
        self.word = word
        self.delay = delay

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield _chunk({"role": "assistant", "content": ""})
        for n in range(1, PARTS + 1):
            await asyncio.sleep(self.delay)
            yield _chunk({"content": f"{self.word}{n} "})
        yield _chunk({}, "stop")
        yield b"data: [DONE]\n\n"


def _upstream(delay: float = 0.04) -> httpx.MockTransport:
    """Answers each request with the words of its last user message (see _Paced)."""

    def handler(request: httpx.Request) -> httpx.Response:
        word = json.loads(request.content)["messages"][-1]["content"]
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Paced(word, delay)
        )

    return httpx.MockTransport(handler)


def _text(word: str) -> str:
    return "".join(f"{word}{n} " for n in range(1, PARTS + 1))


def _gateway(
    journal: Journal | None = None,
    *,
    api_key: str | None = GATEWAY_KEY,
    clients: dict[str, Client] | None = None,
    **limits: Any,
) -> AppThread:
    config = GatewayConfig(
        upstreams={
            "chat": Upstream(
                name="chat", dialect="openai_chat", base_url="http://up/v1", api_key=CANARY
            )
        },
        api_key=api_key,
        clients=clients or {},
        limits=Limits(**{"resume_grace_seconds": 10.0, **limits}),
    )
    return AppThread(create_gateway(config, journal=journal, transport=_upstream())).start()


@pytest.fixture
def gateways() -> Iterator[Callable[..., AppThread]]:
    running: list[AppThread] = []

    def start(*args: Any, **kwargs: Any) -> AppThread:
        gateway = _gateway(*args, **kwargs)
        running.append(gateway)
        return gateway

    yield start
    for gateway in running:
        gateway.stop()


def _events(data: bytes) -> list[ServerSentEvent]:
    return [f for f in SSEDecoder().feed(data) if isinstance(f, ServerSentEvent)]


def _auth(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def _head(
    gateway: AppThread, path: str, key: str, body: dict[str, Any], count: int = 4
) -> tuple[bytes, dict[str, str]]:
    """Read ``count`` SSE events of a new stream, then leave (whole events only)."""
    got = b""
    with httpx.stream(
        "POST", gateway.base_url + path, headers=_auth(key), json=body, timeout=10
    ) as response:
        assert response.status_code == 200
        headers = dict(response.headers)
        for chunk in response.iter_bytes():
            got += chunk
            if len(_events(got)) >= count:
                break
    return got[: got.rfind(b"\n\n") + 2], headers


def _responses_body(word: str) -> dict[str, Any]:
    return {"model": "m", "input": [{"role": "user", "content": word}], "stream": True}


def _messages_body(word: str) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": word}],
    }


def _last_sequence(head: bytes) -> int:
    return int(json.loads(_events(head)[-1].data)["sequence_number"])


def _resume_responses(gateway: AppThread, key: str, stream: str, after: int) -> httpx.Response:
    return httpx.get(
        gateway.base_url + f"/openai/v1/responses/{stream}",
        params={"stream": "true", "starting_after": str(after)},
        headers=_auth(key),
        timeout=10,
    )


def _journal(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Journal:
    if kind == "memory":
        return MemoryJournal()
    if kind == "sqlite":
        return SQLiteJournal(str(tmp_path / "j.db"))
    url = request.getfixturevalue("redis_url")
    return RedisJournal(url, prefix=f"tenancy:{tmp_path.name}")


# -- colliding upstream ids ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis"])
def test_two_live_streams_with_one_upstream_id_never_mix(
    gateways: Callable[..., AppThread],
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="polystream.gateway")
    gateway = gateways(_journal(kind, tmp_path, request))
    head_a, headers_a = _head(gateway, "/openai/v1/responses", GATEWAY_KEY, _responses_body("A"))
    head_b, headers_b = _head(gateway, "/openai/v1/responses", GATEWAY_KEY, _responses_body("B"))
    # Both clients were given the upstream's one id, and two different minted ids.
    created = [json.loads(_events(h)[0].data)["response"]["id"] for h in (head_a, head_b)]
    assert created == [NATIVE_ID, NATIVE_ID]
    minted_a = headers_a["x-polystream-stream-id"]
    minted_b = headers_b["x-polystream-stream-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", minted_a) and re.fullmatch(r"[0-9a-f]{32}", minted_b)
    assert minted_a != minted_b
    # The native id leads to the first stream only: its client gets its own tokens.
    tail_a = _resume_responses(gateway, GATEWAY_KEY, NATIVE_ID, _last_sequence(head_a))
    assert tail_a.status_code == 200
    whole_a = decode(head_a + tail_a.content, "openai_responses")
    assert whole_a.status == "completed"
    assert whole_a.text == _text("A")
    sequence = [json.loads(e.data)["sequence_number"] for e in _events(head_a + tail_a.content)]
    assert sequence == list(range(len(sequence)))
    # The second stays resumable by its minted id, with its own tokens...
    tail_b = _resume_responses(gateway, GATEWAY_KEY, minted_b, _last_sequence(head_b))
    assert tail_b.status_code == 200
    whole_b = decode(head_b + tail_b.content, "openai_responses")
    assert whole_b.status == "completed"
    assert whole_b.text == _text("B")
    # ... or by it and Last-Event-ID (<stream>.<sequence_number>) on the create route.
    again = httpx.post(
        gateway.base_url + "/openai/v1/responses",
        headers={**_auth(GATEWAY_KEY), "last-event-id": f"{minted_b}.{_last_sequence(head_b)}"},
        json=_responses_body("B"),
        timeout=10,
    )
    assert again.status_code == 200
    assert again.content == tail_b.content
    # The native id of the second could not be aliased, and the log says so.
    refused = [r.getMessage() for r in caplog.records if "could not be aliased" in r.getMessage()]
    assert refused == [
        f"stream {minted_b}: its native id {NATIVE_ID} could not be aliased (another "
        "stream of the same tenant and dialect holds it); it is resumable by its stream "
        "id only"
    ]


def test_two_tenants_with_one_upstream_id_each_resume_their_own(
    gateways: Callable[..., AppThread], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="polystream.gateway")
    gateway = gateways(
        api_key=None, clients={"team-a": Client(api_key=TEAM_A), "team-b": Client(api_key=TEAM_B)}
    )
    head_a, _ = _head(gateway, "/openai/v1/responses", TEAM_A, _responses_body("A"))
    head_b, _ = _head(gateway, "/openai/v1/responses", TEAM_B, _responses_body("B"))
    for key, head, word in ((TEAM_B, head_b, "B"), (TEAM_A, head_a, "A")):
        tail = _resume_responses(gateway, key, NATIVE_ID, _last_sequence(head))
        assert tail.status_code == 200
        assert decode(head + tail.content, "openai_responses").text == _text(word)
    # Each tenant's alias is its own: no collision was logged.
    assert not [r for r in caplog.records if "could not be aliased" in r.getMessage()]


# -- who may read a stream -------------------------------------------------------------------


def _shape(response: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    """A response as a client sees it, but for the date."""
    headers = [(k, v) for k, v in response.headers.items() if k.lower() != "date"]
    return response.status_code, headers, response.content


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis"])
def test_another_tenants_stream_is_the_404_of_an_unknown_id(
    gateways: Callable[..., AppThread],
    kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (A shared journal's miss waits for another instance's writes: 1 s, here 0.1 s.)
    monkeypatch.setattr(_gateway_resume, "JOURNAL_LAG_SECONDS", 0.1)
    gateway = gateways(
        _journal(kind, tmp_path, request),
        api_key=None,
        clients={"team-a": Client(api_key=TEAM_A), "team-b": Client(api_key=TEAM_B)},
    )
    head, headers = _head(gateway, "/openai/v1/responses", TEAM_A, _responses_body("A"))
    minted = headers["x-polystream-stream-id"]
    after = _last_sequence(head)
    unknown = secrets.token_hex(16)
    # Team B, with team A's minted id and native id, gets exactly what an unknown id gets.
    expected = _shape(_resume_responses(gateway, TEAM_B, unknown, after))
    assert expected[0] == 404
    assert json.loads(expected[2]) == {
        "error": {
            "message": "cannot resume: no stream with this id (unknown or expired)",
            "type": "invalid_request_error",
            "param": None,
            "code": "not_found",
        }
    }
    assert _shape(_resume_responses(gateway, TEAM_B, minted, after)) == expected
    assert _shape(_resume_responses(gateway, TEAM_B, NATIVE_ID, after)) == expected
    assert _shape(_resume_responses(gateway, TEAM_A, unknown, after)) == expected
    # The Last-Event-ID path checks the tenant too.
    last = f"{minted}.{after}"
    posted = [
        httpx.post(
            gateway.base_url + "/openai/v1/responses",
            headers={**_auth(key), "last-event-id": event_id},
            json=_responses_body("A"),
            timeout=10,
        )
        for key, event_id in ((TEAM_B, last), (TEAM_B, f"{unknown}.{after}"))
    ]
    assert _shape(posted[0]) == _shape(posted[1])
    assert posted[0].status_code == 404
    # Its owner reads it.
    assert _resume_responses(gateway, TEAM_A, minted, after).status_code == 200


def test_a_stream_is_served_only_through_the_dialect_that_created_it(
    gateways: Callable[..., AppThread],
) -> None:
    gateway = gateways()
    head, headers = _head(gateway, "/openai/v1/responses", GATEWAY_KEY, _responses_body("A"))
    minted = headers["x-polystream-stream-id"]
    unknown = secrets.token_hex(16)

    def both(path: str, params: dict[str, str]) -> list[tuple[int, list[tuple[str, str]], bytes]]:
        return [
            _shape(
                httpx.get(
                    gateway.base_url + path.format(id=name),
                    params=params,
                    headers={**_auth(GATEWAY_KEY), "x-goog-api-key": GATEWAY_KEY},
                    timeout=10,
                )
            )
            for name in (minted, unknown)
        ]

    # A Responses journal under the Interactions route, and under xAI's Responses route.
    interactions = both("/gemini/v1beta/interactions/{id}", {"stream": "true"})
    assert interactions[0] == interactions[1] and interactions[0][0] == 404
    xai = both("/xai/v1/responses/{id}", {"stream": "true", "starting_after": "2"})
    assert xai[0] == xai[1] and xai[0][0] == 404
    # A Messages stream resumed with Last-Event-ID through Chat Completions.
    head, _ = _head(gateway, "/anthropic/v1/messages", GATEWAY_KEY, _messages_body("M"))
    last_id = _events(head)[-1].id
    assert last_id is not None
    chat = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "M"}]}
    answers = [
        _shape(
            httpx.post(
                gateway.base_url + "/openai/v1/chat/completions",
                headers={**_auth(GATEWAY_KEY), "last-event-id": event_id},
                json=chat,
                timeout=10,
            )
        )
        for event_id in (last_id, unknown + last_id[32:])
    ]
    assert answers[0] == answers[1] and answers[0][0] == 404
    own = httpx.post(
        gateway.base_url + "/anthropic/v1/messages",
        headers={"x-api-key": GATEWAY_KEY, "last-event-id": last_id},
        json=_messages_body("M"),
        timeout=10,
    )
    assert own.status_code == 200
    assert decode(head + own.content, "anthropic_messages").text == _text("M")


# -- tenants in the config -------------------------------------------------------------------


def test_every_listed_client_key_is_accepted_and_others_are_refused(
    gateways: Callable[..., AppThread], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_A_KEY", TEAM_A)
    config = load_config(
        json.dumps(
            {
                "upstreams": {"chat": {"dialect": "openai_chat", "base_url": "http://up/v1"}},
                "api_key": GATEWAY_KEY,
                "clients": {"team-a": {"api_key_env": "TEAM_A_KEY"}, "team-b": {"api_key": TEAM_B}},
            }
        ).encode()
    )
    assert config.clients == {
        "team-a": Client(api_key_env="TEAM_A_KEY"),
        "team-b": Client(api_key=TEAM_B),
    }
    tenants = config.tenants()
    assert [tenants.identify(k) for k in (GATEWAY_KEY, TEAM_A, TEAM_B, "nope", None)] == [
        "default",
        "team-a",
        "team-b",
        None,
        None,
    ]
    assert {TEAM_A, TEAM_B, GATEWAY_KEY} <= set(config.secrets())
    gateway = gateways(
        api_key=GATEWAY_KEY,
        clients={"team-a": Client(api_key_env="TEAM_A_KEY"), "team-b": Client(api_key=TEAM_B)},
    )
    for key in (GATEWAY_KEY, TEAM_A, TEAM_B):
        sdk = openai.OpenAI(base_url=gateway.base_url + "/openai/v1", api_key=key, max_retries=0)
        reply = sdk.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "K"}], timeout=10
        )
        assert reply.choices[0].message.content == _text("K")
    sdk = openai.OpenAI(base_url=gateway.base_url + "/openai/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "K"}])


@pytest.mark.parametrize(
    ("api_key", "clients", "environ", "message"),
    [
        (None, {"a": Client(api_key_env="NOT_SET")}, {}, "environment variable NOT_SET"),
        (None, {"a": Client()}, {}, "client 'a' has no key: it has no api_key or api_key_env"),
        ("same", {"a": Client(api_key="same")}, {}, "clients 'default' and 'a' have the same key"),
        ("k", {"default": Client(api_key="x")}, {}, "client 'default' is the tenant of api_key"),
        (None, {"anonymous": Client(api_key="x")}, {}, "client 'anonymous': the name is"),
    ],
)
def test_a_client_config_that_cannot_name_a_tenant_is_refused(
    api_key: str | None, clients: dict[str, Client], environ: dict[str, str], message: str
) -> None:
    config = GatewayConfig(
        upstreams={"chat": Upstream(name="chat", dialect="openai_chat")},
        api_key=api_key,
        clients=clients,
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        config.tenants(environ)
    if not environ:
        with pytest.raises(ValueError, match=re.escape(message)):
            create_gateway(config)


def test_an_open_gateway_warns_at_start_and_shares_one_tenant(
    gateways: Callable[..., AppThread], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="polystream.gateway"):
        gateway = gateways(api_key=None)
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "no client key is configured: the gateway is open to any client, and all streams "
        "belong to one anonymous tenant (any client can resume any stream whose id it has)"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="polystream.gateway"):
        gateways()
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
    # Any client (with any key or none) resumes any stream.
    head, headers = _head(gateway, "/openai/v1/responses", "whatever", _responses_body("O"))
    tail = httpx.get(
        gateway.base_url + f"/openai/v1/responses/{headers['x-polystream-stream-id']}",
        params={"stream": "true", "starting_after": str(_last_sequence(head))},
        timeout=10,
    )
    assert tail.status_code == 200
    assert decode(head + tail.content, "openai_responses").text == _text("O")


# -- a resume whose client leaves --------------------------------------------------------------


def test_a_resume_whose_client_leaves_frees_its_slot_while_the_stream_runs(
    stack: Callable[..., Any],
) -> None:
    stream = secrets.token_hex(16)
    journal = MemoryJournal()
    journal.create(stream, {"dialect": "anthropic_messages", "tenant": "default"})
    journal.append(
        stream,
        [(f"{stream}.{n}", b"id: %s.%d\ndata: {}\n\n" % (stream.encode(), n)) for n in (1, 2)],
    )
    # (Never finished: a resume follows it until its idle timeout, 120 s.)
    _, gateway = stack("openai_chat", [], journal=journal)
    app = gateway.app
    with httpx.stream(
        "POST",
        gateway.base_url + "/anthropic/v1/messages",
        headers={"x-api-key": GATEWAY_KEY, "last-event-id": f"{stream}.1"},
        json=_messages_body("x"),
        timeout=10,
    ) as response:
        assert response.status_code == 200
        chunks = response.iter_raw()
        first = next(chunks)
        assert first == b"id: %s.2\ndata: {}\n\n" % stream.encode()
        assert app.active == 1
    left = time.monotonic()
    while app.active and time.monotonic() - left < 10.0:
        time.sleep(0.01)
    assert app.active == 0
    # Freed as the client leaves, not at the resume's idle timeout (120 s); the bound
    # leaves room for a loaded machine.
    assert time.monotonic() - left < 10.0
    # The stream itself goes on, and can be resumed again.
    journal.append(stream, [(f"{stream}.3", b"id: %s.3\ndata: {}\n\n" % stream.encode())])
    journal.finish(stream)
    again = httpx.post(
        gateway.base_url + "/anthropic/v1/messages",
        headers={"x-api-key": GATEWAY_KEY, "last-event-id": f"{stream}.2"},
        json=_messages_body("x"),
        timeout=10,
    )
    assert again.content == b"id: %s.3\ndata: {}\n\n" % stream.encode()
    # (The slot is given back as the handler returns, which may be just after the
    # client has read the whole body.)
    done = time.monotonic()
    while app.active and time.monotonic() - done < 10.0:
        time.sleep(0.01)
    assert app.active == 0


def test_the_command_refuses_a_client_without_its_key_and_serves_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import polystream.server._h1server as h1server
    from polystream.cli import main

    served: list[Any] = []
    monkeypatch.setattr(h1server, "run", lambda app, **kw: served.append(app))
    monkeypatch.setattr("polystream.cli._heap.settle_heap", lambda: None)
    monkeypatch.delenv("TEAM_A_KEY", raising=False)
    config = tmp_path / "gateway.json"
    config.write_text(
        json.dumps(
            {
                "upstreams": {"chat": {"dialect": "openai_chat", "base_url": "http://up/v1"}},
                "clients": {"team-a": {"api_key_env": "TEAM_A_KEY"}, "team-b": {"api_key": TEAM_B}},
            }
        )
    )
    command = ["gateway", "--config", str(config), "--listen", "127.0.0.1:0"]
    assert main(command) == 2
    assert capsys.readouterr().err == (
        "polystream: error: client 'team-a' has no key: environment variable TEAM_A_KEY "
        "is unset or empty\n"
    )
    assert served == []
    monkeypatch.setenv("TEAM_A_KEY", TEAM_A)
    assert main([*command, "--api-key", GATEWAY_KEY]) == 0
    (app,) = served
    assert [app.tenants.identify(k) for k in (TEAM_A, TEAM_B, GATEWAY_KEY, "x")] == [
        "team-a",
        "team-b",
        "default",
        None,
    ]
