"""One streaming call to a provider, as a sans-I/O state machine.

:class:`StreamCall` decides everything about a call: the HTTP request to send, what
an error status means, which events to deliver, when to retry (and how long to wait),
and when and how to resume a dropped stream. The sync and async clients only carry out
its decisions: send the request it gives, feed it the bytes, sleep when told.

Delivery rules:

* Events are delivered exactly once. Until the first *output* event (a block, or the
  Finish), the opening events are held back so that a retry can start over without
  the consumer seeing them twice; keep-alives pass straight through.
* A retry is visible: a :class:`~polystream.events.Warning` with code ``retry`` says
  why and how long it waits.
* An in-band ``overloaded`` / ``rate_limit`` error is retried only while no output was
  delivered. After output it ends the stream ``failed``, never a silent duplicate.
* A dropped connection is resumed where the provider allows it (OpenAI background
  responses with ``starting_after``, Gemini Interactions with ``last_event_id``): the
  *same* decoder continues on the resumed bytes, so block indices carry on and the
  result is whole even though the resumed stream lacks the opening events. Elsewhere
  the stream ends ``truncated`` with an error that says the provider has no resume.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlencode

import msgspec

from polystream.accumulate import Accumulator, Result
from polystream.dialects import DialectDecoder, get_dialect
from polystream.errors import APIStatusError
from polystream.events import (
    BlockStart,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    FinishReason,
    KeepAlive,
    StreamStart,
    Warning,
)
from polystream.request import (
    Request,
    auth_headers,
    build_request,
    error_from_body,
    provider_of,
)
from polystream.request.codecs import pass_through_body
from polystream.retry import RetryPolicy, RetryState
from polystream.wire.jsondepth import decode_bounded

__all__ = ["HttpRequest", "StreamCall"]

_OUTPUT: Final = frozenset({BlockStart, Finish})


class HttpRequest(msgspec.Struct, frozen=True, kw_only=True):
    """An HTTP request for a shell to send.

    Fields:
        method: ``POST`` or ``GET``.
        url: The absolute URL.
        headers: Request headers (authentication included).
        body: The JSON body, or None.
    """

    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None = None


class StreamCall:
    """The sans-I/O logic of one streaming call.

    Args:
        dialect: The dialect to speak.
        request: What to ask for (``stream`` is forced on).
        api_key: The provider key.
        base_url: The provider base URL (default: the official one; see
            :data:`polystream.request.PROVIDERS`).
        policy: Retry settings.
        resume: Resume dropped streams where the provider allows it.
        max_resumes: How many times one call may resume.
        keep_events: Keep delivered events so that :meth:`native` can rebuild the
            provider's own final object.
        keep_result: Accumulate delivered events so that :meth:`result` can build the
            unified result. Off, the call holds no state that grows with the stream
            (a gateway re-encodes each event as it comes and never reads the result).
        framing: For ``gemini_generate``: ``sse`` or ``json_array``.
        rng: Randomness for backoff jitter.
        extra_headers: Headers sent with every request of the call.
        native_body: The body ``request`` was parsed from, in this same dialect: sent
            as it came, every field of it, but for those the call decides (the model,
            streaming; see :func:`polystream.request.codecs.pass_through_body`).

    Shell loop (see :mod:`polystream.client`)::

        request = call.next_request()
        while request is not None:
            send request; if status != 200: call.on_error_status(...) and continue
            call.on_open(status, headers)
            for chunk in body: deliver(call.feed(chunk)); if call.pending: break
            else: deliver(call.on_eof())
            if call.pending: sleep(call.pending_delay); request = call.next_request()
    """

    def __init__(
        self,
        dialect: str,
        request: Request,
        *,
        api_key: str,
        base_url: str | None = None,
        policy: RetryPolicy | None = None,
        resume: bool = True,
        max_resumes: int = 5,
        keep_events: bool = True,
        keep_result: bool = True,
        framing: str = "sse",
        rng: Callable[[], float] = random.random,
        extra_headers: Mapping[str, str] | None = None,
        native_body: dict[str, Any] | None = None,
    ) -> None:
        self.dialect = get_dialect(dialect).name
        self._native_body = native_body
        self.request = msgspec.structs.replace(request, stream=True)
        self.provider = provider_of(self.dialect)
        self.base_url = (base_url or self.provider.base_url).rstrip("/")
        self._api_key = api_key
        self._headers = dict(extra_headers or {})
        self.retry = RetryState(policy, rng=rng)
        self.resume_enabled = resume
        self.max_resumes = max_resumes
        self.framing = framing
        self.resumes = 0
        self.attempts = 0
        self.accumulator: Accumulator | None = Accumulator() if keep_result else None
        self.events: list[Event] | None = [] if keep_events else None
        self.headers: dict[str, str] = {}
        self.request_id: str | None = None
        self.rate_limits: dict[str, str] = {}
        self.response_id: str | None = None
        self.finished = False
        self._decoder: DialectDecoder | None = None
        self._held: list[Event] = []
        self._output_delivered = False
        self._cursor: int | str | None = None
        self._pending: HttpRequest | None = None
        self.pending_delay = 0.0
        self._first = True
        # Built now so that a request the dialect cannot express fails at construction
        # (RequestError), before anything is sent.
        self._first_request = self._initial()

    # -- requests ------------------------------------------------------------------------

    def next_request(self) -> HttpRequest | None:
        """The next request to send (the first call gives the initial request; after a
        retry or resume decision, the request it decided). None when done."""
        if self._first:
            self._first = False
            self.attempts = 1
            return self._first_request
        request, self._pending = self._pending, None
        if request is not None:
            self.attempts += 1
        return request

    @property
    def held(self) -> list[Event]:
        """The opening events held back until the first output (see the delivery rules),
        oldest first: read them, never change them. A retry starts a new list."""
        return self._held

    @property
    def pending(self) -> bool:
        """True when the current attempt is over and another request must be sent."""
        return self._pending is not None

    def _initial(self) -> HttpRequest:
        native = build_request(self.dialect, self.request, framing=self.framing)
        body = native.body
        if self._native_body is not None:
            body = pass_through_body(self.dialect, self._native_body, body)
        url = self.base_url + native.path
        if native.query:
            url += "?" + urlencode(native.query)
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        headers.update(auth_headers(self.dialect, self._api_key))
        headers.update(self._headers)
        return HttpRequest(method="POST", url=url, headers=headers, body=msgspec.json.encode(body))

    def _resume_request(self) -> HttpRequest:
        headers = {"accept": "text/event-stream"}
        headers.update(auth_headers(self.dialect, self._api_key))
        headers.update(self._headers)
        resume = get_dialect(self.dialect).resume
        assert resume.request_path is not None and self.response_id is not None
        url = (
            self.base_url
            + resume.request_path.format(id=self.response_id)
            + f"?stream=true&{resume.cursor_param}={self._cursor}"
        )
        return HttpRequest(method="GET", url=url, headers=headers)

    # -- responses ------------------------------------------------------------------------

    def on_error_status(
        self, status: int, headers: Mapping[str, str], body: bytes, *, now: float | None = None
    ) -> list[Event]:
        """The server answered with an error status before any stream.

        Returns:
            Events to deliver (a ``retry`` warning when a retry was scheduled).

        Raises:
            APIStatusError: The error is final (not retryable, or retries exhausted).
        """
        parsed: Any
        try:
            # (Bounded nesting: a body too deep is kept as text, like malformed JSON.)
            parsed = decode_bounded(body, what="the error body") if body else None
        except msgspec.DecodeError:
            parsed = body.decode("utf-8", "replace")
        info = error_from_body(status, parsed)
        lower = {k.lower(): v for k, v in headers.items()}
        request_id = lower.get(self.provider.request_id_header) or lower.get("x-request-id")
        delay = self.retry.after_status(status, lower, now=now)
        if self.resumes and self._decoder is not None:
            # A resume request failed: try it again, or end the stream truncated.
            if delay is not None:
                self._schedule(self._resume_request(), delay)
                return [self._retry_warning(f"resume: HTTP {status} {info.kind}", delay)]
            events = self._decoder.close()
            message = f"resume failed: HTTP {status} {info.kind}: {info.message}"
            return self._process([self._explain_truncation(e, message) for e in events])
        if delay is None:
            from polystream.retry import parse_retry_after

            raise APIStatusError(
                info.message,
                status_code=status,
                kind=info.kind,
                body=parsed,
                request_id=request_id,
                retry_after=parse_retry_after(lower, now=now),
            )
        self._schedule(self._initial(), delay)
        return [self._retry_warning(f"HTTP {status} {info.kind}", delay)]

    def on_connect_error(self, message: str) -> list[Event]:
        """The connection failed before a response.

        Raises:
            TransportError: No retry is left.
        """
        from polystream.errors import TransportError

        delay = self.retry.after_connection_error() if not self._output_delivered else None
        if delay is None:
            raise TransportError(f"cannot reach {self.base_url}: {message}")
        self._schedule(self._initial(), delay)
        return [self._retry_warning(f"connection failed ({message})", delay)]

    def on_open(self, status: int, headers: Mapping[str, str]) -> None:
        """A 200 response began: record its headers; start (or keep) the decoder."""
        lower = {k.lower(): v for k, v in headers.items()}
        self.headers = lower
        self.request_id = (
            lower.get(self.provider.request_id_header) or lower.get("x-request-id")
        ) or self.request_id
        self.rate_limits = {
            k: v for k, v in lower.items() if "ratelimit" in k or k == "retry-after"
        } or self.rate_limits
        if self._decoder is None:
            options: dict[str, Any] = {}
            if len(get_dialect(self.dialect).framings) > 1:
                options["framing"] = self.framing
            self._decoder = get_dialect(self.dialect).decoder(**options)
        # A resumed stream continues on the same decoder (see reset_framing).

    def feed(self, chunk: bytes) -> list[Event]:
        """Body bytes arrived: the events to deliver now."""
        assert self._decoder is not None, "on_open() first"
        return self._process(self._decoder.feed(chunk))

    def on_eof(self) -> list[Event]:
        """The body ended. Returns the last events, or schedules a resume when the
        stream was cut before its terminal event and the provider can resume."""
        return self._end(None)

    def on_disconnect(self, message: str) -> list[Event]:
        """The connection dropped or stalled mid-stream (``message`` says how)."""
        return self._end(message)

    # -- internals ------------------------------------------------------------------------

    def _end(self, message: str | None) -> list[Event]:
        if self._decoder is None or self.finished or self._pending is not None:
            return []
        if self._can_resume():
            self._decoder.reset_framing()
            self.resumes += 1
            self._schedule(self._resume_request(), 0.0)
            why = message or "stream ended before its terminal event"
            return [
                Warning(
                    code="resume",
                    message=f"{why}; resuming {self.response_id} after {self._cursor} "
                    f"(resume {self.resumes} of {self.max_resumes})",
                )
            ]
        if not self._output_delivered:
            # Nothing reached the consumer yet: start over, as for a failed connection.
            delay = self.retry.after_connection_error()
            if delay is not None:
                self._held = []
                self._decoder = None
                self._schedule(self._initial(), delay)
                why = message or "stream ended before any output"
                return [self._retry_warning(why, delay)]
        events = self._decoder.close()
        if message is not None or not self.resume_enabled:
            events = [self._explain_truncation(e, message) for e in events]
        return self._process(events)

    def _can_resume(self) -> bool:
        resume = get_dialect(self.dialect).resume
        return (
            self.resume_enabled
            and resume.client_resume
            and self.response_id is not None
            and self._cursor is not None
            and self.resumes < self.max_resumes
            and (not resume.needs_background or self.request.background)
        )

    def _explain_truncation(self, event: Event, message: str | None) -> Event:
        if not isinstance(event, Finish) or event.status != "truncated" or event.error is None:
            return event
        why = message or event.error.message
        resume = get_dialect(self.dialect).resume
        if resume.client_resume and resume.needs_background:
            hint = "resume needs background=true" if not self.request.background else "no cursor"
        elif resume.client_resume:
            hint = "no cursor to resume from"
        else:
            hint = f"{self.dialect} has no resume"
        error = msgspec.structs.replace(event.error, message=f"{why} ({hint})")
        return msgspec.structs.replace(event, error=error)

    def _schedule(self, request: HttpRequest, delay: float) -> None:
        self._pending = request
        self.pending_delay = delay

    def _retry_warning(self, why: str, delay: float) -> Warning:
        return Warning(
            code="retry",
            message=f"{why}; retry {self.retry.retries} of {self.retry.policy.max_retries} "
            f"in {delay:.2f} s",
        )

    def _process(self, events: list[Event]) -> list[Event]:
        out: list[Event] = []
        resumed_floor = self._cursor if self.resumes else None
        for event in events:
            cursor = event.cursor
            if (
                resumed_floor is not None
                and isinstance(cursor, int)
                and isinstance(resumed_floor, int)
                and cursor <= resumed_floor
                and not isinstance(event, KeepAlive)
            ):
                continue  # already delivered before the drop
            if cursor is not None:
                self._cursor = cursor
            if isinstance(event, StreamStart) and event.id:
                self.response_id = event.id
            if (
                isinstance(event, ErrorEvent)
                and not self._output_delivered
                and event.error.kind in ("overloaded", "rate_limit")
            ):
                delay = self.retry.after_stream_error(event.error.kind, output_delivered=False)
                if delay is not None:
                    # Start over: nothing of this attempt was delivered.
                    self._held = []
                    self._decoder = None
                    self._schedule(self._initial(), delay)
                    out.append(
                        self._retry_warning(
                            f"in-band {event.error.code or event.error.kind}", delay
                        )
                    )
                    return out
            if self._decoder is not None and self._decoder.last_cursor is not None:
                self._cursor = self._decoder.last_cursor
            if not self._output_delivered:
                if type(event) is KeepAlive:
                    out.append(event)
                    continue
                self._held.append(event)
                if type(event) in _OUTPUT:
                    self._output_delivered = True
                    out.extend(self._held)
                    self._held = []
                continue
            out.append(event)
        # A native event may produce no unified event yet (a deferred block start): the
        # decoder's own cursor is the authority on what has been consumed.
        if self._decoder is not None and self._decoder.last_cursor is not None:
            self._cursor = self._decoder.last_cursor
        accumulator = self.accumulator
        for event in out:
            if type(event) is not Warning or event.code not in ("retry", "resume"):
                if accumulator is not None:
                    accumulator.feed(event)
                if self.events is not None:
                    self.events.append(event)
            if type(event) is Finish:
                self.finished = True
        return out

    # -- results --------------------------------------------------------------------------

    def result(self) -> Result:
        """The unified result (final once the Finish was delivered; needs
        ``keep_result``)."""
        if self.accumulator is None:
            raise ValueError("result() needs keep_result=True")
        return self.accumulator.result()

    def native(self) -> dict[str, Any]:
        """The provider's own final object (needs ``keep_events``)."""
        if self.events is None:
            raise ValueError("native() needs keep_events=True")
        return get_dialect(self.dialect).rebuild(self.events)

    def cancelled(self) -> list[Event]:
        """The consumer stopped early: a ``failed`` Finish with a ``cancelled`` error."""
        if self.finished:
            return []
        finish = Finish(
            status="failed",
            reason=FinishReason(unified="cancelled", raw=None),
            error=ErrorInfo(kind="cancelled", message="the consumer cancelled the stream"),
        )
        self.finished = True
        if self.accumulator is not None:
            self.accumulator.feed(finish)
        return [finish]
