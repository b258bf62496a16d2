"""One emulated WebSocket connection, sans-I/O: the family's server, the scenarios, the
timing and the faults.

:class:`SocketEmulation` runs the family's server (:func:`polystream.realtime.open_server`)
and answers its turns from the emulator's scenarios (as an HTTP request is answered: the
first scenario that matches, a replayed capture, or the default reply). It decides when
each message leaves: the shell tells it the time (seconds since the connection opened)
with every client message (:meth:`SocketEmulation.receive`) and whenever it wakes
(:meth:`SocketEmulation.wake`), and sends what :meth:`SocketEmulation.due` gives.

Each reply is timed by its scenario's ``timing`` from the request that asked for it
(``first_event``, then ``delay`` between messages, ``audio_delay`` and ``audio_burst``
after audio deltas, ``recorded`` offsets, ``speed``), and faulted by its ``faults``: an
in-band ``error`` after N messages, ``close`` (the socket closes with a code),
``interrupt`` (the user speaks over a Realtime reply), ``http_error`` (the request is
refused with the family's error message). ``expire_after`` belongs to the scenario that
matches the connection (its model, no text). A family whose server sends keep-alives
(xAI's ``ping``) gets one every :attr:`~polystream.dialects._realtime.server.
SocketServer.keepalive` seconds from the connection's opening.

What a turn is answered with follows the family's ``answer``
(:class:`~polystream.dialects._socket_spec.SocketSpec`): the scenario's reply (a
Realtime or Responses reply; a Realtime reply that speaks is said aloud), the turn's
text spoken (text to speech), or the scenario's text as the transcript of the turn's
audio (speech to text).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import msgspec

from polystream.dialects import PROVIDERS
from polystream.dialects._realtime.server import (
    Close,
    Message,
    Outbound,
    Refusal,
    ReplyRun,
    Script,
    Turn,
)
from polystream.errors import RequestError
from polystream.events import RETRYABLE_KINDS, ErrorInfo
from polystream.realtime import SOCKET_SPECS, open_server
from polystream.scenario._emulator import Emulator, unknown_model_message
from polystream.scenario._format import Faults, Scenario, Timing
from polystream.scenario._reply import reply_id
from polystream.scenario._request import RequestSummary, summarize
from polystream.scenario._socket_reply import (
    DEFAULT_SPEECH,
    speech,
    spoken,
    transcript,
    turn_summary,
    verbatim,
    warm_up,
)

__all__ = ["EXPIRED_CLOSE", "REFUSED_CLOSE", "Send", "SocketEmulation"]

EXPIRED_CLOSE: Final = 1001
"""The close code after the lifetime error (going away)."""
REFUSED_CLOSE: Final = 1008
"""The close code after a connection is refused (no model, or an unknown one)."""


class Send(msgspec.Struct, frozen=True, kw_only=True):
    """What to do now: send a message, or close the socket.

    Fields:
        text: The message to send: a text, or bytes for a binary message (None for a
            close).
        close: The close code (None for a message).
        reason: The close reason.
    """

    text: str | bytes | None = None
    close: int | None = None
    reason: str = ""


class _Running:
    """A reply being written, and where its timing and faults stand."""

    __slots__ = (
        "at",
        "audio",
        "errored",
        "faults",
        "interrupted",
        "order",
        "run",
        "sent",
        "start",
        "timing",
    )

    def __init__(self, run: ReplyRun, scenario: Scenario | None, now: float, order: int) -> None:
        self.run = run
        self.timing = scenario.timing if scenario is not None else Timing()
        self.faults = scenario.faults if scenario is not None else Faults()
        self.order = order
        self.start = now
        self.sent = 0  # messages sent
        self.audio = 0  # audio messages sent
        self.errored = False
        self.interrupted = False
        self.at = self._time_of(0, None, now)  # when the next message is due

    def _time_of(self, position: int, last: Message | None, previous: float) -> float:
        """When the message at ``position`` is due, the one before it (``last``) sent
        at ``previous``."""
        timing = self.timing
        if timing.recorded is not None and position < len(timing.recorded):
            return max(self.start + timing.recorded[position] / timing.speed, previous)
        if position == 0 or last is None:
            return previous + timing.first_event / timing.speed
        if last.audio and timing.audio_delay is not None:
            wait = timing.audio_delay if self.audio % timing.audio_burst == 0 else 0.0
        else:
            wait = timing.delay
        return previous + wait / timing.speed

    def sent_one(self, message: Message) -> None:
        """``message`` was sent: when the next one is due."""
        self.sent += 1
        if message.audio:
            self.audio += 1
        then = self.at
        self.at = self._time_of(self.sent, message, then)
        if self.run.urgent:
            self.at = then


class SocketEmulation:
    """One emulated connection of a WebSocket family.

    Args:
        emulator: The emulator whose scenarios answer.
        family: The WebSocket family (``polystream.realtime.SOCKETS``).
        query: The connection URL's query parameters (``model``).
        created: The Unix time of the connection.
    """

    def __init__(
        self,
        emulator: Emulator,
        family: str,
        *,
        query: Mapping[str, str] | None = None,
        created: int = 0,
        token: str | None = None,
    ) -> None:
        self.emulator = emulator
        self.family = family
        self.spec = SOCKET_SPECS[family]
        self.created = created
        self.model = (query or {}).get("model", "")
        self.seed = f"{emulator.seed}:socket:{emulator.next_serial()}"
        options: dict[str, object] = {}
        if self.spec.context == "resumption" or self.spec.token_path is not None:
            # What the family's server keeps across connections (sessions, tokens).
            options["shared"] = emulator.socket_state(family)
        if token is not None:
            options["token"] = token
        self.server = open_server(
            family,
            self._reply,
            model=self.model,
            created=created,
            seed=self.seed,
            query=dict(query or {}),
            **options,
        )
        self.closed = False
        self._out: list[Send] = []
        self._runs: list[_Running] = []
        self._order = 0
        self._expire_at: float | None = None
        self._warn_at: float | None = None
        self._lifetime_pending = False
        self._ping_at: float | None = None

    # -- the shell's calls ---------------------------------------------------------------

    def start(self, now: float = 0.0) -> None:
        """The connection was accepted at ``now``."""
        provider = self.spec.provider
        if "model" in self.spec.query:
            refusal: Refusal | None = None
            if not self.model:
                refusal = Refusal(
                    status=400,
                    message="Missing required parameter: 'model'.",
                    code="missing_required_parameter",
                    param="model",
                )
            elif not self.emulator.model_known(self.model, provider):
                refusal = Refusal(
                    status=404,
                    message=unknown_model_message(PROVIDERS[provider].error_shape, self.model),
                    code="model_not_found",
                )
            if refusal is not None:
                self._out.append(Send(text=self._refused(refusal)))
                self._close(REFUSED_CLOSE, refusal.code or "")
                return
        if self.spec.setup_once:
            self._lifetime_pending = True  # chosen once the setup names the model
        else:
            self._lifetime(self.model, now)
        if self.server.keepalive is not None:
            self._ping_at = now + self.server.keepalive
        self._take(self.server.open(), now)

    def _lifetime(self, model: str, now: float) -> None:
        """The lifetime of the scenario that matches the connection (its model, no
        text), from ``now``."""
        summary = RequestSummary(dialect=self.family, provider=self.spec.provider, model=model)
        _, scenario = self.emulator.choose(summary, self._names())
        if scenario is not None and scenario.faults.expire_after is not None:
            after = scenario.faults.expire_after
            self._expire_at = now + after
            if self.server.warn_before is not None:
                self._warn_at = self._expire_at - min(self.server.warn_before, after / 2)

    def receive(self, message: str | bytes, now: float) -> None:
        """A client message arrived at ``now``."""
        if self.closed:
            return
        answer = self.server.receive(message)
        model = self.server.configured_model
        if self._lifetime_pending and model:
            self._lifetime_pending = False
            if not self.emulator.model_known(model, self.spec.provider):
                # Refused as the setup is read: the close says why (no message).
                shape = PROVIDERS[self.spec.provider].error_shape
                self._close(REFUSED_CLOSE, unknown_model_message(shape, model))
                return
            self._lifetime(model, now)
        for entry in self._runs:
            if entry.run.urgent:
                entry.at = min(entry.at, now)
        self._take(answer, now)
        self._sweep(now, self._out)

    def due(self, now: float) -> list[Send]:
        """What to send at ``now``, in order (a close is last)."""
        out, self._out = self._out, []
        while not self.closed:
            entry = self._next_due(now)
            ping = self._ping_at
            limit = now if self._expire_at is None else min(now, self._expire_at)
            if ping is not None and ping <= limit and (entry is None or ping <= entry.at):
                stamp = round((self.created + ping) * 1000)
                out.extend(Send(text=text) for text in self.server.ping(stamp))
                self._ping_at = ping + (self.server.keepalive or 0.0)
                continue
            warn = self._warn_at
            if warn is not None and warn <= now and (entry is None or warn <= entry.at):
                assert self._expire_at is not None
                out.extend(Send(text=t) for t in self.server.going_away(self._expire_at - warn))
                self._warn_at = None
                continue
            if entry is None:
                break
            self._step(entry, now, out)
        if not self.closed and self._expire_at is not None and now >= self._expire_at:
            out.extend(Send(text=text) for text in self.server.expire())
            code, reason = self.server.expiry_close
            self._close(code, reason, out)
        return out

    def end(self) -> None:
        """The connection ended (the client left, or the socket closed)."""
        self.closed = True
        self._runs.clear()
        self.server.closed()

    @property
    def wake(self) -> float | None:
        """When :meth:`due` next has something to send (None: only after a client
        message)."""
        if self.closed:
            return None
        if self._out:
            return 0.0
        times = [entry.at for entry in self._runs]
        if self._expire_at is not None:
            times.append(self._expire_at)
        if self._ping_at is not None:
            times.append(self._ping_at)
        if self._warn_at is not None:
            times.append(self._warn_at)
        return min(times) if times else None

    # -- replies ---------------------------------------------------------------------------

    def _names(self) -> tuple[str, ...]:
        """The names a scenario's ``match.dialect`` may give the connection's replies."""
        reply = self.spec.reply_dialect
        return (self.family,) if reply is None else (self.family, reply)

    def _reply(self, turn: Turn) -> Script | Refusal:
        """The server's replier: the scenario's answer to a turn (see the module
        docstring)."""
        if self.spec.answer != "reply":
            return self._media(turn)
        spec = self.spec
        provider = spec.provider
        dialect = spec.reply_dialect
        if dialect is not None and turn.body is not None:
            try:
                summary = summarize(dialect, turn.body)
            except RequestError as exc:
                return Refusal(
                    status=exc.status, message=exc.message, code=exc.code, param=exc.param
                )
        else:
            dialect = None
            summary = turn_summary(self.family, provider, turn)
        position, scenario = self.emulator.choose(summary, self._names())
        if not self.emulator.model_known(summary.model, provider, dialect):
            return Refusal(
                status=404,
                message=unknown_model_message(PROVIDERS[provider].error_shape, summary.model),
                code="model_not_found",
                param="model",
            )
        serial = self.emulator.next_serial()
        response_id = reply_id(summary.dialect, self.emulator.seed, serial)
        if not turn.generate:
            return Script(events=warm_up(summary, response_id, self.created))
        failure = self.emulator.failure(scenario, position)
        if failure is not None:
            return Refusal(status=failure.status, message=failure.message or "")
        if turn.say is not None:
            events = verbatim(turn.say, summary, response_id, self.created)
        else:
            events = self.emulator.reply_for(scenario, summary, response_id, self.created)
        if turn.audio is not None:
            events = spoken(events, turn.audio, scenario, summary.user_text)
        return Script(events=events, tag=scenario)

    def _media(self, turn: Turn) -> Script | Refusal:
        """The answer of a text-to-speech or speech-to-text turn."""
        summary = turn_summary(self.family, self.spec.provider, turn)
        position, scenario = self.emulator.choose(summary, self._names())
        failure = self.emulator.failure(scenario, position)
        if failure is not None:
            return Refusal(status=failure.status, message=failure.message or "")
        response_id = reply_id(self.family, self.emulator.seed, self.emulator.next_serial())
        if self.spec.answer == "speech":
            fmt = turn.audio or DEFAULT_SPEECH
            events = speech(summary, fmt, scenario, response_id, self.created)
        elif scenario is None:
            events = transcript(summary, turn.heard, response_id, self.created)
        else:
            events = self.emulator.reply_for(scenario, summary, response_id, self.created)
        return Script(events=events, tag=scenario)

    def _take(self, outbound: list[Outbound], now: float, out: list[Send] | None = None) -> None:
        target = self._out if out is None else out
        for item in outbound:
            if isinstance(item, str | bytes):
                target.append(Send(text=item))
            elif isinstance(item, Close):
                self._close(item.code, item.reason, target)
                return
            else:
                scenario = item.tag if isinstance(item.tag, Scenario) else None
                self._runs.append(_Running(item, scenario, now, self._order))
                self._order += 1

    def _next_due(self, now: float) -> _Running | None:
        limit = now if self._expire_at is None else min(now, self._expire_at)
        ready = [entry for entry in self._runs if entry.at <= limit]
        return min(ready, key=lambda entry: (entry.at, entry.order)) if ready else None

    def _step(self, entry: _Running, now: float, out: list[Send]) -> None:
        """Send the entry's next message, its faults first."""
        run, faults = entry.run, entry.faults
        if faults.close is not None and entry.sent >= faults.close.after and not run.done:
            self._close(faults.close.code, faults.close.reason, out)
            return
        interrupt = faults.interrupt
        if interrupt is not None and not entry.interrupted and entry.sent >= interrupt.after:
            entry.interrupted = True
            self._take(self.server.interrupt(run, cancel=interrupt.cancel), now, out)
            if not interrupt.cancel and interrupt.pause > 0:
                entry.at = max(entry.at, now) + interrupt.pause / entry.timing.speed
                return
        error = faults.error
        if error is not None and not entry.errored and entry.sent >= error.after:
            entry.errored = True
            run.fail(
                ErrorInfo(
                    kind=error.kind,
                    message=error.message,
                    retryable=error.kind in RETRYABLE_KINDS,
                    code=error.code,
                )
            )
        message = None if run.done else run.next()
        if message is not None and message.close is not None:
            self._close(message.close, message.reason, out)
            return
        if message is not None:
            out.append(Send(text=message.text))
            entry.sent_one(message)
        if run.done:
            self._finish(entry, now, out)

    def _finish(self, entry: _Running, now: float, out: list[Send]) -> None:
        self._runs.remove(entry)
        close = entry.faults.close
        if close is not None and entry.sent >= close.after:
            self._close(close.code, close.reason, out)
            return
        self._take(self.server.finished(entry.run), now, out)

    def _sweep(self, now: float, out: list[Send]) -> None:
        """End the replies a client message ended (a cancellation)."""
        for entry in [entry for entry in self._runs if entry.run.done]:
            if not self.closed:
                self._finish(entry, now, out)

    def _refused(self, refusal: Refusal) -> str:
        return self.server.error(
            refusal.status,
            refusal.message,
            code=refusal.code,
            param=refusal.param,
            kind=refusal.kind,
        )

    def _close(self, code: int, reason: str, out: list[Send] | None = None) -> None:
        (self._out if out is None else out).append(Send(close=code, reason=reason))
        self.closed = True
        self._runs.clear()
