"""The gateway's streaming core: one upstream reply, transcoded, to one client.

A :class:`StreamPump` moves one stream: it reads the upstream's events a network read
at a time, encodes them for the client (each SSE event with its resume cursor, as its
encoder reports it), journals them and writes them, and a watcher task beside it sends
keep-alives during upstream silences and notices a client that goes away. What it
answers with when the stream fails before its first output (an error status) and how
the gateway writes its errors are the gateway's (:class:`StreamReplies`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import math
import operator
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, NamedTuple, Protocol, cast

from polystream.client import AsyncEventStream
from polystream.dialects import get_dialect
from polystream.dialects._base import DialectEncoder
from polystream.errors import APIStatusError, PolystreamError
from polystream.events import (
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    ReasoningDelta,
    TextDelta,
    ToolInputDelta,
    Warning,
)
from polystream.gateway_core import Limits, alias_id, scrub
from polystream.journal import Journal, JournalConflict
from polystream.scrub import SCRUBBED_EVENTS, Scrubber
from polystream.server._gateway_write import Message, Receive, Send, WriteDeadline, send_body
from polystream.server._journal_feed import JournalFeed

__all__ = [
    "SSE_HEADERS",
    "TENANT",
    "StreamPump",
    "StreamReplies",
    "StreamState",
    "reply_failure",
]

logger = logging.getLogger("polystream.gateway")

Entries = list[tuple[str, bytes]]

SSE_HEADERS: Final = [
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
_FIRST_OUTPUT: Final = frozenset(
    {TextDelta, ReasoningDelta, ToolInputDelta, DataDelta, Finish, ErrorEvent}
)
"""Events that end the opening of a stream: the first of them is written at once, not
with the rest of its read."""
_CONTENT: Final = frozenset({TextDelta, ReasoningDelta, ToolInputDelta, DataDelta})
"""The deltas that are a stream's output: before the first of them (or a Finish that
did not fail) nothing of a streaming response leaves (see :func:`opens`)."""
_OPENING_BYTES: Final = 64 * 1024
"""Most encoded bytes of a stream's opening held back before its first output; an
opening longer than that is written as it is, and the stream has begun."""
TENANT: Final[contextvars.ContextVar[str | None]] = contextvars.ContextVar(
    "polystream_gateway_tenant", default=None
)
"""The tenant of the current request (set by the gateway, read by its stream's state)."""


def failure_told(message: str) -> list[Event]:
    """How an upstream call that failed after the stream began reaches the client: the
    client dialect's in-band error and a failed end."""
    error = ErrorInfo(kind="server", message=message, http_status=502)
    return [
        ErrorEvent(error=error),
        Finish(status="failed", reason=FinishReason(unified="error"), error=error),
    ]


def reply_failure(event: Event) -> ErrorInfo | None:
    """The failure a non-streaming reply's event states (None: it states none): an
    in-band error, or an end that failed or was cut short."""
    if type(event) is ErrorEvent and event.error.kind != "protocol":
        return event.error
    if type(event) is Finish and event.status == "truncated":
        cause = event.error.message if event.error is not None else "no terminal event"
        return ErrorInfo(kind="server", message=f"the reply was cut short: {cause}")
    if type(event) is Finish and event.status == "failed":
        return event.error or ErrorInfo(kind="server", message="the reply failed")
    return None


def opens(event: Event) -> bool:
    """Whether ``event`` is a stream's output: a delta, a block that starts with its
    content, or an end that did not fail (a reply with no content at all)."""
    if type(event) in _CONTENT:
        return True
    if isinstance(event, BlockStart):
        return event.value is not None
    return isinstance(event, Finish) and event.status not in ("failed", "truncated")


def retry_after_header(error: ErrorInfo) -> list[tuple[bytes, bytes]]:
    """The ``Retry-After`` an in-band error carries (Google's ``RetryInfo`` detail,
    ``"retryDelay": "12s"``), as a header of whole seconds; none when it carries none."""
    raw = error.raw
    details = raw.get("details") if isinstance(raw, dict) else None
    if not isinstance(details, list):
        return []
    for detail in details:
        if not isinstance(detail, dict) or not str(detail.get("@type", "")).endswith(
            "google.rpc.RetryInfo"
        ):
            continue
        delay = detail.get("retryDelay")
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                seconds = float(delay[:-1])
            except ValueError:
                return []
            if 0 <= seconds <= 86_400:
                return [(b"retry-after", str(math.ceil(seconds)).encode())]
    return []


def truncation_told(finish: Finish) -> list[Event]:
    """How an upstream reply cut short (a ``truncated`` Finish) reaches the client: the
    client dialect's in-band error and a failed end, never a clean one."""
    cause = finish.error.message if finish.error is not None else "no terminal event"
    error = ErrorInfo(
        kind="server", message=f"the upstream reply was cut short: {cause}", http_status=502
    )
    return [
        ErrorEvent(error=error),
        Finish(
            status="failed", reason=FinishReason(unified="error"), usage=finish.usage, error=error
        ),
    ]


def log_unreadable(error: ErrorInfo) -> None:
    """Log an upstream event the decoder could not read (skipped: the client's stream
    goes on with the events around it), with where it stood."""
    logger.warning(
        "upstream %s event %s at byte %s could not be read, skipped: %s",
        error.dialect,
        error.event_index,
        error.byte_offset,
        error.message,
    )


class StreamState:
    """What the pump and the watcher of one stream share."""

    __slots__ = (
        "aborted",
        "alias",
        "deadline",
        "ended",
        "feed",
        "gone",
        "journal_id",
        "sending",
        "started",
        "tenant",
    )

    def __init__(self, deadline: WriteDeadline) -> None:
        self.deadline = deadline  # the bound on each of the pump's writes
        self.started = False  # the response (a stream, or an error) has begun
        self.ended = False  # the response is complete
        self.gone = False  # the client disconnected
        self.aborted = False  # the client was too slow: the response stays incomplete
        self.sending = False  # a write to the client is in progress
        self.journal_id: str | None = None
        # The stream's journal writes, off its path, when the journal blocks.
        self.feed: JournalFeed | None = None
        self.tenant = TENANT.get()  # who may resume the stream (the request's tenant)
        self.alias: str | None = None  # the native id's alias, once tried ("": not made)


class _Error(Protocol):
    async def __call__(
        self,
        send: Send,
        dialect: str,
        status: int,
        message: str,
        *,
        kind: str | None = None,
        param: str | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
    ) -> None: ...


class StreamReplies(NamedTuple):
    """How the gateway answers, for its streams: its error response (in the client's
    dialect), the answer to a reply that failed before its first output, to an
    upstream's error status, and its report of a stream's transcoding losses."""

    error: _Error
    failed_reply: Callable[
        [Send, str, ErrorInfo, list[tuple[bytes, bytes]] | None], Awaitable[None]
    ]
    upstream_error: Callable[[Send, str, APIStatusError], Awaitable[None]]
    losses: Callable[[DialectEncoder], object]


class StreamPump:
    """Stream one upstream reply's events to the client, transcoded.

    :meth:`run` runs in the request's task, which pumps: it sends the upstream request
    at once (no turn of the event loop between the request's handling and its upstream
    request), then reads the upstream a network read at a time, encodes that read's
    events and writes them to the client in one write. A watcher task makes the
    encoder and the response head while the upstream is asked, then watches the
    client: when it goes away, the pump is cancelled, or (with a resume grace period
    and a journal to feed) keeps feeding the journal for a bounded time. During
    upstream silences the watcher sends keep-alive comments.

    Args:
        cut: A failed stream of this dialect ends with an aborted transfer after its
            in-band error (no clean end, no closing bytes). A raw reply (the media
            itself, which has no in-band error) always does.
        keepalives: The upstream's keep-alives are transcoded for this client.
        comment: The keep-alive this client is sent during an upstream silence (empty:
            none).
    """

    def __init__(
        self,
        send: Send,
        receive: Receive,
        dialect: str,
        options: dict[str, Any],
        stream: AsyncEventStream,
        nowait: Callable[[Message], bool] | None,
        extra_headers: list[tuple[bytes, bytes]] | None,
        *,
        limits: Limits,
        journal: Journal,
        feeds: dict[str, JournalFeed],
        secrets: Scrubber,
        replies: StreamReplies,
        cut: bool,
        keepalives: bool,
        comment: bytes,
    ) -> None:
        self.send = send
        self.receive = receive
        self.dialect = dialect
        self.options = options
        self.stream = stream
        self.nowait = nowait
        self.extra_headers = extra_headers
        self.limits = limits
        self.journal = journal
        self.feeds = feeds  # the gateway's feeds, by every id a resume may name
        self.secrets = secrets
        self.replies = replies
        self.cut = cut or options.get("framing") == "raw"
        self.keepalives = keepalives
        self.comment = comment
        self.sse = options.get("framing", "sse") == "sse"
        # A raw reply (the media itself) has the upstream's Content-Type, known once its
        # answer began.
        self.raw = options.get("framing") == "raw"
        self.state = StreamState(WriteDeadline(limits.slow_client_seconds))
        self.loop = asyncio.get_running_loop()
        self.call = stream.call
        self.encoder: DialectEncoder | None = None  # the client's, made on first use
        self.stream_id: str | None = None  # the id the stream is journalled under
        self.start: Message | None = None  # the response head's message
        self.held: list[bytes] = []  # what a pushed read could not write at once
        self.held_last = False  # ... and it ends the response
        self.pushed_last = False  # a pushed read ended the response (wrote it, or held it)
        # The opening events the upstream call holds back until the first output (so
        # that a retry can start over unseen), encoded as they come (see opening), and
        # whether the encoder has encoded anything else.
        self.ahead: list[Event] = []
        self.ahead_entries: Entries = []
        self.spent = False
        # Nothing leaves before the first output (a keep-alive before it is dropped);
        # once the stream's failure is encoded, its end is never a clean one (see cut).
        self.begun = False
        self.failing = False
        # The encoded opening, held until the first output (bounded: _OPENING_BYTES),
        # and the failure that came before any output instead: the request is then
        # answered with its status (see pump), as a non-streaming one would be.
        self.opening_entries: Entries = []
        self.opening_size = 0
        self.refused: ErrorInfo | None = None
        self.refused_headers: list[tuple[bytes, bytes]] = []
        self.grace_timer: asyncio.TimerHandle | None = None

    # -- encoding ------------------------------------------------------------------------

    def encoder_(self) -> DialectEncoder:
        """The client's encoder, made on first use (an SSE stream's reports each event's
        cursor under the stream's id)."""
        encoder = self.encoder
        if encoder is None:
            encoder = self.encoder = get_dialect(self.dialect).encoder(**self.options)
            if self.sse:
                if self.stream_id is None:
                    self.stream_id = secrets.token_hex(16)  # 128 random bits: unguessable
                encoder.stream_id = self.stream_id
        return encoder

    def encode(self, events: list[Event], close: bool = False) -> Entries:
        """``events`` encoded (``close``: and the end of the stream), as entries: an SSE
        stream's events with their cursors, any other's bytes under no cursor."""
        encoder = self.encoder_()
        if self.sse:
            return encoder.encode_entries(events, close=close)
        encode = encoder.encode
        parts = [encode(event) for event in events]
        if close:
            parts.append(encoder.close())
        return [("", part) for part in parts if part]

    def client_event(self, event: Event) -> Event:
        """``event`` as a client (and the journal) may have it: the text it carries from
        elsewhere (an upstream's error, a native event) without secrets."""
        return self.secrets.event(event) if type(event) in SCRUBBED_EVENTS else event

    def response_start(self) -> Message:
        """The response head's message (and the stream id it names), made once."""
        start = self.start
        if start is None:
            encoder = self.encoder_()
            content_type = encoder.content_type
            if self.raw:
                content_type = self.call.headers.get("content-type") or "application/octet-stream"
            headers = [(b"content-type", content_type.encode("latin-1")), *SSE_HEADERS]
            if self.extra_headers:
                headers += self.extra_headers
            if self.sse:
                assert self.stream_id is not None
                headers.append((b"x-polystream-stream-id", self.stream_id.encode()))
            start = self.start = {"type": "http.response.start", "status": 200, "headers": headers}
        return start

    def opening(self, events: list[Event]) -> None:
        """Encode the held opening events not encoded yet (nothing is written: the read
        that brings the first output writes them with it), so that the read that
        carries the first output has only its own events to encode."""
        ahead = self.ahead
        if self.spent or len(events) <= len(ahead):
            return
        if ahead and events[0] is not ahead[0]:
            return  # not the same attempt's (encoded() starts over)
        encode = self.encode
        for event in events[len(ahead) :]:
            self.ahead_entries += encode([self.client_event(event)])
            ahead.append(event)

    def encoded(self, batch: list[Event]) -> Entries:
        """A batch's events encoded for the client: none until the first output (the
        opening is held, and a failure before it is kept in ``refused``)."""
        if self.refused is not None:
            return []  # (the request is answered with its status)
        if self.begun:
            return self.encoded_events(batch)
        for event in batch:
            if opens(event):
                entries = [*self.opening_entries, *self.encoded_events(batch)]
                self.opening_entries.clear()
                return entries
            if type(event) is ErrorEvent or type(event) is Finish:
                failure = reply_failure(event)
                if failure is not None:
                    # Before any output (and no retry left): nothing more is encoded.
                    self.refused = failure
                    if type(event) is ErrorEvent:
                        self.refused_headers.extend(retry_after_header(event.error))
                    self.opening_entries.clear()
                    return []
        entries = self.encoded_events(batch)
        self.opening_entries.extend(entries)
        self.opening_size += sum([len(data) for _, data in entries])
        if self.opening_size > _OPENING_BYTES:
            # An opening this long is the stream's start: it leaves as it is.
            self.begun = True
            entries = self.opening_entries[:]
            self.opening_entries.clear()
            return entries
        return []

    def encoded_events(self, batch: list[Event]) -> Entries:
        if not batch:
            return []
        entries: Entries = []
        ahead = self.ahead
        if ahead:
            n = len(ahead)
            if len(batch) >= n and all(map(operator.is_, ahead, batch[:n])):
                entries += self.ahead_entries
                batch = batch[n:]
            else:
                # Not those events (a retry started over): a new encoder, which has
                # seen nothing, encodes whatever comes instead.
                self.encoder = None
            ahead.clear()
            self.ahead_entries = []
        out: list[Event] = []
        begun = self.begun
        keepalives = self.keepalives
        scrubbed = SCRUBBED_EVENTS
        for event in batch:
            kind = type(event)
            if kind in scrubbed:
                if kind is Warning:
                    warning = cast(Warning, event)
                    if warning.code in ("retry", "resume"):
                        logger.info(
                            "upstream %s: %s", warning.code, scrub(warning.message, self.secrets)
                        )
                        continue
                event = self.secrets.event(event)
                if type(event) is ErrorEvent and event.error.kind == "protocol":
                    log_unreadable(event.error)
            if kind is KeepAlive:
                if not (begun and keepalives):
                    continue  # (before the first output, nothing leaves)
            elif not begun:
                begun = self.begun = opens(event)
            self.spent = True
            if kind is Finish:
                finish = cast(Finish, event)
                if finish.status in ("truncated", "failed"):
                    self.failing = True
                    if finish.status == "truncated":
                        # A reply cut short is never a clean end: told as a failure.
                        out += truncation_told(finish)
                        continue
            out.append(event)
        if out:
            entries += self.encode(out)
        return entries

    # -- the pushed path -------------------------------------------------------------------

    def pushed(self, batch: list[Event]) -> bool:
        """One upstream read's events, encoded, journalled and written in that read's
        own callback, as the pump would (the response head first; the last events with
        the end of the response); False to hand the stream back to the pump."""
        nowait = self.nowait
        assert nowait is not None
        entries = self.encoded(batch)
        if self.refused is not None:
            return False  # a failure before any output: the pump answers its status
        state = self.state
        last = self.call.finished
        failing_cut = self.failing and self.cut
        if last:
            tail = self.encode([], close=True)
            if tail and not failing_cut:
                entries += tail
            self.pushed_last = True
        if not state.started:
            if state.gone:
                return not last  # no response, and no journal for it (as flush)
            if not entries and not last:
                return True  # no output yet: nothing leaves (not even the head)
            state.started = True
            nowait(self.response_start())
        # The entries are journalled after the write, in this same callback: the
        # client has its bytes sooner, and no resume can run in between.
        data, journalled = self.split(entries)
        taken = True
        ending = last and not failing_cut  # (a failure may end aborted)
        if not state.gone and (data or last):
            state.deadline.last = self.loop.time()
            message = {"type": "http.response.body", "body": data, "more_body": not ending}
            taken = nowait(message)
            if not taken:
                self.held.append(data)  # the client is not taking writes: the pump waits
                self.held_last = ending
            elif ending:
                state.ended = True
        if journalled:
            self.keep(journalled)
        if not taken:
            return False
        feed = state.feed
        return not last and (feed is None or not feed.backlogged)

    async def push(self) -> list[Event] | None:
        """Each upstream read's events encoded, journalled and written in the read's own
        callback, with no task woken (on polystream's own server and upstream client):
        from the reply's opening until something needs the pump (a retry or resume, the
        end of the body, a write or a journal to wait for, a failure). The events left
        to the pump; None when pushing could not start (then the pump reads the next
        batch)."""
        if self.nowait is None:
            return None
        future = self.stream.push(self.pushed, self.opening)
        if future is None:
            return None
        try:
            rest = await future
        finally:
            self.stream.stop_push()
        feed = self.state.feed
        if feed is not None and feed.backlogged:
            await feed.flushed()
        return rest

    # -- the pump --------------------------------------------------------------------------

    async def flush(self, entries: Entries, last: bool = False) -> bool:
        """Write encoded events (the response head first; ``last``: and the end of the
        response); False to stop."""
        state = self.state
        if not state.started:
            if state.gone:
                return True
            state.started = True
            await self.send(self.response_start())
        if not entries and not last:
            return True
        return await self.out(entries, last)

    async def pump(self) -> None:
        state = self.state
        call = self.call
        stream = self.stream
        nowait = self.nowait
        # (A reply's opening is where pushing can begin: see push.)
        batches = stream.batches() if nowait is None else stream.batches(openings=True)
        first = True  # until the first output, it leaves as soon as it is encoded
        entries: Entries = []
        try:
            async for batch in batches:
                if not batch and nowait is not None and call.held:
                    self.opening(call.held)  # a read of held opening events only
                if first:
                    for i, event in enumerate(batch):
                        if type(event) in _FIRST_OUTPUT:
                            first = False
                            entries = self.encoded(batch[: i + 1])
                            if entries and not await self.flush(entries):
                                return
                            batch = batch[i + 1 :]
                            break
                entries = self.encoded(batch)
                while self.refused is None and not call.finished:
                    # (An empty batch, a reply's opening, starts nothing.)
                    # (Nothing leaves before the first output: not even the head.)
                    if entries and not await self.flush(entries):
                        return
                    entries = []
                    rest = await self.push()
                    if rest is None:
                        break
                    held = self.held
                    if held:
                        data = b"".join(held)
                        held.clear()
                        if not await self.write(data, self.held_last):
                            return
                    if self.pushed_last:
                        return
                    batch = rest
                    entries = self.encoded(rest)
                if self.refused is not None or call.finished:
                    # The terminal event: the response ends with it, in one write; the
                    # rest of the upstream reply (its terminator) is read later.
                    break
            if self.refused is not None:
                # A failure before any output: nothing was sent, not even the head.
                if not state.gone:
                    state.started = True
                    await self.replies.failed_reply(
                        self.send, self.dialect, self.refused, self.refused_headers
                    )
                return
            if self.opening_entries:
                # (An upstream call that ended with neither an output nor a failure.)
                entries = [*self.opening_entries, *entries]
                self.opening_entries.clear()
            failing_cut = self.failing and self.cut
            tail = self.encode([], close=True)
            if tail and not failing_cut:
                entries += tail
            # A failure may end with an aborted transfer (see cut): nor is the JSON
            # array closed.
            if not await self.flush(entries, last=not failing_cut):
                return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self.failed(exc)
        finally:
            state.deadline.close()
            # Finalize the upstream call here, in this task, not in a GC finalizer.
            with contextlib.suppress(BaseException):
                await stream.aclose()
            if state.journal_id is not None:
                with contextlib.suppress(BaseException):
                    await self.journal_finish()
            if self.encoder is not None and not self.ahead:
                # (With held events still ahead, nothing of the stream's was written.)
                self.replies.losses(self.encoder)
        # A stream that began and did not end is left incomplete: the server closes the
        # connection and the client sees a broken transfer, never a clean end.

    async def failed(self, exc: Exception) -> None:
        """Tell the client that the upstream call failed: with an error status before the
        response began, else in its dialect's stream."""
        state = self.state
        send = self.send
        dialect = self.dialect
        if not isinstance(exc, PolystreamError):
            logger.error(
                "upstream failure: %s", scrub(f"{type(exc).__name__}: {exc}", self.secrets)
            )
        if not state.started and not state.gone:
            state.started = True
            if isinstance(exc, APIStatusError):
                await self.replies.upstream_error(send, dialect, exc)
            elif isinstance(exc, PolystreamError):
                await self.replies.error(send, dialect, 502, str(exc), kind="server")
            else:
                await self.replies.error(
                    send, dialect, 502, "the upstream call failed", kind="server"
                )
            return
        if state.started and not state.gone and not state.aborted and not self.failing:
            # The upstream failed after the stream began: the client is told so in its
            # dialect (the stream ends failed, or aborted; see cut), never with a clean
            # end.
            if isinstance(exc, APIStatusError):
                why = f"upstream: HTTP {exc.status_code}: {exc.args[0] if exc.args else ''}"
            elif isinstance(exc, PolystreamError):
                why = f"upstream: {exc}"
            else:
                why = "the upstream call failed"
            entries = self.encoded(failure_told(scrub(why, self.secrets)))
            if not self.cut:
                entries += self.encode([], close=True)
            with contextlib.suppress(Exception):
                await self.flush(entries, last=not self.cut)

    async def watch(self, pumping: asyncio.Task[Any]) -> None:
        # Its first step runs once the pump waits for the upstream's answer: the encoder
        # and the response head are needed only then, and made while it is asked they
        # are off the path of the first delta (which, with the events before the first
        # output held back for a safe retry, also carries the response's start). Should
        # it fail, the pump makes it again and says why.
        if not self.raw:  # (a raw reply's head waits for the upstream's)
            with contextlib.suppress(Exception):
                self.response_start()
        state = self.state
        keepalive = self.limits.keepalive_seconds
        comment = self.comment
        wait = keepalive
        while True:
            try:
                async with asyncio.timeout(wait):
                    message = await self.receive()
            except TimeoutError:
                quiet = self.loop.time() - state.deadline.last
                if quiet < keepalive:
                    wait = keepalive - quiet  # the stream wrote since: not a silence
                    continue
                wait = keepalive
                if (
                    state.started
                    and self.sse
                    and comment
                    and not state.sending
                    and not state.aborted
                ):
                    # A silence: a comment keeps proxies and clients from timing out.
                    await send_body(self.send, comment, self.limits.slow_client_seconds)
                continue
            if message["type"] != "http.disconnect":
                continue
            if state.ended:
                # The response is complete (the server says so as a disconnect): what
                # the pump has left, the end of the upstream reply and of the journal,
                # finishes on its own, within its bounds.
                return
            state.gone = True
            grace = self.limits.resume_grace_seconds
            if grace > 0 and state.journal_id is not None:
                # Keep feeding the journal for a resuming client, for a bounded time.
                self.grace_timer = self.loop.call_later(grace, pumping.cancel)
            else:
                pumping.cancel()
            return

    async def run(self) -> None:
        """Pump the stream in this task, with its watcher beside it."""
        pumping = asyncio.current_task()
        assert pumping is not None
        state = self.state
        watcher = asyncio.create_task(self.watch(pumping))
        try:
            await self.pump()
        except asyncio.CancelledError:
            if not state.gone:
                raise  # not the watcher's: the server's (its shutdown)
            # The client went away: the pump stopped, as the watcher asked (at once, or
            # after the grace period); what this request does ends here.
            pumping.uncancel()
        finally:
            watcher.cancel()
            if self.grace_timer is not None:
                self.grace_timer.cancel()
        # An aborted response returns without completing: the server closes the
        # connection, and the client sees a broken transfer, never a clean end.

    # -- output and journal ------------------------------------------------------------------

    async def out(self, entries: Entries, last: bool = False) -> bool:
        """Journal encoded events and write them to the client (unless it has gone),
        ``last``: with the end of the response. False when the client does not keep up
        (the stream is then dropped)."""
        data = self.record(entries)
        feed = self.state.feed
        if feed is not None and feed.backlogged:
            await feed.flushed()
        return await self.write(data, last)

    def record(self, entries: Entries) -> bytes:
        """Journal encoded events (the stream's journal made with its first entries);
        the bytes to write."""
        data, journalled = self.split(entries)
        if journalled:
            self.keep(journalled)
        return data

    def split(self, entries: Entries) -> tuple[bytes, Entries]:
        """Encoded events as the bytes to write and their journal entries (none for a
        stream that is not SSE)."""
        if not entries:
            return b"", []
        data = entries[0][1] if len(entries) == 1 else b"".join([e for _, e in entries])
        return data, entries if self.sse else []

    def keep(self, entries: Entries) -> None:
        """Journal a stream's entries (its journal made with the first, under the id the
        gateway minted for it, bound to its tenant and dialect; its native id's alias
        made once the native id is known)."""
        state = self.state
        journal_id = state.journal_id
        if journal_id is None:
            assert self.stream_id is not None
            journal_id = state.journal_id = self.stream_id
            meta = {"dialect": self.dialect, "tenant": state.tenant}
            if self.journal.blocking:
                feed = state.feed = JournalFeed(self.journal, self.feed_failed)
                feed.create(journal_id, meta)
                self.feeds[journal_id] = feed
            else:
                self.journal.create(journal_id, meta, now=time.time())
        if state.alias is None:
            assert self.encoder is not None
            native_id = self.encoder.native_id
            if native_id is not None:
                self.alias(native_id)
        if state.feed is not None:
            state.feed.put(journal_id, entries)
        else:
            self.journal.append(journal_id, entries, now=time.time())

    def alias(self, native_id: str) -> None:
        """Make the alias by which a stream's native id leads to it, for its tenant and
        dialect. An alias the journal holds already (a live stream of the same tenant
        had that native id) is left as it is: this stream stays resumable by its minted
        id, and a log line says so."""
        state = self.state
        journal_id = state.journal_id
        assert journal_id is not None
        dialect = self.dialect
        name = state.alias = alias_id(state.tenant or "", dialect, native_id)
        meta = {"alias": journal_id, "dialect": dialect, "tenant": state.tenant}

        def taken() -> None:
            state.alias = ""
            logger.warning(
                "stream %s: its native id %s could not be aliased (another stream of the "
                "same tenant and dialect holds it); it is resumable by its stream id only",
                journal_id,
                scrub(native_id[:200], self.secrets),
            )

        feed = state.feed
        if feed is not None:
            feed.alias(name, meta, taken)
            self.feeds.setdefault(name, feed)
            return
        try:
            self.journal.create(name, meta, now=time.time())
        except JournalConflict:
            taken()

    async def write(self, data: bytes, last: bool) -> bool:
        """Write a stream's bytes to the client (unless it has gone); False when it does
        not keep up (the stream is then dropped)."""
        state = self.state
        if state.gone or (not data and not last):
            return True
        state.sending = True
        try:
            sent = await send_body(
                self.send, data, self.limits.slow_client_seconds, not last, state.deadline
            )
        finally:
            state.sending = False
        if not sent:
            state.aborted = True  # a reader too slow to keep up: drop the connection
        elif last:
            state.ended = True
        return sent

    async def journal_finish(self) -> None:
        """Mark the stream's journal complete, after everything handed to it is written
        (its feed then leaves the table a resume looks in)."""
        state = self.state
        assert state.journal_id is not None
        feed = state.feed
        if feed is None:
            self.journal.finish(state.journal_id, now=time.time())
            return
        feed.finish(state.journal_id)
        try:
            await feed.flushed()
        finally:
            for name in feed.names:
                if self.feeds.get(name) is feed:
                    del self.feeds[name]

    def feed_failed(self, exc: Exception) -> None:
        logger.error(
            "journal write failed (the stream cannot be resumed): %s",
            scrub(f"{type(exc).__name__}: {exc}", self.secrets),
        )
