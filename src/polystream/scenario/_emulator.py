"""The emulator's decisions, sans-I/O: request bytes in, an :class:`Answer` out.

:class:`Emulator` holds the scenarios, the recorded captures, the per-scenario request
counters (for ``http_error.times``) and the store of replies that can be fetched again
or resumed (OpenAI/xAI ``GET /v1/responses/{id}``, Interactions
``GET /v1beta/interactions/{id}``). For each request it decides everything: the status,
the headers, and a :class:`~polystream.scenario.DeliveryPlan` of timed chunks. The
ASGI shell (:mod:`polystream.server`) only reads the body, calls :meth:`Emulator.answer`,
sleeps and writes.
"""

from __future__ import annotations

import fnmatch
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from polystream.decoding import StreamDecoder
from polystream.dialects import DIALECTS, PROVIDERS, Loss, get_dialect
from polystream.dialects._errors import status_for
from polystream.errors import PolystreamError
from polystream.events import Event
from polystream.scenario._errors import (
    ANTHROPIC_SHAPE,
    GOOGLE_SHAPE,
    ErrorAnswer,
    error_answer,
    provider_of_path,
)
from polystream.scenario._format import Faults, HttpError, Scenario, ScenarioError, Timing
from polystream.scenario._media_reply import media_events
from polystream.scenario._media_request import MEDIA_FAMILIES
from polystream.scenario._plan import (
    RESUMABLE,
    Chunk,
    DeliveryPlan,
    Frame,
    frames_after,
    plan_delivery,
    render_frames,
)
from polystream.scenario._reply import reply_events, reply_id, retarget, strip_usage
from polystream.scenario._request import RequestError, RequestSummary, summarize
from polystream.scenario._sessions import Sessions
from polystream.wire.jsondepth import decode_body

__all__ = [
    "LOSS_HEADER",
    "MAX_BODY_SIZE",
    "MAX_STORED",
    "Answer",
    "Emulator",
    "StoredReply",
    "error_to_answer",
    "json_answer",
    "loss_header",
    "text_answer",
    "unknown_model_message",
]

MAX_BODY_SIZE: Final = 8 * 1024 * 1024
"""Largest request body accepted (8 MiB); larger gets 413 in the provider's shape.
Generous for text prompts; inline images and files belong in the providers' file APIs."""

MAX_STORED: Final = 256
"""Replies kept for ``GET`` and resume (oldest dropped first), bounding memory."""

LOSS_HEADER: Final = "x-polystream-losses"
"""Response header listing what the target dialect could not carry from the reply
(the encoder's loss report, e.g. ``citation, block:server_tool_call``)."""

_LOSS_HEADER_MAX: Final = 1024
_encode_json: Final = msgspec.json.Encoder()
_SSE_HEADERS: Final = {
    # Every event must leave at once: no caching, and no buffering by a proxy in
    # front of the server (nginx honours X-Accel-Buffering).
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}


class Answer(msgspec.Struct, kw_only=True):
    """What to send back.

    Fields:
        status: The HTTP status.
        headers: Response headers (content type included).
        plan: The body, as timed chunks (one chunk for a JSON body).
    """

    status: int
    headers: dict[str, str]
    plan: DeliveryPlan


class StoredReply(msgspec.Struct, kw_only=True):
    """A reply kept for ``GET`` and resume.

    Fields:
        dialect: Its dialect.
        frames: Its complete stream, as wire events with cursors.
        native: The provider's final object (the non-streaming body).
        timing: The timing to replay it with.
    """

    dialect: str
    frames: list[Frame]
    native: dict[str, Any]
    timing: Timing


def error_to_answer(answer: ErrorAnswer) -> Answer:
    """An error body as an :class:`Answer` sent at once."""
    return Answer(
        status=answer.status,
        headers=answer.headers,
        plan=DeliveryPlan(chunks=[Chunk(at=0.0, data=answer.body)], frames=1),
    )


class Emulator:
    """The provider emulator's state and decisions.

    Args:
        scenarios: Scenarios, tried in order; the first that matches answers.
        captures: Recorded streams by name, for scenarios whose ``reply.replay``
            names them (bytes of any dialect, detected automatically).
        replays: Recorded streams answering, in turn, every request no scenario
            matches (``polystream serve --replay FILE``).
        any_model: Accept every model name (otherwise a model outside the
            provider's families, and not named by a scenario, is a 404).
        seed: Seed of the deterministic ids.

    Not thread-safe: the ASGI shell calls it from its event loop only.

    Raises:
        ScenarioError: A scenario names a capture that was not given, or a capture
            does not decode.
    """

    def __init__(
        self,
        scenarios: Sequence[Scenario] = (),
        *,
        captures: Mapping[str, bytes] | None = None,
        replays: Sequence[bytes] = (),
        any_model: bool = False,
        seed: str = "polystream",
    ) -> None:
        self.scenarios = list(scenarios)
        self.any_model = any_model
        self.seed = seed
        self._captures = {
            name: _decode_capture(data, name) for name, data in (captures or {}).items()
        }
        self._replays = [_decode_capture(data, f"replay #{n}") for n, data in enumerate(replays)]
        for scenario in self.scenarios:
            name = scenario.reply.replay if scenario.reply is not None else None
            if name is not None and name not in self._captures:
                raise ScenarioError(f"scenario {scenario.name or '?'}: capture {name!r} not loaded")
        self._served = [0] * len(self.scenarios)
        self._serial = 0
        self._replay_turn = 0
        self._store: OrderedDict[str, StoredReply] = OrderedDict()
        self.sessions = Sessions()
        self._socket_state: dict[str, dict[str, Any]] = {}

    # -- requests ---------------------------------------------------------------------

    def answer(
        self,
        dialect: str,
        body: bytes,
        *,
        content_type: str | None = None,
        model: str | None = None,
        stream: bool | None = None,
        framing: str | None = None,
        created: int = 0,
        form: dict[str, Any] | None = None,
        operation: str | None = None,
    ) -> Answer:
        """Answer one request to a generating endpoint.

        Args:
            dialect: The endpoint's dialect.
            body: The raw request body.
            content_type: The request's ``Content-Type`` header.
            model: The model named in the URL (Gemini).
            stream: Whether the endpoint streams, when the URL decides (Gemini).
            framing: ``sse`` or ``json_array`` (Gemini ``alt=sse`` or not).
            created: The current Unix time, for ``created`` fields.
            form: The form dict of a ``multipart/form-data`` body (read by the shell
                with :func:`polystream.wire.multipart.decode_form`), read instead of
                ``body``.
            operation: The route's operation (images: ``generation`` or ``edit``).
        """
        provider = DIALECTS[dialect].provider
        self._serial += 1
        request_id = f"req_{reply_id('', self.seed, self._serial)[:20]}"
        parsed = form if form is not None else self._json(dialect, body, content_type, request_id)
        if isinstance(parsed, Answer):
            return parsed
        try:
            summary = summarize(dialect, parsed, model=model, stream=stream, operation=operation)
        except RequestError as exc:
            return self._request_error(provider, dialect, exc, request_id)
        position, scenario = self._select(summary)
        if not self._model_known(summary.model, provider, dialect):
            return self._error(
                provider,
                dialect,
                404,
                _unknown_model(dialect, summary.model),
                request_id,
                code="model_not_found",
            )
        faults = scenario.faults if scenario is not None else Faults()
        timing = scenario.timing if scenario is not None else Timing()
        failed = self._http_error(scenario, position, provider, dialect, request_id)
        if failed is not None:
            return failed
        response_id = reply_id(dialect, self.seed, self._serial)
        events = self._events(scenario, summary, response_id, created)
        headers = {"x-request-id": request_id, "request-id": request_id}
        media = summary.media
        if media is not None and media.framing == "raw":
            return self._raw(summary, events, faults, timing, headers)
        if DIALECTS[dialect].family == "agent_session":
            self.sessions.open(dialect, response_id)
            if not summary.stream:
                # A session created without streaming runs its first turn on its stream
                # endpoint, which delivers it with the scenario's timing and faults.
                self.sessions.queue(
                    dialect,
                    response_id,
                    self._stream_answer(dialect, events, faults, timing, dict(headers)),
                )
                faults, timing = Faults(), Timing()
        if not summary.stream:
            return self._unary(
                summary=summary,
                events=events,
                response_id=response_id,
                faults=faults,
                timing=timing,
                headers=headers,
            )
        if DIALECTS[dialect].family == "chat" and not summary.include_usage:
            # Chat Completions sends the usage chunk only when asked
            # (stream_options.include_usage); the non-streaming body always has usage.
            events = strip_usage(events)
        return self._stream_answer(
            dialect, events, faults, timing, headers, framing=framing, response_id=response_id
        )

    def _stream_answer(
        self,
        dialect: str,
        events: list[Event],
        faults: Faults,
        timing: Timing,
        headers: dict[str, str],
        *,
        framing: str | None = None,
        response_id: str | None = None,
    ) -> Answer:
        """A streamed answer: the events encoded, faulted and timed."""
        losses: list[Loss] = []
        frames = render_frames(
            dialect,
            events,
            framing=framing,
            error=faults.error,
            terminal=not faults.no_terminal,
            losses=losses,
        )
        if losses:
            headers[LOSS_HEADER] = loss_header(losses)
        if dialect in RESUMABLE and response_id is not None:
            full = frames
            if faults.no_terminal:
                full = render_frames(dialect, events, framing=framing, error=faults.error)
            # The stored final object is rebuilt from the stored stream, so a reply that
            # failed in-band is a failed response when fetched again.
            self._keep(
                response_id,
                StoredReply(
                    dialect=dialect, frames=full, native=_native(dialect, full), timing=timing
                ),
            )
        sse = framing != "json_array"
        headers |= _SSE_HEADERS
        headers["content-type"] = "text/event-stream" if sse else "application/json"
        plan = plan_delivery(frames, timing=timing, faults=faults, sse=sse)
        return Answer(status=200, headers=headers, plan=plan)

    def _raw(
        self,
        summary: RequestSummary,
        events: list[Event],
        faults: Faults,
        timing: Timing,
        headers: dict[str, str],
    ) -> Answer:
        """A body that is the audio file itself (speech without ``stream_format: sse``),
        sent as the encoder writes it. It cannot carry an error: an in-band error fault
        fails the request with its status, as a unary answer does."""
        if faults.error is not None:
            return self._unary(
                summary=summary,
                events=events,
                response_id="",
                faults=faults,
                timing=timing,
                headers=headers,
            )
        frames = render_frames(
            summary.dialect, events, framing="raw", terminal=not faults.no_terminal
        )
        media = summary.media
        headers["content-type"] = (media.mime_type if media is not None else None) or (
            "application/octet-stream"
        )
        plan = plan_delivery(frames, timing=timing, faults=faults, sse=False)
        return Answer(status=200, headers=headers, plan=plan)

    def send(
        self,
        dialect: str,
        session_id: str,
        body: bytes,
        *,
        content_type: str | None = None,
        created: int = 0,
    ) -> Answer:
        """Input sent to a session (Anthropic ``POST /v1/sessions/{id}/events``): the
        session's turn is queued for its stream; the answer lists the events sent, each
        with its id and ``processed_at``. An ``http_error`` fault fails this request
        (no turn is queued); the other faults and the timing apply to the turn's stream.
        """
        provider = DIALECTS[dialect].provider
        self._serial += 1
        request_id = f"req_{reply_id('', self.seed, self._serial)[:20]}"
        parsed = self._json(dialect, body, content_type, request_id)
        if isinstance(parsed, Answer):
            return parsed
        try:
            summary = summarize(dialect, parsed)
        except RequestError as exc:
            return self._request_error(provider, dialect, exc, request_id)
        position, scenario = self._select(summary)
        failed = self._http_error(scenario, position, provider, dialect, request_id)
        if failed is not None:
            return failed
        faults = scenario.faults if scenario is not None else Faults()
        timing = scenario.timing if scenario is not None else Timing()
        response_id = reply_id(dialect, self.seed, self._serial)
        events = self._events(scenario, summary, response_id, created)
        headers = {"x-request-id": request_id, "request-id": request_id}
        turn = self._stream_answer(dialect, events, faults, timing, dict(headers))
        self.sessions.queue(dialect, session_id, turn)
        sent = parsed.get("events") if isinstance(parsed, dict) else None
        stamp = _iso(created)
        data = [
            {
                **event,
                "id": f"sevt_{reply_id('', self.seed, self._serial)[:16]}{n}",
                "processed_at": stamp,
            }
            for n, event in enumerate(sent if isinstance(sent, list) else [])
            if isinstance(event, dict)
        ]
        answer = json_answer({"data": data})
        answer.headers |= headers
        return answer

    def subscribe(self, dialect: str, session_id: str) -> Answer | None:
        """A session's stream: its next queued turn, or None when none is queued yet
        (the shell then waits, see :meth:`stream_headers`). A session of a dialect that
        creates its sessions itself, and that was never created here, is a 404."""
        creates = any(route.action == "create" for route in DIALECTS[dialect].routes)
        if creates and not self.sessions.known(dialect, session_id):
            return self._error(
                DIALECTS[dialect].provider,
                dialect,
                404,
                f"Session with id '{session_id}' not found.",
                "req_subscribe",
            )
        self.sessions.open(dialect, session_id)
        return self.sessions.next_turn(dialect, session_id)

    @staticmethod
    def stream_headers() -> dict[str, str]:
        """The headers of a session stream that waits for its turn (sent at once)."""
        return {**_SSE_HEADERS, "content-type": "text/event-stream"}

    def reject(self, dialect: str, status: int, message: str) -> Answer:
        """Refuse a request to ``dialect``'s endpoint in its provider's shape (the
        shell's own refusals: a malformed multipart form)."""
        return error_to_answer(
            error_answer(DIALECTS[dialect].provider, status, message, dialect=dialect)
        )

    def retrieve(
        self,
        dialect: str,
        response_id: str,
        *,
        stream: bool = False,
        cursor: int | str | None = None,
    ) -> Answer:
        """``GET`` a stored reply: the final object, or its stream after ``cursor``.

        Args:
            dialect: The endpoint's dialect (``*_responses`` or ``gemini_interactions``).
            response_id: The reply id.
            stream: Stream the events instead of returning the final object.
            cursor: OpenAI ``starting_after`` (int) or Interactions ``last_event_id``.
        """
        provider = DIALECTS[dialect].provider
        stored = self._store.get(response_id)
        if stored is None or stored.dialect != dialect:
            noun = "Interaction" if DIALECTS[dialect].family == "interactions" else "Response"
            return self._error(
                provider, dialect, 404, f"{noun} with id '{response_id}' not found.", "req_retrieve"
            )
        if not stream:
            return json_answer(stored.native, Timing(), Faults())
        frames = frames_after(stored.frames, cursor)
        if frames is None:
            return self._error(
                provider,
                dialect,
                400,
                f"last_event_id '{cursor}' is not an event of this interaction.",
                "req_retrieve",
            )
        headers = dict(_SSE_HEADERS)
        headers["content-type"] = "text/event-stream"
        plan = plan_delivery(frames, timing=stored.timing, faults=Faults(), sse=True)
        return Answer(status=200, headers=headers, plan=plan)

    def unknown_path(self, path: str, method: str, *, allowed: bool = False) -> Answer:
        """Answer a path no endpoint serves (404), or a known path with the wrong
        method (405), in the shape of the provider whose prefix it has."""
        provider = provider_of_path(path)
        if allowed:
            return error_to_answer(
                error_answer(provider, 405, f"Method {method} not allowed for {path}.")
            )
        shape = PROVIDERS[provider].error_shape if provider is not None else None
        message = f"Unknown request URL: {method} {path}. Please check the URL and the method."
        if shape == ANTHROPIC_SHAPE:
            message = "Not Found"
        elif shape == GOOGLE_SHAPE:
            message = f"The requested URL {path} was not found on this server."
        return error_to_answer(error_answer(provider, 404, message, code="unknown_url"))

    def too_large(self, provider: str | None, dialect: str | None) -> Answer:
        """Answer a body over :data:`MAX_BODY_SIZE` (413, provider's shape)."""
        return error_to_answer(
            error_answer(
                provider,
                413,
                f"Request too large: the body exceeds the limit of {MAX_BODY_SIZE} bytes.",
                dialect=dialect,
            )
        )

    # -- WebSocket replies (see polystream.scenario._sockets) -----------------------------

    def mint_token(self, family: str, body: bytes, now: float) -> Answer:
        """Answer a request that mints an ephemeral token of the WebSocket family
        ``family`` (its descriptor's ``token_path``), the token kept for its servers."""
        from polystream.dialects._sockets import mint_token

        try:
            parsed = msgspec.json.decode(body) if body else {}
        except msgspec.DecodeError:
            parsed = None
        status, answer = mint_token(family, self.socket_state(family), parsed, now)
        out = json_answer(answer)
        out.status = status
        return out

    def socket_state(self, family: str) -> dict[str, Any]:
        """What the WebSocket family's emulated server keeps across connections
        (resumable sessions, ephemeral tokens): one dict per family, owned by its
        server."""
        return self._socket_state.setdefault(family, {})

    def next_serial(self) -> int:
        """A new serial number (of a request, or of a WebSocket connection), from which
        deterministic ids derive."""
        self._serial += 1
        return self._serial

    def choose(
        self, summary: RequestSummary, names: Sequence[str] = ()
    ) -> tuple[int | None, Scenario | None]:
        """The first scenario that matches a request (its ``match.dialect`` may name
        ``summary.dialect`` or any of ``names``), and its position; (None, None) when
        none does."""
        return self._select(summary, names)

    def model_known(self, model: str, provider: str, dialect: str | None = None) -> bool:
        """Whether ``model`` is served (see "Models" in docs/emulator.md); ``dialect``
        None: by the provider's families and the scenarios only."""
        return self._model_known(model, provider, dialect)

    def failure(self, scenario: Scenario | None, position: int | None) -> HttpError | None:
        """Count a request against its scenario; the scenario's ``http_error``, if it
        is due for this request."""
        if scenario is None or position is None:
            return None
        self._served[position] += 1
        failure = scenario.faults.http_error
        if failure is None:
            return None
        if failure.times is not None and self._served[position] > failure.times:
            return None
        return failure

    def reply_for(
        self,
        scenario: Scenario | None,
        summary: RequestSummary,
        response_id: str,
        created: int = 0,
    ) -> list[Event]:
        """The unified events of the reply to a request: the scenario's, a replayed
        capture's, or the default reply's."""
        return self._events(scenario, summary, response_id, created)

    # -- internals ----------------------------------------------------------------------

    def _error(
        self,
        provider: str,
        dialect: str,
        status: int,
        message: str,
        request_id: str,
        *,
        code: str | None = None,
    ) -> Answer:
        return error_to_answer(
            error_answer(
                provider, status, message, dialect=dialect, code=code, request_id=request_id
            )
        )

    def _json(self, dialect: str, body: bytes, content_type: str | None, request_id: str) -> Any:
        """The parsed JSON body, or the error :class:`Answer` refusing it."""
        provider = DIALECTS[dialect].provider
        if content_type is not None and "json" not in content_type.lower():
            return self._error(
                provider,
                dialect,
                400,
                f"Invalid Content-Type header ({content_type}), expected application/json.",
                request_id,
            )
        try:
            return decode_body(body)
        except msgspec.DecodeError:
            return self._error(provider, dialect, 400, _bad_json(dialect), request_id)

    def _request_error(
        self, provider: str, dialect: str, exc: RequestError, request_id: str
    ) -> Answer:
        return error_to_answer(
            error_answer(
                provider,
                exc.status,
                exc.message,
                dialect=dialect,
                param=exc.param,
                code=exc.code,
                request_id=request_id,
            )
        )

    def _http_error(
        self,
        scenario: Scenario | None,
        position: int | None,
        provider: str,
        dialect: str,
        request_id: str,
    ) -> Answer | None:
        """Count the request against its scenario; its ``http_error`` answer, if due."""
        failure = self.failure(scenario, position)
        if failure is None:
            return None
        return error_to_answer(
            error_answer(
                provider,
                failure.status,
                failure.message,
                dialect=dialect,
                retry_after=failure.retry_after,
                request_id=request_id,
            )
        )

    def _select(
        self, summary: RequestSummary, names: Sequence[str] = ()
    ) -> tuple[int | None, Scenario | None]:
        dialects = (summary.dialect, *names)
        for position, scenario in enumerate(self.scenarios):
            if any(
                scenario.matches(
                    dialect=dialect,
                    provider=summary.provider,
                    model=summary.model,
                    user_text=summary.user_text,
                    has_tools=summary.has_tools,
                    has_tool_result=summary.has_tool_result,
                )
                for dialect in dialects
            ):
                return position, scenario
        return None, None

    def _model_known(self, model: str, provider: str, dialect: str | None) -> bool:
        spec = DIALECTS[dialect] if dialect is not None else None
        if self.any_model or self._replays:
            return True
        if not model and spec is not None and spec.family == "agent_session":
            return True  # (a session names an agent, not always a model)
        if provider in PROVIDERS and PROVIDERS[provider].serves(model):
            return True
        if (
            spec is not None
            and spec.reply.model_prefixes
            and model.startswith(spec.reply.model_prefixes)
        ):
            return True
        return any(
            s.match.model is not None and fnmatch.fnmatchcase(model, s.match.model)
            for s in self.scenarios
        )

    def _events(
        self, scenario: Scenario | None, summary: RequestSummary, response_id: str, created: int
    ) -> list[Event]:
        reply = scenario.reply if scenario is not None else None
        recorded: list[Event] | None = None
        spec = DIALECTS.get(summary.dialect)
        family = spec.family if spec is not None else None
        if reply is not None and reply.replay is not None:
            recorded = self._captures[reply.replay]
        elif scenario is None and self._replays and family not in MEDIA_FAMILIES:
            recorded = self._replays[self._replay_turn % len(self._replays)]
            self._replay_turn += 1
        if recorded is not None:
            return retarget(
                recorded, dialect=summary.dialect, response_id=response_id, model=summary.model
            )
        chunking = scenario.chunking if scenario is not None else None
        if family in MEDIA_FAMILIES:
            return media_events(reply, summary, created=created, chunking=chunking)
        return reply_events(
            reply, summary, response_id=response_id, created=created, chunking=chunking
        )

    def _unary(
        self,
        *,
        summary: RequestSummary,
        events: list[Event],
        response_id: str,
        faults: Faults,
        timing: Timing,
        headers: dict[str, str],
    ) -> Answer:
        dialect = summary.dialect
        if faults.error is not None:
            # A non-streaming call cannot fail after its 200: it fails with the
            # status the provider uses for that cause.
            errors = DIALECTS[dialect].errors
            status = status_for(faults.error.kind, errors)
            if status in (499, 502):
                # A cancellation, or a cause with no status of its own (a malformed or
                # cut stream): a non-streaming call reports it as the server's failure.
                status = status_for("server", errors)
            return error_to_answer(
                error_answer(
                    summary.provider,
                    status,
                    faults.error.message,
                    dialect=dialect,
                    kind=faults.error.kind,
                )
            )
        losses: list[Loss] = []
        native = _rebuild(dialect, events, losses=losses)
        if losses:
            headers[LOSS_HEADER] = loss_header(losses)
        media = summary.media
        if media is not None and media.response_format == "text":
            # (A transcription asked for as text is the transcript alone.)
            text = native.get("text")
            answer = text_answer(text if isinstance(text, str) else "", timing, faults)
            answer.headers |= headers
            return answer
        if dialect in RESUMABLE:
            frames = render_frames(dialect, events)
            self._keep(
                response_id,
                StoredReply(dialect=dialect, frames=frames, native=native, timing=timing),
            )
            if summary.background:
                native = _pending(native, dialect)
        answer = json_answer(native, timing, faults)
        answer.headers |= headers
        return answer

    def _keep(self, response_id: str, stored: StoredReply) -> None:
        self._store[response_id] = stored
        native_id = stored.native.get("id")
        if isinstance(native_id, str) and native_id != response_id:
            self._store[native_id] = stored
        while len(self._store) > MAX_STORED:
            self._store.popitem(last=False)


def json_answer(
    native: dict[str, Any], timing: Timing | None = None, faults: Faults | None = None
) -> Answer:
    """A JSON body as an :class:`Answer` (timing and drop faults applied)."""
    body = _encode_json.encode(native)
    plan = plan_delivery(
        [Frame(data=body)], timing=timing or Timing(), faults=faults or Faults(), sse=False
    )
    return Answer(status=200, headers={"content-type": "application/json"}, plan=plan)


def text_answer(text: str, timing: Timing | None = None, faults: Faults | None = None) -> Answer:
    """A plain-text body as an :class:`Answer` (timing and drop faults applied)."""
    plan = plan_delivery(
        [Frame(data=text.encode("utf-8"))],
        timing=timing or Timing(),
        faults=faults or Faults(),
        sse=False,
    )
    return Answer(status=200, headers={"content-type": "text/plain; charset=utf-8"}, plan=plan)


def _iso(created: int) -> str:
    """A Unix time as the ISO 8601 text Anthropic's session events carry."""
    return datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def loss_header(losses: Iterable[Loss]) -> str:
    """The ``x-polystream-losses`` value: what the encoder could not carry, each kind
    once, in order (bounded, ASCII)."""
    seen = dict.fromkeys(loss.what for loss in losses)
    text = ", ".join(seen)
    if len(text) > _LOSS_HEADER_MAX:
        text = text[: _LOSS_HEADER_MAX - 3] + "..."
    return text.encode("ascii", "replace").decode("ascii")


def _rebuild(
    dialect: str,
    events: Iterable[Event],
    framing: str | None = None,
    losses: list[Loss] | None = None,
) -> dict[str, Any]:
    """The provider's final object for a reply, as its non-streaming endpoint returns it.

    Rebuilt from the reply's own wire stream (encode, then decode with the dialect's
    decoder), so the unary body always agrees with the streamed answer and carries the
    dialect's native values (finish reason, usage) exactly as the stream states them.
    """
    frames = render_frames(dialect, list(events), framing=framing, losses=losses)
    return _native(dialect, frames)


def _native(dialect: str, frames: list[Frame]) -> dict[str, Any]:
    """Decode a dialect's own wire frames and rebuild its final object."""
    info = get_dialect(dialect)
    decoder = info.decoder()
    decoded = decoder.feed(b"".join(frame.data for frame in frames)) + decoder.close()
    return info.rebuild(decoded)


def _pending(native: dict[str, Any], dialect: str) -> dict[str, Any]:
    """The object a ``background: true`` create returns before the reply exists."""
    pending = dict(native)
    if DIALECTS[dialect].family == "interactions":
        pending["status"] = "in_progress"
        for key in ("outputs", "steps", "usage"):
            pending.pop(key, None)
        return pending
    pending["status"] = "queued"
    pending["output"] = []
    pending["usage"] = None
    if "completed_at" in pending:
        pending["completed_at"] = None
    return pending


def _decode_capture(data: bytes, name: str) -> list[Event]:
    decoder = StreamDecoder("auto")
    try:
        events = decoder.feed(data) + decoder.close()
    except PolystreamError as exc:
        raise ScenarioError(f"capture {name}: {exc}") from None
    return events


def _bad_json(dialect: str) -> str:
    shape = DIALECTS[dialect].errors.shape
    if shape == GOOGLE_SHAPE:
        return "Invalid JSON payload received. Unexpected token."
    if shape == ANTHROPIC_SHAPE:
        return "There was an error parsing the body of your request: invalid JSON."
    return (
        "We could not parse the JSON body of your request. (HINT: This likely means you "
        "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, "
        "but what was sent was not valid JSON."
    )


def _unknown_model(dialect: str, model: str) -> str:
    return unknown_model_message(DIALECTS[dialect].errors.shape, model)


def unknown_model_message(shape: str, model: str) -> str:
    """What a provider of the error ``shape`` says of a model it does not serve."""
    if shape == GOOGLE_SHAPE:
        return (
            f"models/{model} is not found for API version v1beta, or is not supported for "
            "this method."
        )
    if shape == ANTHROPIC_SHAPE:
        return f"model: {model}"
    return f"The model `{model}` does not exist or you do not have access to it."
