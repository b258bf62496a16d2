"""A realtime client of one family served by an upstream of another, sans-I/O.

The client's side is the client family's own server (what the emulator runs), made a
bridge's side (:meth:`~polystream.dialects._realtime.server.SocketServer.bridge`): it
answers the client as the provider would (its session, its conversation's items, its
errors), detects no voice activity of its own, and says what the client asked as
intents. The upstream's side is the upstream family's session: each intent becomes its
messages (:meth:`~polystream.dialects._realtime.session.RealtimeSession.perform`), and
its replies, read as unified events, are fed to the client side's reply runs, which
write them in the client's family. The upstream's voice activity reaches the client as
its own (``speech_started``, ``speech_stopped``), and a reply the upstream begins by
itself (its turn detection answering the user) becomes one of the client side's.

Audio is converted where the two sides' formats differ (rates through soxr, G.711 and
PCM): the client's input to the upstream's, the upstream's output to the client's.

What the upstream's family cannot carry (an image to a family without image input, an
out-of-band reply, a line said verbatim) is refused with an ``error`` in the client's
family, naming what and why: never dropped silently.

The shell (the gateway) only moves messages: :meth:`Bridge.client` for each client
message, :meth:`Bridge.upstream` for each upstream message, each returning a
:class:`Step` (the messages to send each way, in order).
"""

from __future__ import annotations

import base64
from collections import OrderedDict, deque
from typing import Final

import msgspec

from polystream.audio.convert import AudioConverter, convert
from polystream.audio.formats import AudioFormat
from polystream.dialects._realtime.intents import (
    AddMessage,
    Cancel,
    CommitAudio,
    Configure,
    DeleteItem,
    InputAudio,
    Intent,
    Respond,
    ToolOutput,
    Truncate,
)
from polystream.dialects._realtime.server import (
    Close,
    EventFeed,
    Outbound,
    Refusal,
    ReplyRun,
    Script,
    Turn,
)
from polystream.dialects._sockets import SOCKET_SPECS, open_server, open_session
from polystream.errors import LocalProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    Speech,
    StreamStart,
    Usage,
    UsageUpdate,
)

__all__ = ["Bridge", "Step", "bridge_refusal"]

_KEPT_REPLIES: Final = 64
"""Replies remembered after they end (to find an item a client truncates or deletes)."""


def bridge_refusal(client: str, upstream: str) -> str | None:
    """Why a client of the WebSocket family ``client`` cannot be bridged to an upstream
    of ``upstream`` (None: it can)."""
    for name in (client, upstream):
        spec = SOCKET_SPECS.get(name)
        if spec is None or not spec.bridge:
            return f"{name} conversations cannot be translated to or from another family"
    return None


class Step(msgspec.Struct, kw_only=True, gc=False):
    """What one message (or the start, or the end) gives: the messages to send the
    client and the upstream, in order (JSON texts, or bytes), and whether the client's
    connection is then closed."""

    client: list[str | bytes] = msgspec.field(default_factory=list)
    upstream: list[str | bytes] = msgspec.field(default_factory=list)
    close: tuple[int, str] | None = None
    """The client's connection is then closed with this code and reason (a family
    that reports its errors as close codes)."""


class _Reply:
    """One reply: the upstream's stream and the client side's run that writes it."""

    __slots__ = (
        "audio",
        "cancelled",
        "converter",
        "dropped",
        "feed",
        "items",
        "run",
        "stream",
        "text_only",
        "tools",
        "upstream_id",
        "usage",
    )

    def __init__(self) -> None:
        self.feed = EventFeed()
        self.run: ReplyRun | None = None
        self.stream = 0  # the upstream's stream (0: not begun yet)
        self.upstream_id: str | None = None
        self.cancelled = False  # the client cancelled it (sent upstream once its id is known)
        self.items: dict[int, str] = {}  # block index -> the upstream's item id
        self.audio: set[int] = set()  # its audio blocks
        self.converter: AudioConverter | None = None
        self.text_only = False  # the client asked for text: audio dropped, transcripts text
        self.dropped: set[int] = set()  # its audio blocks left out
        self.tools: set[int] = set()  # its tool call blocks
        self.usage: Usage | None = None  # the last usage the upstream stated


class Bridge:
    """One client connection of family ``client`` served by a session of family
    ``upstream`` (see the module docstring).

    Args:
        client: The client's family.
        upstream: The upstream's family.
        model: The model the client named (what its session states).
        upstream_model: The model asked of the upstream (default: ``model``), for a
            family whose session names it (one whose URL does not).
        created: The connection's Unix time.
        seed: What the client side's ids derive from.

    Raises:
        LocalProtocolError: A family cannot be bridged.
    """

    def __init__(
        self,
        client: str,
        upstream: str,
        *,
        model: str,
        upstream_model: str | None = None,
        created: int = 0,
        seed: str = "bridge",
    ) -> None:
        refusal = bridge_refusal(client, upstream)
        if refusal is not None:
            raise LocalProtocolError(refusal)
        self.client_family = client
        self.upstream_family = upstream
        self.server = open_server(client, self._reply, model=model, created=created, seed=seed)
        self.server.bridge()
        options = (
            {} if "model" in SOCKET_SPECS[upstream].query else {"model": upstream_model or model}
        )
        self.session = open_session(upstream, **options)
        self._waiting: deque[_Reply] = deque()  # asked, not begun upstream
        self._streams: dict[int, _Reply] = {}  # upstream stream -> reply
        self._running: list[_Reply] = []  # with a run on the client side
        self._ended: OrderedDict[str, _Reply] = OrderedDict()  # client response id -> reply
        self._adopt: _Reply | None = None  # a reply the upstream began by itself
        self._sent: list[str | bytes] = []  # upstream messages made during a receive
        self._input: AudioConverter | None = None
        self._formats: tuple[AudioFormat | None, AudioFormat | None] = (None, None)
        self._calls: dict[str, str] = {}  # call id -> tool name
        self._flushed: list[bytes] = []
        self._resumed: set[int] = set()  # upstream streams paused for tool results
        self.closed = False

    # -- the shell's calls ---------------------------------------------------------------

    def open(self) -> Step:
        """The connection is accepted: what the client is told first, and the
        upstream's configuration."""
        step = Step()
        self._take(self.server.open(), step)
        self._intents(step)
        return step

    def client(self, message: str | bytes) -> Step:
        """One client message."""
        step = Step()
        outbound = self.server.receive(message)
        step.upstream += self._sent
        self._sent = []
        self._take(outbound, step)
        self._intents(step)
        self._drain(step)
        return step

    def upstream(self, message: str | bytes) -> Step:
        """One upstream message."""
        step = Step()
        called: set[int] = set()
        for routed in self.session.feed(message):
            if routed.stream == 0:
                self._session_event(routed.event, step)
                continue
            self._reply_event(routed.stream, routed.response_id, routed.event, step)
            event = routed.event
            if type(event) is BlockEnd and self._tool_block(routed.stream, event.index):
                called.add(routed.stream)
        for stream in called:
            if self.session.paused_for_tools(stream):
                self._pause(stream)
        self._drain(step)
        return step

    def _tool_block(self, stream: int, index: int) -> bool:
        reply = self._streams.get(stream)
        return reply is not None and index in reply.tools

    def _pause(self, stream: int) -> None:
        """The upstream's reply waits for tool results and goes on after them in the same
        stream (Gemini Live's turn): the client's reply ends with its calls, and what
        follows the results is the client's next reply."""
        reply = self._streams.pop(stream)
        reply.feed.push(
            Finish(
                status="completed",
                reason=FinishReason(unified="tool_calls", raw=None),
                usage=reply.usage,
            )
        )
        self._resumed.add(stream)

    def close(self) -> Step:
        """The upstream's connection ended: every reply still running fails (the
        upstream connection was lost), its end written to the client."""
        step = Step()
        if self.closed:
            return step
        self.closed = True
        for routed in self.session.close():
            if routed.stream != 0:
                self._reply_event(routed.stream, routed.response_id, routed.event, step)
        for reply in self._waiting:
            reply.feed.push(_lost())
        self._waiting.clear()
        self._drain(step)
        return step

    # -- the client's side ------------------------------------------------------------

    def _reply(self, turn: Turn) -> Script | Refusal:
        """The client side's replier: a reply the client asked for is asked of the
        upstream (a reply the upstream began is adopted)."""
        adopted = self._adopt
        if adopted is not None:
            self._adopt = None
            adopted.text_only = turn.audio is None
            return Script(events=[], feed=adopted.feed, tag=adopted)
        step = Step()
        self._intents(step)
        respond = Respond(
            modalities=("audio",) if turn.audio is not None else ("text",),
            out_of_band=turn.out_of_band,
            instructions=turn.instructions,
            say=turn.say,
        )
        try:
            step.upstream += self.session.perform(respond)
        except LocalProtocolError as exc:
            self._sent += step.upstream
            return Refusal(
                status=400,
                message=self._why(exc),
                code="unsupported_feature",
                kind="invalid_request",
            )
        self._sent += step.upstream
        reply = _Reply()
        reply.text_only = turn.audio is None
        self._waiting.append(reply)
        return Script(events=[], feed=reply.feed, tag=reply)

    def _intents(self, step: Step) -> None:
        for intent in self.server.take_intents():
            try:
                step.upstream += self.session.perform(self._mapped(intent, step))
            except _Nothing:
                pass
            except LocalProtocolError as exc:
                self._take(
                    self.server.refuse(400, self._why(exc), code="unsupported_feature"), step
                )
            if isinstance(intent, Configure):
                self._configured()
                for rest in self._flushed:
                    step.upstream += self.session.perform(InputAudio(data=rest))
                self._flushed.clear()

    def _why(self, exc: LocalProtocolError) -> str:
        return (
            f"{exc.message} (not carried: this {self.client_family} connection is "
            f"translated to a {self.upstream_family} upstream)"
        )

    def _mapped(self, intent: Intent, step: Step) -> Intent:
        """An intent in the upstream's terms: its ids, its audio format."""
        if isinstance(intent, InputAudio):
            if self._input is not None:
                return InputAudio(data=self._input.feed(intent.data))
            return intent
        if isinstance(intent, CommitAudio) and self._input is not None:
            rest = self._input.flush()
            if rest:
                step.upstream += self.session.perform(InputAudio(data=rest))
            self._input = self._converter(*self._pair(0))
            return intent
        if isinstance(intent, AddMessage) and intent.audio:
            src, dst = self._pair(0)
            if src is not None and dst is not None and src != dst:
                return msgspec.structs.replace(intent, audio=convert(intent.audio, src, dst))
            return intent
        if isinstance(intent, ToolOutput) and intent.name is None:
            return msgspec.structs.replace(intent, name=self._calls.get(intent.call_id))
        if isinstance(intent, Cancel) and intent.response_id is not None:
            reply = self._by_client(intent.response_id)
            if reply is None:
                return Cancel()
            if reply.upstream_id is None:
                reply.cancelled = True  # (sent once the upstream begins it)
                raise _Nothing
            return Cancel(response_id=reply.upstream_id)
        if isinstance(intent, Truncate | DeleteItem) and intent.item_id is not None:
            found = self._upstream_item(intent.item_id)
            return msgspec.structs.replace(intent, item_id=found or intent.item_id)
        return intent

    def _pair(self, side: int) -> tuple[AudioFormat | None, AudioFormat | None]:
        """(client's, upstream's) format of the input (0) or the output (1)."""
        client = self.server.input_audio if side == 0 else self.server.output_audio
        return client, self.session.audio_formats[side]

    def _configured(self) -> None:
        """A configuration was sent: the input's converter follows the formats."""
        pair = self._pair(0)
        if pair == self._formats:
            return
        if self._input is not None:
            rest = self._input.flush()
            if rest:  # (audio the client sent in the former format)
                self._flushed.append(rest)
        self._formats = pair
        self._input = self._converter(*pair)

    @staticmethod
    def _converter(src: AudioFormat | None, dst: AudioFormat | None) -> AudioConverter | None:
        if src is None or dst is None or src == dst:
            return None
        return AudioConverter(src, dst)

    def _by_client(self, response_id: str) -> _Reply | None:
        for reply in self._running:
            if reply.run is not None and reply.run.response_id == response_id:
                return reply
        return self._ended.get(response_id)

    def _upstream_item(self, item_id: str) -> str | None:
        for reply in [*self._running, *reversed(self._ended.values())]:
            run = reply.run
            if run is None:
                continue
            for index, upstream_item in reply.items.items():
                if run.item_of(index) == item_id:
                    return upstream_item
        return None

    def _take(self, outbound: list[Outbound], step: Step) -> None:
        for item in outbound:
            if step.close is not None:
                return
            if isinstance(item, str | bytes):
                step.client.append(item)
                continue
            if isinstance(item, Close):
                step.close = (item.code, item.reason)
                continue
            reply = item.tag if isinstance(item.tag, _Reply) else _Reply()
            reply.run = item
            self._running.append(reply)

    def _drain(self, step: Step) -> None:
        """Write what the runs have ready; end the runs that are done."""
        while True:
            finished: list[_Reply] = []
            for reply in self._running:
                run = reply.run
                assert run is not None
                while step.close is None and (message := run.next()) is not None:
                    if message.close is not None:
                        step.close = (message.close, message.reason)
                    else:
                        step.client.append(message.text)
                if run.done:
                    finished.append(reply)
            if not finished:
                return
            for reply in finished:
                self._running.remove(reply)
                assert reply.run is not None
                self._ended[reply.run.response_id] = reply
                while len(self._ended) > _KEPT_REPLIES:
                    self._ended.popitem(last=False)
                self._take(self.server.finished(reply.run), step)

    # -- the upstream's side -----------------------------------------------------------

    def _session_event(self, event: object, step: Step) -> None:
        if isinstance(event, Speech):
            at = event.start_ms if event.state == "started" else event.end_ms
            self._take(self.server.heard(event.state, at or 0), step)
        elif isinstance(event, ErrorEvent) and event.error.kind != "protocol":
            error = event.error
            step.client.append(
                self.server.error(
                    error.http_status or 400,
                    f"upstream ({self.upstream_family}): {error.message}",
                    code=error.code,
                    kind=error.kind,
                )
            )

    def _reply_event(
        self, stream: int, response_id: str | None, event: Event | object, step: Step
    ) -> None:
        reply = self._streams.get(stream)
        if reply is None:
            reply = self._begin(stream, step)
        if response_id is not None and reply.upstream_id is None:
            reply.upstream_id = response_id
            if reply.cancelled:
                step.upstream += self.session.perform(Cancel(response_id=response_id))
        if not isinstance(event, Event):
            return
        for out in self._converted(reply, event):
            reply.feed.push(out)

    def _begin(self, stream: int, step: Step) -> _Reply:
        """An upstream reply seen first: the client's oldest reply waiting, else one the
        upstream began by itself (made one of the client side's)."""
        if self._waiting:
            reply = self._waiting.popleft()
        else:
            reply = _Reply()
            self._adopt = reply
            self._take(self.server.respond(), step)
            self._adopt = None
        reply.stream = stream
        self._streams[stream] = reply
        if stream in self._resumed:  # (the upstream's reply goes on after tool results)
            self._resumed.discard(stream)
            reply.feed.push(StreamStart(dialect=self.upstream_family))
        return reply

    def _converted(self, reply: _Reply, event: Event) -> list[Event]:
        """An upstream reply's event as the client side writes it: its audio in the
        client's format, a cut connection a failure, the tool names kept."""
        kind = type(event)
        if reply.text_only and isinstance(event, BlockStart | DataDelta | BlockEnd):
            # (A reply the client asked as text that the upstream speaks: its
            # transcript is the text, its audio is left out.)
            if isinstance(event, BlockStart) and event.kind == "audio":
                reply.dropped.add(event.index)
            if event.index in reply.dropped:
                return []
            if isinstance(event, BlockStart) and event.kind == "transcript":
                return [msgspec.structs.replace(event, kind="text")]
        if kind is DataDelta:
            assert isinstance(event, DataDelta)
            if event.index in reply.audio and reply.converter is not None:
                data = reply.converter.feed(base64.b64decode(event.delta))
                return [msgspec.structs.replace(event, delta=_b64(data))] if data else []
            return [event]
        if kind is BlockStart:
            assert isinstance(event, BlockStart)
            if event.id is not None:
                reply.items[event.index] = event.id
            if event.kind == "audio":
                reply.audio.add(event.index)
                reply.converter = self._converter(*reversed(self._pair(1)))
            elif event.kind == "tool_call":
                reply.tools.add(event.index)
                call = event.call_id or event.id
                if call is not None and event.name is not None:
                    self._calls[call] = event.name
            return [event]
        if kind is BlockEnd:
            assert isinstance(event, BlockEnd)
            if event.index in reply.audio and reply.converter is not None:
                rest = reply.converter.flush()
                reply.converter = None
                if rest:
                    return [DataDelta(index=event.index, delta=_b64(rest)), event]
            return [event]
        if kind is UsageUpdate:
            assert isinstance(event, UsageUpdate)
            reply.usage = event.usage
        if kind is Finish:
            assert isinstance(event, Finish)
            if event.status == "truncated":
                return [_lost()]
        return [event]


class _Nothing(Exception):
    """An intent that sends nothing now."""


def _lost() -> Finish:
    return Finish(
        status="failed",
        reason=FinishReason(unified="error", raw=None),
        error=ErrorInfo(kind="server", message="the upstream connection was lost"),
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
