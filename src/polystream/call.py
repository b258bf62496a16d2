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

Request bodies: JSON, or ``multipart/form-data`` when the built body holds file parts
(a transcription's audio, an image edit's image: their metadata in the body, their bytes
in ``files``). A dialect's ``raw`` framing (speech without ``stream_format``) asks for
the media itself, whose body the raw decoder reads. An agent session's stream can be an
existing session's (``session``): the call subscribes to it, and once the stream is
open the shell sends the call's input to the session (:meth:`StreamCall.take_send`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn
from urllib.parse import quote, urlencode, urlsplit

import msgspec

from polystream.accumulate import Accumulator, Result
from polystream.dialects import DialectDecoder, DialectSpec, RouteSpec, get_dialect
from polystream.errors import APIStatusError, RequestError
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
from polystream.wire.multipart import FormError, encode_form

__all__ = ["HttpRequest", "StreamCall", "holds_files", "route_path", "subscribe_route"]

_OUTPUT: Final = frozenset({BlockStart, Finish})


class HttpRequest(msgspec.Struct, frozen=True, kw_only=True):
    """An HTTP request for a shell to send.

    Fields:
        method: ``POST`` or ``GET``.
        url: The absolute URL.
        headers: Request headers (authentication included, and the body's
            ``content-type``).
        body: The body (JSON or a multipart form), or None.
    """

    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None = None


def route_path(dialect: str, path: str) -> str:
    """A route's path (under its provider's prefix, as :attr:`RouteSpec.path` is) as a
    path under the provider's base URL: without the official base URL's own path
    (OpenAI's and xAI's ``/v1``)."""
    base = urlsplit(provider_of(dialect).base_url).path.rstrip("/")
    if base and (path == base or path.startswith(base + "/")):
        return path[len(base) :]
    return path


def subscribe_route(spec: DialectSpec) -> RouteSpec | None:
    """The dialect's route that streams an existing session (``GET ...{id}...``, a
    route that always streams), or None."""
    for route in spec.routes:
        if route.method == "GET" and route.stream and "{id}" in route.path:
            return route
    return None


def holds_files(body: Mapping[str, Any]) -> bool:
    """Whether a built body holds a file part (``{"filename", ...}`` metadata, alone or
    in a list): it is then sent as a ``multipart/form-data`` form."""
    for value in body.values():
        for item in value if isinstance(value, list) else (value,):
            if isinstance(item, dict) and isinstance(item.get("filename"), str):
                return True
    return False


def _creates(spec: DialectSpec) -> bool:
    """Whether the dialect has a route that starts a stream with a POST (an agent
    session dialect without one streams only an existing session)."""
    return any(route.method == "POST" and route.stream is not False for route in spec.routes)


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
        framing: One of the dialect's framings: for ``gemini_generate`` ``sse`` or
            ``json_array``; for ``openai_speech`` ``sse`` or ``raw`` (the audio itself:
            the request is built without asking for an event stream, and the raw
            decoder is given the response's ``Content-Type`` and ``Content-Length`` and
            the request's fields in :attr:`DialectSpec.raw_options`).
        rng: Randomness for backoff jitter.
        extra_headers: Headers sent with every request of the call.
        native_body: The body ``request`` was parsed from, in this same dialect: sent
            as it came, every field of it, but for those the call decides (the model,
            streaming; see :func:`polystream.request.codecs.pass_through_body`).
        files: The bytes of the file parts the built body names, by form field: a body
            holding file parts (see :func:`holds_files`) is sent as
            ``multipart/form-data``.
        native_form: The ``multipart/form-data`` body ``native_body`` was read from, as
            ``(content type, bytes)``: sent byte for byte when the call decides nothing
            different (the same model, streaming as asked), else written again from
            ``native_body`` and ``files``.
        session: An existing agent session to stream (the dialect's subscribe route,
            :func:`subscribe_route`); the request's input, if any, is sent to the
            session once the stream is open (:meth:`take_send`).
        query: Query parameters of the subscribe request.

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
        files: Mapping[str, bytes] | None = None,
        native_form: tuple[str, bytes] | None = None,
        session: str | None = None,
        query: Mapping[str, str] | None = None,
    ) -> None:
        self.spec = get_dialect(dialect)
        self.dialect = self.spec.name
        self._native_body = native_body
        self._files = dict(files or {})
        self._native_form = native_form
        self.session = session
        self._query = dict(query or {})
        # A raw framing's body is the media itself: the request asks for no event stream.
        self.request = msgspec.structs.replace(request, stream=framing != "raw")
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
        self._body: dict[str, Any] | None = None  # the body sent (for the raw decoder)
        self._send: HttpRequest | None = None  # the input for a subscribed session
        self._send_ready = False
        # Built now so that a request the dialect cannot express fails at construction
        # (RequestError), before anything is sent.
        self._first_request = self._build_initial()

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
        """The call's first request (again, for a retry: the same request)."""
        return self._first_request

    def _build_initial(self) -> HttpRequest:
        if self.session is not None:
            return self._subscribe(self.session)
        if not _creates(self.spec):
            raise RequestError(
                f"{self.dialect} streams an existing session: give the session's id",
                param="session",
            )
        native = build_request(self.dialect, self.request, framing=self.framing)
        body = native.body
        if self._native_body is not None:
            body = pass_through_body(self.dialect, self._native_body, body)
        self._body = body
        url = self.base_url + native.path
        if native.query:
            url += "?" + urlencode(native.query)
        accept = "*/*" if self.framing == "raw" else "text/event-stream"
        if self._native_form is not None and body == self._native_body:
            content_type, content = self._native_form  # (as the client sent it)
        elif holds_files(body):
            try:
                content_type, content = encode_form(body, self._files)
            except FormError as exc:
                raise RequestError(str(exc), param="files") from None
        else:
            content_type, content = "application/json", msgspec.json.encode(body)
        headers = {"content-type": content_type, "accept": accept}
        headers.update(auth_headers(self.dialect, self._api_key))
        headers.update(self._headers)
        return HttpRequest(method="POST", url=url, headers=headers, body=content)

    def _subscribe(self, session: str) -> HttpRequest:
        """The request that streams an existing session; the session's input is made
        ready to send once the stream is open."""
        route = subscribe_route(self.spec)
        if route is None:
            raise RequestError(f"{self.dialect} has no session stream", param="session")
        sid = quote(session, safe="")
        url = self.base_url + route_path(self.dialect, route.path).replace("{id}", sid)
        if self._query:
            url += "?" + urlencode(self._query)
        auth = auth_headers(self.dialect, self._api_key)
        request = self.request
        if request.messages or request.system or request.extra:
            native = build_request(self.dialect, msgspec.structs.replace(request, stream=False))
            if "{session_id}" not in native.path:
                raise RequestError(
                    f"{self.dialect} takes input only in the request that creates a session: "
                    "with a session's id, the call only streams it",
                    param="messages",
                )
            self._send = HttpRequest(
                method="POST",
                url=self.base_url + native.path.replace("{session_id}", sid),
                headers={"content-type": "application/json", **auth, **self._headers},
                body=msgspec.json.encode(native.body),
            )
        headers = {"accept": "text/event-stream", **auth, **self._headers}
        return HttpRequest(method="GET", url=url, headers=headers)

    def take_send(self) -> HttpRequest | None:
        """The request that sends the call's input to the session it streams (see
        ``session``), once: after the stream opened (:meth:`on_open`), so that no event
        of the turn it starts is missed. The shell sends it and hands the answer to
        :meth:`on_send`. None when there is nothing (more) to send."""
        if not self._send_ready:
            return None
        request, self._send = self._send, None
        return request

    def on_send_error(self, message: str) -> NoReturn:
        """The input could not be sent (the connection failed).

        Raises:
            TransportError: Always: the session did not get its input, and the stream
                would wait for nothing.
        """
        from polystream.errors import TransportError

        raise TransportError(f"sending the input to session {self.session}: {message}")

    def on_send(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        """The session's answer to the input sent (:meth:`take_send`).

        Raises:
            APIStatusError: The session refused the input (the stream should be closed).
        """
        if 200 <= status < 300:
            return
        parsed: Any
        try:
            parsed = decode_bounded(body, what="the error body") if body else None
        except msgspec.DecodeError:
            parsed = body.decode("utf-8", "replace")
        info = error_from_body(status, parsed)
        lower = {k.lower(): v for k, v in headers.items()}
        raise APIStatusError(
            f"sending the input to session {self.session}: {info.message}",
            status_code=status,
            kind=info.kind,
            body=parsed,
            request_id=lower.get(self.provider.request_id_header) or lower.get("x-request-id"),
        )

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
            spec = self.spec
            if len(spec.framings) > 1:
                options["framing"] = self.framing
            if self.framing == "raw":
                options.update(self._raw_options(lower))
            self._decoder = spec.decoder(**options)
        if self._send is not None:
            self._send_ready = True
        # A resumed stream continues on the same decoder (see reset_framing).

    def _raw_options(self, headers: Mapping[str, str]) -> dict[str, Any]:
        """The raw decoder's options: the response's media type and length (a body the
        server compressed has another length), and the request's fields the dialect
        names (:attr:`DialectSpec.raw_options`)."""
        options: dict[str, Any] = {"content_type": headers.get("content-type")}
        length = headers.get("content-length", "")
        if length.isdigit() and headers.get("content-encoding", "identity") in ("identity", ""):
            options["expected_length"] = int(length)
        body = self._body or {}
        for option, name in self.spec.raw_options.items():
            value = body.get(name)
            if isinstance(value, str):
                options[option] = value
        return options

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
