"""Gemini Live resumption as properties: whatever the interleaving of the client's
messages and the server's ``sessionResumptionUpdate`` messages, and wherever the
connection drops, nothing is lost and nothing is sent twice.

* Sans-I/O, against a model of the service (it reads the client's messages one by one,
  makes an update when drawn, keeps the session's state per handle): the messages sent
  again on a new connection are exactly those the resumed handle does not include (with
  ``transparent``: those after its ``lastConsumedClientMessageIndex``; without: those
  sent since the client read it), in order; an update that is not resumable never
  replaces the handle; the socket is replaced only once the old one is closed.
* Sans-I/O, the client against the emulator's server (:class:`SocketEmulation`) under
  drawn interleavings of turns, deliveries and drops: the emulator's conversation holds
  each turn once, in order, with its reply.
* Over loopback, the client through a proxy to the emulator that drops the connection
  at every message boundary of a conversation in turn.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections import Counter, deque
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from polystream.dialects.gemini_live.resumption import ResumptionContext
from polystream.errors import SocketClosed
from polystream.events import Finish, Resumption, SessionUpdate, TextDelta
from polystream.realtime import AsyncConnection, Routed, SocketLink, connect
from polystream.retry import RetryPolicy
from polystream.scenario import Emulator, parse_scenarios
from polystream.scenario._sockets import SocketEmulation
from polystream.server import ServerThread
from tests.realtime_client.loopback import Loopback, Peer

MODEL = "gemini-live-2.5-flash-preview"
PATIENT = RetryPolicy(max_retries=1_000_000, initial_delay=0.0, jitter=0.0)
"""Reconnect at once, however often (the drops are drawn)."""
TEXT = {"responseModalities": ["TEXT"]}

Message = str | bytes


def opened(link: SocketLink) -> list[Message]:
    """Open a socket: the replay, then the queue, as the shells write them."""
    out = list(link.connected())
    while (message := link.next_queued()) is not None:
        link.sent(message)
        out.append(message)
    return out


def text_of(message: Message) -> str:
    """The text of a ``clientContent`` written by ``send_text``."""
    text: str = json.loads(message)["clientContent"]["turns"][0]["parts"][0]["text"]
    return text


def reply_to(text: str) -> str:
    """The emulator's default reply."""
    return f"Emulated reply from {MODEL}. You said: {text}"


def record(link: SocketLink) -> ResumptionContext:
    assert isinstance(link.context, ResumptionContext)
    return link.context


def handle_of(message: Message) -> str | None:
    handle: str | None = json.loads(message)["setup"].get("sessionResumption", {}).get("handle")
    return handle


# -- the client's bookkeeping against a model of the service -----------------------------


class ModelTrial:
    """A client (:class:`SocketLink`) and a model of the service, moved step by step.

    The service reads the client's messages in order, one per ``consume``; it makes a
    ``sessionResumptionUpdate`` when told (resumable: a new handle that keeps the
    session's state as it stands, with ``transparent`` the index of the last message
    read on the connection, left out when 0 if ``omit_zero``, as proto3 JSON leaves out
    a zero); a setup naming a handle restores that handle's state. A drop loses what is
    in flight both ways, after the service read the first ``k`` messages in flight.
    """

    def __init__(self, *, transparent: bool, omit_zero: bool) -> None:
        self.transparent = transparent
        self.omit_zero = omit_zero
        self.link = SocketLink("gemini_live", model=MODEL, reconnect=PATIENT, rng=lambda: 0.0)
        self.snapshots: dict[str, list[str]] = {}
        self.state: list[str] = []  # the session's conversation, as read
        self.count = -1  # the index of the last message read on the connection
        self.ready = False  # the connection's setup was read
        self.open = True  # the service's side of the current socket
        self.to_server: deque[Message] = deque()
        self.to_client: deque[tuple[dict[str, Any], str | None, int]] = deque()
        self.sent: list[str] = []  # the texts, each once, in the order first sent
        self.handle: str | None = None  # the last resumable handle the client read
        self.since: list[str] = []  # the texts first sent since the client read it
        self.exposed: set[str] = set()  # texts a non-transparent resumption may lose
        self.over = False
        self.serial = 0
        self.link.admit(self.link.session.configure(resumption=True, transparent=transparent))
        self.to_server.extend(opened(self.link))

    # -- the client ----------------------------------------------------------------------

    def send(self) -> None:
        text = f"m{len(self.sent)}"
        self.sent.append(text)
        self.since.append(text)
        if any(handle is not None for _, handle, _ in self.to_client):
            self.exposed.add(text)  # (sent while the update that clears it is on its way)
        for message in self.link.admit(self.link.session.send_text(text, turn_complete=False)):
            self.link.sent(message)
            self.to_server.append(message)

    def deliver(self) -> None:
        if not self.to_client:
            return
        payload, handle, k = self.to_client.popleft()
        self.link.incoming(json.dumps(payload))
        if handle is not None:
            self.handle = handle
            self.since = []
        assert record(self.link).handle == self.handle  # (never one that is not resumable)
        if "goAway" in payload:
            assert self.link.renew is (self.handle is not None)
            if self.link.renew:
                # Replaced only once closed: nothing is written before renewal().
                assert self.link.state == "open"
                self.drop(k, renewal=True)

    # -- the service ---------------------------------------------------------------------

    def consume(self) -> None:
        if not self.to_server:
            return
        message = json.loads(self.to_server.popleft())
        if "setup" in message:
            assert not self.ready and self.open
            handle = message["setup"].get("sessionResumption", {}).get("handle")
            if handle is not None:
                self.state = list(self.snapshots[handle])
            self.count = 0
            self.ready = True
            return
        assert self.ready
        self.count += 1
        self.state.append(message["clientContent"]["turns"][0]["parts"][0]["text"])
        assert len(set(self.state)) == len(self.state)  # nothing read twice

    def update(self, kind: int) -> None:
        """``kind`` 0: resumable; 1: not, no handle; 2: not, with a handle anyway."""
        if not self.ready:
            return
        self.serial += 1
        body: dict[str, Any] = {"resumable": kind == 0}
        handle = None
        if kind == 0:
            handle = body["newHandle"] = f"h{self.serial}"
            self.snapshots[handle] = list(self.state)
            self.exposed.update(text_of(m) for m in self.to_server)  # (in flight, unread)
        else:
            body["newHandle"] = f"x{self.serial}" if kind == 2 else ""
        if self.transparent and not (self.omit_zero and self.count == 0):
            body["lastConsumedClientMessageIndex"] = str(self.count)
        self.to_client.append(({"sessionResumptionUpdate": body}, handle, 0))

    def go_away(self, k: int) -> None:
        if self.ready:
            self.to_client.append(({"goAway": {"timeLeft": "10s"}}, None, k))

    def drop(self, k: int, *, renewal: bool = False) -> None:
        """The socket ends (closed by the client to renew it, or dropped) after the
        service read the first ``k`` messages in flight."""
        for _ in range(k):
            self.consume()
        self.to_server.clear()
        self.to_client.clear()
        self.ready, self.open, self.count = False, False, -1
        drop = self.link.renewal() if renewal else self.link.dropped(1006)
        if self.handle is None:  # nothing to resume with
            assert drop.delay is None and isinstance(drop.error, SocketClosed)
            self.over = True
            return
        assert drop.delay == 0.0 and drop.error is None
        assert self.link.state == "reconnecting"
        self.open = True
        replay = opened(self.link)
        assert handle_of(replay[0]) == self.handle
        resent = [text_of(m) for m in replay[1:]]
        kept = self.snapshots[self.handle]
        if self.transparent:
            # Exactly what the handle does not include, in order.
            assert kept == self.sent[: len(kept)]
            assert resent == self.sent[len(kept) :]
        else:
            # What was sent since the handle was read; none of it is in the handle.
            assert resent == self.since
            assert not set(resent) & set(kept)
        self.to_server.extend(replay)

    def settle(self) -> None:
        """The end: the service reads all that is in flight."""
        while self.to_server and not self.over:
            self.consume()
        assert self.state == [text for text in self.sent if text in self.state]  # in order
        if self.transparent and not self.over:
            assert self.state == self.sent  # nothing lost
        elif not self.over:
            # Without transparency only a message in flight while the service made a
            # resumable update (sent before the client read it) can be lost.
            assert {text for text in self.sent if text not in self.state} <= self.exposed


STEPS = st.lists(
    st.tuples(
        # (drops as one step in 14, so that most trials get a handle first)
        st.sampled_from(
            ["send"] * 3
            + ["consume"] * 2
            + ["deliver"] * 3
            + ["update"] * 2
            + ["update_not", "update_junk", "drop", "go_away"]
        ),
        st.integers(0, 3),
    ),
    min_size=20,
    max_size=60,
)


def plan(text: str) -> list[tuple[str, int]]:
    """Steps written ``name`` or ``name:arg`` (``drop:1``), space separated."""
    return [(name, int(arg or 0)) for name, _, arg in (s.partition(":") for s in text.split())]


@settings(max_examples=400)
@given(steps=STEPS, transparent=st.booleans(), omit_zero=st.booleans())
# A message sent before the update that follows the setup (its index 0 left out).
@example(plan("send consume update deliver drop"), True, True)
# A handle made after a message was read, that never reached the client.
@example(plan("consume update deliver send consume update drop"), True, False)
# A goAway: the socket closed (the service reads what was in flight), then replaced.
@example(plan("consume update deliver send go_away:1 deliver"), True, False)
# Without transparency: a message in flight when the update was made is lost.
@example(plan("consume send update deliver drop"), False, False)
def test_resumption_resends_exactly_what_the_handle_lacks(
    steps: list[tuple[str, int]], transparent: bool, omit_zero: bool
) -> None:
    trial = ModelTrial(transparent=transparent, omit_zero=omit_zero)
    for name, arg in steps:
        if trial.over:
            break
        if name == "send":
            trial.send()
        elif name == "consume":
            trial.consume()
        elif name == "deliver":
            trial.deliver()
        elif name.startswith("update"):
            trial.update(["update", "update_not", "update_junk"].index(name))
        elif name == "go_away":
            trial.go_away(arg)
        else:
            trial.drop(arg)
    trial.settle()


def test_a_transparent_update_without_an_index_keeps_what_followed_the_setup() -> None:
    # The update that follows setupComplete consumed only the setup (index 0): proto3
    # JSON leaves the zero out. The message sent before it arrived is not in the handle.
    link = SocketLink("gemini_live", model=MODEL, reconnect=PATIENT, rng=lambda: 0.0)
    link.admit(link.session.configure(resumption=True, transparent=True))
    opened(link)
    (hello,) = link.admit(link.session.send_text("Hello"))
    link.sent(hello)
    link.incoming(json.dumps({"sessionResumptionUpdate": {"newHandle": "h1", "resumable": True}}))
    link.dropped(1006)
    replay = opened(link)
    assert handle_of(replay[0]) == "h1" and replay[1:] == [hello]


def test_without_transparency_an_update_covers_what_was_sent_before_it() -> None:
    link = SocketLink("gemini_live", model=MODEL, reconnect=PATIENT, rng=lambda: 0.0)
    link.admit(link.session.configure(resumption=True))
    opened(link)
    (hello,) = link.admit(link.session.send_text("Hello"))
    link.sent(hello)
    link.incoming(json.dumps({"sessionResumptionUpdate": {"newHandle": "h1", "resumable": True}}))
    link.dropped(1006)
    assert opened(link)[1:] == []


# -- the client against the emulator's server, sans-I/O ------------------------------------


class EmulatedTrial:
    """A client (:class:`SocketLink`) and the emulator's server, moved step by step:
    turns said, messages read by either side, drops (after the server read the first
    ``k`` messages in flight)."""

    def __init__(self) -> None:
        self.emulator = Emulator(parse_scenarios([]))
        self.link = SocketLink("gemini_live", model=MODEL, reconnect=PATIENT, rng=lambda: 0.0)
        configure = self.link.session.configure(
            generationConfig=TEXT, resumption=True, transparent=True
        )
        self.link.admit(configure)
        self.live = self._socket()
        self.to_server: deque[Message] = deque(opened(self.link))
        self.to_client: deque[Message] = deque()
        self.turns: list[str] = []
        self.session_id: str | None = None
        self.texts: dict[int, list[str]] = {}  # each running reply's text, by stream
        self.completed: list[str] = []  # the turns whose reply completed, in order
        self.undone: set[int] = set()  # those (by position) whose turn was asked again
        self.over = False

    def _socket(self) -> SocketEmulation:
        live = SocketEmulation(self.emulator, "gemini_live", created=1_000)
        live.start(0.0)
        return live

    def _read(self, routed: list[Routed]) -> None:
        for r in routed:
            event = r.event
            if type(event) is SessionUpdate:
                assert self.session_id in (None, event.id)  # always the one session
                self.session_id = event.id
            elif type(event) is TextDelta:
                self.texts.setdefault(r.stream, []).append(event.delta)
            elif type(event) is Finish:
                text = "".join(self.texts.pop(r.stream, []))
                if event.status == "completed":
                    said = text.removeprefix(reply_to(""))
                    assert text == reply_to(said)
                    self.completed.append(said)

    def say(self) -> None:
        text = f"turn {len(self.turns)}"
        self.turns.append(text)
        for message in self.link.admit(self.link.session.send_text(text)):
            self.link.sent(message)
            self.to_server.append(message)

    def consume(self) -> list[Message]:
        if not self.to_server:
            return []
        self.live.receive(self.to_server.popleft(), 0.0)
        sends = self.live.due(0.0)
        assert all(send.text is not None for send in sends)  # (no close)
        return [send.text for send in sends if send.text is not None]

    def deliver(self) -> None:
        if self.to_client:
            self._read(self.link.incoming(self.to_client.popleft()))

    def drop(self, k: int) -> None:
        for _ in range(k):
            self.consume()  # (what it answers is lost)
        self.live.end()
        self.to_server.clear()
        self.to_client.clear()
        drop = self.link.dropped(1006)
        self._read(drop.events)
        if record(self.link).handle is None:
            assert drop.delay is None and isinstance(drop.error, SocketClosed)
            self.over = True
            return
        self.live = self._socket()
        replay = opened(self.link)
        for message in replay[1:]:
            # A turn whose reply the client read, that the handle does not include, is
            # asked (and answered) again: that reply is not the session's.
            said = text_of(message)
            read = [i for i, text in enumerate(self.completed) if text == said]
            if read and read[-1] not in self.undone:
                self.undone.add(read[-1])
        self.to_server.extend(replay)

    @property
    def again(self) -> Counter[str]:
        """The turns asked again after their reply was read: how many times."""
        return Counter(self.completed[i] for i in self.undone)

    def settle(self) -> None:
        while not self.over and (self.to_server or self.to_client):
            self.to_client.extend(self.consume())
            self.deliver()
        if self.over:
            return
        assert self.session_id is not None
        history = self.emulator.socket_state("gemini_live")["sessions"][self.session_id]["history"]
        expected: list[dict[str, Any]] = []
        for text in self.turns:
            expected.append({"role": "user", "parts": [{"text": text}]})
            expected.append({"role": "model", "parts": [{"text": reply_to(text)}]})
        assert history == expected  # each turn once, in order, with its reply
        # Each reply read once, but for those read before a drop whose handle did not
        # include their turn (asked again, so answered again).
        assert Counter(self.completed) == Counter(self.turns) + self.again
        kept = [said for i, said in enumerate(self.completed) if i not in self.undone]
        assert kept == self.turns


EMULATED_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["say"] * 2 + ["consume"] * 3 + ["deliver"] * 4 + ["drop"]),
        st.integers(0, 3),
    ),
    min_size=20,
    max_size=40,
)


@settings(max_examples=150)
@given(steps=EMULATED_STEPS)
def test_against_the_emulator_each_turn_is_kept_once(steps: list[tuple[str, int]]) -> None:
    trial = EmulatedTrial()
    for name, arg in steps:
        if trial.over:
            break
        if name == "say":
            trial.say()
        elif name == "consume":
            trial.to_client.extend(trial.consume())
        elif name == "deliver":
            trial.deliver()
        else:
            trial.drop(arg)
    trial.settle()


def test_a_drop_between_a_turn_complete_and_its_update_answers_the_turn_again() -> None:
    trial = EmulatedTrial()
    trial.to_client.extend(trial.consume())  # (the setup)
    trial.deliver()
    trial.deliver()
    trial.say()
    trial.to_client.extend(trial.consume())
    while "sessionResumptionUpdate" not in str(trial.to_client[0]):
        trial.deliver()
    trial.drop(0)
    assert trial.again == Counter({"turn 0": 1})
    trial.settle()  # (the emulator's conversation has the turn once)
    assert trial.completed == ["turn 0", "turn 0"]


def test_the_emulator_resumes_the_state_of_the_handle_named() -> None:
    # The turn's reply and its handle were made, the update never reached the client:
    # it resumes with the handle before the turn and sends the turn again.
    emulator = Emulator(parse_scenarios([]))
    setup = {"model": f"models/{MODEL}", "generationConfig": TEXT}
    first = SocketEmulation(emulator, "gemini_live", created=1_000)
    first.start(0.0)
    first.receive(json.dumps({"setup": {**setup, "sessionResumption": {"transparent": True}}}), 0)
    complete, update = (json.loads(s.text or "") for s in first.due(0.0))
    before = update["sessionResumptionUpdate"]
    assert before["lastConsumedClientMessageIndex"] == "0"
    hi = [{"role": "user", "parts": [{"text": "Hi"}]}]
    turn = {"clientContent": {"turns": hi, "turnComplete": True}}
    first.receive(json.dumps(turn), 0.0)
    first.due(0.0)
    first.end()
    second = SocketEmulation(emulator, "gemini_live", created=1_000)
    second.start(0.0)
    resumed = {"transparent": True, "handle": before["newHandle"]}
    second.receive(json.dumps({"setup": {**setup, "sessionResumption": resumed}}), 0.0)
    second.receive(json.dumps(turn), 0.0)
    second.due(0.0)
    sessions = emulator.socket_state("gemini_live")["sessions"]
    assert sessions[complete["setupComplete"]["sessionId"]]["history"] == [
        {"role": "user", "parts": [{"text": "Hi"}]},
        {"role": "model", "parts": [{"text": reply_to("Hi")}]},
    ]


def test_the_audio_a_handle_includes_is_resumed_with_it() -> None:
    # The audio read while a reply ran is in the handle made at the reply's end (its
    # lastConsumedClientMessageIndex counts it): the client does not send it again.
    emulator = Emulator(parse_scenarios([]))
    setup = {
        "model": f"models/{MODEL}",
        "generationConfig": TEXT,
        "inputAudioTranscription": {},
        "sessionResumption": {"transparent": True},
    }
    first = SocketEmulation(emulator, "gemini_live", created=1_000)
    first.start(0.0)
    first.receive(json.dumps({"setup": setup}), 0.0)
    first.due(0.0)
    first.receive(json.dumps({"realtimeInput": {"text": "Hi"}}), 0.0)
    second = base64.b64encode(b"\x00\x00" * 16000).decode()  # 1 s at 16 kHz
    audio = {"realtimeInput": {"audio": {"data": second, "mimeType": "audio/pcm;rate=16000"}}}
    first.receive(json.dumps(audio), 0.0)  # (while the reply runs)
    *_, update = (json.loads(s.text or "") for s in first.due(0.0))
    assert update["sessionResumptionUpdate"]["lastConsumedClientMessageIndex"] == "2"
    first.end()
    resumed = SocketEmulation(emulator, "gemini_live", created=1_000)
    resumed.start(0.0)
    handle = update["sessionResumptionUpdate"]["newHandle"]
    resumption = {"transparent": True, "handle": handle}
    resumed.receive(json.dumps({"setup": {**setup, "sessionResumption": resumption}}), 0.0)
    resumed.receive(json.dumps({"realtimeInput": {"audioStreamEnd": True}}), 0.0)
    sent = [json.loads(s.text or "") for s in resumed.due(0.0)]
    assert [list(message) for message in sent[:2]] == [
        ["setupComplete"],
        ["sessionResumptionUpdate"],
    ]
    assert sent[2] == {
        "serverContent": {
            "inputTranscription": {
                "text": "Emulated transcript of 1.00 s of audio.",
                "finished": True,
            }
        }
    }


def test_the_emulator_refuses_to_resume_a_session_still_open() -> None:
    emulator = Emulator(parse_scenarios([]))
    setup = {"model": f"models/{MODEL}", "generationConfig": TEXT, "sessionResumption": {}}
    first = SocketEmulation(emulator, "gemini_live", created=1_000)
    first.start(0.0)
    first.receive(json.dumps({"setup": setup}), 0.0)
    _, update = (json.loads(s.text or "") for s in first.due(0.0))
    handle = update["sessionResumptionUpdate"]["newHandle"]
    resumed = {"setup": {**setup, "sessionResumption": {"handle": handle}}}
    early = SocketEmulation(emulator, "gemini_live", created=1_000)
    early.start(0.0)
    early.receive(json.dumps(resumed), 0.0)
    refused = early.due(0.0)
    assert [(s.close, s.reason) for s in refused] == [
        (1011, "The session is still open on another connection.")
    ]
    first.end()
    late = SocketEmulation(emulator, "gemini_live", created=1_000)
    late.start(0.0)
    late.receive(json.dumps(resumed), 0.0)
    assert [list(json.loads(s.text or "")) for s in late.due(0.0)] == [
        ["setupComplete"],
        ["sessionResumptionUpdate"],
    ]


# -- over loopback: dropped at every message boundary --------------------------------------


TURNS = ("one", "two", "three")
SCENARIOS = [
    {"match": {"contains": turn}, "reply": {"text": ["Reply", f" {turn}"]}} for turn in TURNS
]


class DroppingProxy:
    """Carries a connection's messages between the client and the emulator, both ways;
    with :attr:`drop_at` ``n`` set, the next connection ends when its message ``n + 1``
    (counted both ways) arrives: the emulator's socket is closed (and the emulator has
    let the session go), then the client's is cut (no close frame: 1006)."""

    def __init__(self, server: ServerThread) -> None:
        self.server = server
        self.drop_at: int | None = None
        self.trace: list[tuple[str, str]] = []  # the messages carried: (way, first key)

    @property
    def open_sessions(self) -> dict[str, Any]:
        emulator: Emulator = self.server.app.state.emulator
        sessions: dict[str, Any] = emulator.socket_state("gemini_live").setdefault("open", {})
        return sessions

    async def __call__(self, peer: Peer) -> None:
        drop_at, self.drop_at = self.drop_at, None
        url = self.server.base_url.replace("http://", "ws://") + peer.path
        headers = {k: v for k, v in peer.headers.items() if k in ("x-goog-api-key",)}
        async with ws_connect(url, additional_headers=headers, ping_interval=None) as upstream:
            carried = 0
            cut = asyncio.Event()

            async def carry(way: str, source: Any, target: Any) -> None:
                nonlocal carried
                try:
                    async for message in source:
                        if drop_at is not None and carried == drop_at:
                            cut.set()
                            return
                        carried += 1
                        self.trace.append((way, next(iter(json.loads(message)))))
                        await target.send(message)
                except ConnectionClosed:
                    pass
                cut.set()

            tasks = [
                asyncio.create_task(carry("up", peer.ws, upstream)),
                asyncio.create_task(carry("down", upstream, peer.ws)),
            ]
            await cut.wait()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if drop_at is None:
                await peer.ws.close()
                return
            await upstream.close()
            deadline = time.monotonic() + 5.0
            while self.open_sessions and time.monotonic() < deadline:
                await asyncio.sleep(0.001)  # (the emulator's thread ends the session)
            peer.ws.transport.abort()


@pytest.fixture(scope="module")
def proxy() -> Iterator[tuple[DroppingProxy, Loopback]]:
    with ServerThread(Emulator(parse_scenarios(SCENARIOS))) as server:
        dropping = DroppingProxy(server)
        with Loopback(*[dropping] * 200) as loopback:
            yield dropping, loopback


async def converse(conn: AsyncConnection) -> tuple[list[str], str | None]:
    """Configure, then say each turn, each time reading until the turn's reply
    completed and an update says the handle includes every message sent: the replies
    completed, in order, and the session id."""
    completed: list[str] = []
    texts: dict[int, list[str]] = {}
    session_id: str | None = None
    context = record(conn.link)

    async def settle(replied: bool) -> None:
        nonlocal session_id
        async for routed in conn:
            event = routed.event
            if type(event) is SessionUpdate:
                session_id = event.id
            elif type(event) is TextDelta:
                texts.setdefault(routed.stream, []).append(event.delta)
            elif type(event) is Finish:
                text = "".join(texts.pop(routed.stream, []))
                if event.status == "completed":
                    completed.append(text)
                    replied = True
            elif type(event) is Resumption and replied and not context.pending:
                return

    await conn.configure(generationConfig=TEXT, resumption=True, transparent=True)
    await settle(True)
    for turn in TURNS:
        await conn.send_text(turn)
        await settle(False)
    return completed, session_id


def run(loopback: Loopback) -> tuple[list[str], str | None, int]:
    async def main() -> tuple[list[str], str | None, int]:
        async with connect(
            "gemini_live",
            model=MODEL,
            api_key="k",
            base_url=f"http://127.0.0.1:{loopback.port}/gemini",
            reconnect=RetryPolicy(max_retries=3, initial_delay=0.0, jitter=0.0),
            idle_timeout=5,
        ) as conn:
            completed, session_id = await converse(conn)
        return completed, session_id, conn.link.connections

    return asyncio.run(main())


def test_a_drop_at_every_message_boundary_loses_nothing_and_repeats_nothing(
    proxy: tuple[DroppingProxy, Loopback],
) -> None:
    dropping, loopback = proxy
    emulator: Emulator = dropping.server.app.state.emulator
    sessions = emulator.socket_state("gemini_live").setdefault("sessions", {})
    replies = [f"Reply {turn}" for turn in TURNS]
    history = []
    for turn, reply in zip(TURNS, replies, strict=True):
        history += [
            {"role": "user", "parts": [{"text": turn}]},
            {"role": "model", "parts": [{"text": reply}]},
        ]

    # Without a drop: the conversation's messages, both ways, in order.
    dropping.trace = []
    completed, session_id, connections = run(loopback)
    assert (completed, connections) == (replies, 1)
    assert sessions[session_id]["history"] == history
    trace = dropping.trace
    per_turn = [
        ("up", "clientContent"),
        ("down", "serverContent"),  # "Reply"
        ("down", "serverContent"),  # " one"
        ("down", "serverContent"),  # generationComplete
        ("down", "serverContent"),  # turnComplete
        ("down", "sessionResumptionUpdate"),
    ]
    opening = [("up", "setup"), ("down", "setupComplete"), ("down", "sessionResumptionUpdate")]
    assert trace == opening + per_turn * len(TURNS)

    for n in range(len(trace)):
        dropping.drop_at = n
        if n < len(opening):  # no handle yet: nothing to resume with
            with pytest.raises(SocketClosed) as caught:
                run(loopback)
            assert caught.value.code == 1006
            continue
        completed, session_id, connections = run(loopback)
        assert connections == 2, n
        assert sessions[session_id]["history"] == history, n  # each turn once, in order
        # Each reply read once; but a drop after a turnComplete, before the update that
        # follows it, resumes with the handle before the turn: the turn is asked again,
        # and its reply read again.
        expected = list(replies)
        which, at = divmod(n - len(opening), len(per_turn))
        if at == len(per_turn) - 1:
            expected.insert(which, replies[which])
        assert completed == expected, n
