"""The Gemini Live server, sans-I/O: what the emulator runs for one ``gemini_live``
connection.

* The first message must be the ``setup`` (else the connection closes 1007); it is
  answered with ``setupComplete`` (a ``sessionId``). Its ``model`` is checked (an
  unknown one closes 1008, as the service does). ``generationConfig.
  responseModalities`` ``["TEXT"]`` makes the replies text; otherwise they speak (PCM16
  at 24 kHz, ``audio/pcm;rate=24000``), with ``outputTranscription`` when
  ``outputAudioTranscription`` is set.
* A turn is asked by ``clientContent`` with ``turnComplete: true`` (its turns join the
  conversation), by ``realtimeInput.text``, by ``realtimeInput.activityEnd`` or
  ``audioStreamEnd`` after audio (``inputTranscription`` first when
  ``inputAudioTranscription`` is set: ``Emulated transcript of N.NN s of audio.``), and
  by a ``toolResponse`` (the reply that uses the results). New input while a reply runs
  interrupts it (``interrupted``, then ``turnComplete``), as ``activityStart`` does.
* A reply is ``serverContent.modelTurn`` messages (a text part per text delta, a
  ``thought`` part per reasoning delta, an ``inlineData`` part per audio delta), then
  ``generationComplete``, then ``turnComplete`` with the ``usageMetadata``; a reply
  that calls tools ends with a ``toolCall`` (no ``turnComplete``: the turn goes on
  after the ``toolResponse``).
* With ``sessionResumption`` in the setup, a ``sessionResumptionUpdate`` follows the
  ``setupComplete`` and each completed turn: a new handle (``resumable: true``; with
  ``transparent``, the ``lastConsumedClientMessageIndex``: the client messages of the
  connection counted from 0, the setup). A setup naming a handle resumes that session
  as it was when the handle was made (its conversation goes on from there: what the
  client sent after the handle's ``lastConsumedClientMessageIndex`` it sends again, and
  it is read once); an unknown handle closes 1007, and a session whose previous
  connection is still open closes 1011.
* The lifetime (the scenario's ``expire_after``): ``goAway`` with the ``timeLeft``
  :data:`WARN_SECONDS` before the end (at most half the lifetime), then a close 1011
  ``Deadline expired``.
* A reply that fails (the scenario's ``error``) closes the socket: 1013 for
  ``overloaded``, 1011 for a server error, a timeout or a rate limit, 1008 for a
  refused key or quota, 1007 otherwise, the error's message as the reason.
* The constrained endpoint takes an ephemeral token (:mod:`.tokens`): an unknown,
  expired or used-up token closes 1008; the token's ``bidiGenerateContentSetup``
  fields override the setup's.

The service reports errors as close codes; so does the server (:data:`CLOSE_FOR`).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from polystream.audio.formats import PCM16_16K, PCM16_24K, AudioFormat
from polystream.dialects._errors import error_body
from polystream.dialects._realtime.intents import (
    AddMessage,
    AddToolCall,
    Cancel,
    CommitAudio,
    Configure,
    InputAudio,
    InputVideo,
    Intent,
    ToolOutput,
)
from polystream.dialects._realtime.server import (
    Close,
    EventFeed,
    IdMaker,
    Message,
    Outbound,
    Refusal,
    Replier,
    ReplyRun,
    SocketServer,
    Turn,
)
from polystream.dialects.gemini_live.tokens import constrained_setup
from polystream.dialects.gemini_live.wire import CLIENT_KEYS
from polystream.errors import ProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Event,
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolInputDelta,
    Usage,
)
from polystream.wire.ws import MessageReader, dump_message

__all__ = ["CLOSE_FOR", "WARN_SECONDS", "GeminiLiveServer", "usage_metadata"]

WARN_SECONDS: Final = 60.0
"""Seconds before the connection's end that ``goAway`` comes (the service's)."""

CLOSE_FOR: Final[dict[int, int]] = {400: 1007, 401: 1008, 403: 1008, 404: 1008, 429: 1011}
"""HTTP status of a failure -> the close code that reports it (any other: 1011)."""

_OUT_MIME: Final = "audio/pcm;rate=24000"
_CLOSE_KINDS: Final[dict[str, int]] = {
    "overloaded": 1013,
    "server": 1011,
    "timeout": 1011,
    "rate_limit": 1011,
    "authentication": 1008,
    "permission": 1008,
    "quota": 1008,
}
"""The unified kind of a reply's failure -> its close code (any other: 1007)."""


def usage_metadata(usage: Usage | None) -> dict[str, Any]:
    """A :class:`~polystream.events.Usage` as the Live API's ``usageMetadata``."""
    if usage is None:
        return {}
    out: dict[str, Any] = {}
    if usage.input_tokens is not None:
        out["promptTokenCount"] = usage.input_tokens - (usage.tool_prompt_tokens or 0)
    if usage.output_tokens is not None:
        out["responseTokenCount"] = usage.output_tokens - (usage.reasoning_tokens or 0)
    if usage.reasoning_tokens:
        out["thoughtsTokenCount"] = usage.reasoning_tokens
    if usage.total_tokens is not None or usage.input_tokens is not None:
        total = usage.total_tokens
        out["totalTokenCount"] = (
            total if total is not None else (usage.input_tokens or 0) + (usage.output_tokens or 0)
        )
    if usage.audio_output_tokens:
        out["responseTokensDetails"] = [
            {"modality": "AUDIO", "tokenCount": usage.audio_output_tokens}
        ]
    return out


class _Run(ReplyRun):
    """A reply written message by message (see the module docstring)."""

    def __init__(
        self,
        server: GeminiLiveServer,
        events: list[Event],
        tag: Any,
        feed: EventFeed | None = None,
    ) -> None:
        self.response_id = server.ids.make("turn_")
        self.tag = tag
        self._server = server
        self._events = iter(events)
        self._feed = feed
        self._queue: list[Message] = []
        self._ended = False
        self._cut = False
        self._kinds: dict[int, str] = {}
        self._args: dict[int, list[str]] = {}
        self._calls: list[dict[str, Any]] = []
        self._starts: dict[int, BlockStart] = {}
        self.text: list[str] = []  # what the model said (the conversation keeps it)

    @property
    def done(self) -> bool:
        return self._ended and not self._queue

    def next(self) -> Message | None:
        feed = self._feed
        while not self._queue and not self._ended:
            event = next(self._events, None) if feed is None else feed.take()
            if event is None:
                if feed is not None and not feed.ended:
                    break  # (waiting for the feed)
                self._end(None)
            else:
                self._render(event)
        return self._queue.pop(0) if self._queue else None

    def fail(self, error: ErrorInfo) -> None:
        if not self._ended:
            self._queue.clear()
            code = _CLOSE_KINDS.get(error.kind, 1007)
            self._queue.append(Message(text="", close=code, reason=error.message[:120]))
            self._ended = True

    @property
    def urgent(self) -> bool:
        return self._cut and bool(self._queue)

    def interrupt(self) -> None:
        """The user spoke over it: ``interrupted``, then ``turnComplete`` (at once)."""
        if self._ended:
            return
        self._cut = True
        self._queue.clear()
        self._send({"serverContent": {"interrupted": True}})
        self._send({"serverContent": {"turnComplete": True}})
        self._ended = True
        self._server.remember(self, interrupted=True)

    def _send(self, body: dict[str, Any], *, audio: bool = False) -> None:
        self._queue.append(Message(text=dump_message(body), audio=audio))

    def _content(self, **content: Any) -> None:
        self._send({"serverContent": content})

    def _render(self, event: Event) -> None:
        kind = type(event)
        if kind is BlockStart:
            assert isinstance(event, BlockStart)
            self._kinds[event.index] = event.kind
            self._starts[event.index] = event
            if event.kind == "tool_call":
                self._args[event.index] = []
        elif kind is TextDelta:
            assert isinstance(event, TextDelta)
            block = self._kinds.get(event.index)
            if block == "transcript":
                if self._server.transcribes_output:
                    self._content(outputTranscription={"text": event.delta})
            else:
                self.text.append(event.delta)
                self._content(modelTurn={"parts": [{"text": event.delta}]})
        elif kind is ReasoningDelta:
            assert isinstance(event, ReasoningDelta)
            self._content(modelTurn={"parts": [{"text": event.delta, "thought": True}]})
        elif kind is DataDelta:
            assert isinstance(event, DataDelta)
            part = {"inlineData": {"mimeType": _OUT_MIME, "data": event.delta}}
            self._send({"serverContent": {"modelTurn": {"parts": [part]}}}, audio=True)
        elif kind is ToolInputDelta:
            assert isinstance(event, ToolInputDelta)
            self._args.setdefault(event.index, []).append(event.delta)
        elif kind is BlockEnd:
            assert isinstance(event, BlockEnd)
            start = self._starts.get(event.index)
            if start is not None and start.kind == "tool_call":
                self._calls.append(self._call(start, "".join(self._args.get(event.index, []))))
        elif kind is ErrorEvent:
            assert isinstance(event, ErrorEvent)
            self.fail(event.error)
        elif kind is Finish:
            assert isinstance(event, Finish)
            if event.status == "failed":
                self.fail(event.error or ErrorInfo(kind="server", message="Internal error."))
            else:
                self._end(event.usage)

    def _call(self, start: BlockStart, args: str) -> dict[str, Any]:
        import msgspec

        try:
            parsed = msgspec.json.decode(args) if args else {}
        except msgspec.DecodeError:
            parsed = {}
        call_id = start.call_id or start.id or self._server.ids.make("call_", 8)
        return {"id": call_id, "name": start.name or "", "args": parsed}

    def _end(self, usage: Usage | None) -> None:
        if self._ended:
            return
        if self._calls:
            self._send({"toolCall": {"functionCalls": self._calls}})
            self._ended = True
            self._server.remember(self, calls=self._calls)
            return
        self._content(generationComplete=True)
        body: dict[str, Any] = {"serverContent": {"turnComplete": True}}
        meta = usage_metadata(usage)
        if meta:
            body["usageMetadata"] = meta
        self._send(body)
        self._ended = True
        self._server.remember(self)
        for update in self._server.resumption_update():
            self._queue.append(Message(text=update))


class GeminiLiveServer(SocketServer):
    """One Gemini Live connection, served (see the module docstring).

    Args:
        replier: Chooses each reply's content.
        model: Unused (the setup names the model).
        created: The Unix time of the connection.
        seed: What the ids derive from.
        query: The connection URL's query (unused).
        shared: What the family's servers keep across connections (the sessions that
            can be resumed, by handle; the ephemeral tokens).
        token: The ephemeral token the connection presented (the constrained
            endpoint), if any.
    """

    family: ClassVar[str] = "gemini_live"
    warn_before: ClassVar[float | None] = WARN_SECONDS
    expiry_close: ClassVar[tuple[int, str]] = (1011, "Deadline expired")

    def __init__(
        self,
        replier: Replier,
        *,
        model: str = "",
        created: int = 0,
        seed: str = "polystream",
        query: Mapping[str, str] | None = None,
        shared: dict[str, Any] | None = None,
        token: str | None = None,
    ) -> None:
        self._replier = replier
        self.ids = IdMaker(seed)
        self.created = created
        self._reader = MessageReader(name=self.family)
        self.shared = shared if shared is not None else {}
        self.token = token
        self.setup: dict[str, Any] | None = None
        self.model = ""
        self.session_key = ""
        self.history: list[dict[str, Any]] = []
        self.count = -1  # the index of the last client message read
        self._audio = 0  # bytes of input audio since the last turn
        self._run: _Run | None = None
        self._last_calls: dict[str, str] = {}
        self._bridged = False
        self._intents: list[Intent] = []

    # -- what the replies need -----------------------------------------------------------

    @property
    def configured_model(self) -> str:
        return self.model

    @property
    def transcribes_output(self) -> bool:
        return self.setup is not None and "outputAudioTranscription" in self.setup

    @property
    def speaks(self) -> bool:
        config = (self.setup or {}).get("generationConfig") or {}
        modalities = config.get("responseModalities") if isinstance(config, dict) else None
        return not (
            isinstance(modalities, list) and [str(m).upper() for m in modalities] == ["TEXT"]
        )

    def remember(
        self, run: _Run, *, interrupted: bool = False, calls: list[dict[str, Any]] | None = None
    ) -> None:
        """A reply ended: what it said joins the conversation."""
        if self._run is run:
            self._run = None
        parts: list[dict[str, Any]] = []
        if run.text:
            parts.append({"text": "".join(run.text)})
        for call in calls or ():
            parts.append({"functionCall": call})
            self._last_calls[call["id"]] = call["name"]
        if parts:
            self.history.append({"role": "model", "parts": parts})
        self._save()

    def resumption_update(self) -> list[str]:
        """A ``sessionResumptionUpdate`` with a new handle, when the setup asked for
        resumption."""
        config = (self.setup or {}).get("sessionResumption")
        if not isinstance(config, dict):
            return []
        handle = self.ids.make("handle-", 24)
        handles: dict[str, dict[str, Any]] = self.shared.setdefault("handles", {})
        handles[handle] = {"session": self.session_key, **self._state()}
        self._save()
        update: dict[str, Any] = {"newHandle": handle, "resumable": True}
        if config.get("transparent") is True:
            update["lastConsumedClientMessageIndex"] = str(self.count)
        return [dump_message({"sessionResumptionUpdate": update})]

    def _state(self) -> dict[str, Any]:
        """The session as it stands: what a handle made now resumes."""
        return {
            "history": [dict(turn) for turn in self.history],
            "setup": self.setup,
            "calls": dict(self._last_calls),
            "audio": self._audio,
        }

    def _save(self) -> None:
        """The session's latest state (what ``socket_state`` shows)."""
        if self.session_key:
            sessions: dict[str, Any] = self.shared.setdefault("sessions", {})
            sessions[self.session_key] = self._state()

    # -- the connection ----------------------------------------------------------------

    def open(self) -> list[Outbound]:
        return []

    def receive(self, message: str | bytes) -> list[Outbound]:
        try:
            value = self._reader.read(message).value
        except ProtocolError as exc:
            return [Close(code=1007, reason=f"Invalid JSON payload: {exc.message}"[:120])]
        if isinstance(value, dict):
            value = normalized(value)
        if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in CLIENT_KEYS:
            return [
                Close(
                    code=1007,
                    reason="Invalid message: expected exactly one of " + ", ".join(CLIENT_KEYS),
                )
            ]
        self.count += 1
        key, body = next(iter(value.items()))
        if not isinstance(body, dict):
            return [Close(code=1007, reason=f"Invalid value at '{key}': expected an object")]
        if key == "setup":
            return self._on_setup(body)
        if self.setup is None:
            return [Close(code=1007, reason="The first message must be the setup.")]
        handler = {
            "clientContent": self._on_client_content,
            "realtimeInput": self._on_realtime_input,
            "toolResponse": self._on_tool_response,
        }[key]
        return handler(body)

    def closed(self) -> None:
        connections: dict[str, Any] = self.shared.setdefault("open", {})
        if self.session_key and connections.get(self.session_key) is self:
            del connections[self.session_key]

    def going_away(self, time_left: float) -> list[str]:
        return [dump_message({"goAway": {"timeLeft": f"{time_left:g}s"}})]

    def expire(self) -> list[str]:
        return []

    def error(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        kind: str | None = None,
    ) -> str:
        # The service reports errors as close codes (see CLOSE_FOR); this is the
        # Google error body, for a caller that must write a message.
        return dump_message(error_body("google", status, message, kind=kind, param=param))

    def interrupt(self, run: ReplyRun, *, cancel: bool) -> list[Outbound]:
        if isinstance(run, _Run):
            run.interrupt()
        return []

    # -- a bridge's client side --------------------------------------------------------
    #
    # The client's setup, turns, audio, video and tool responses become intents; a
    # request the upstream cannot carry closes the connection with 1007 (invalid
    # argument), as the service itself reports one.

    def bridge(self) -> None:
        self._bridged = True

    def take_intents(self) -> list[Intent]:
        taken, self._intents = self._intents, []
        return taken

    def heard(self, state: str, at_ms: int) -> list[Outbound]:
        if state == "started":  # (the user speaks over the reply: the upstream cut it)
            run = self._run
            if run is not None and not run.done:
                run.interrupt()
        return []

    def respond(self) -> list[Outbound]:
        if self.setup is None:
            return []
        return self._ask()

    def refuse(self, status: int, message: str, *, code: str | None = None) -> list[Outbound]:
        return [Close(code=CLOSE_FOR.get(status, 1011), reason=message[:123])]

    @property
    def input_audio(self) -> AudioFormat | None:
        return PCM16_16K

    @property
    def output_audio(self) -> AudioFormat | None:
        return PCM16_24K if self.speaks else None

    def _configuration(self, setup: dict[str, Any]) -> Configure:
        """The setup as the configuration a bridge's upstream is to have."""
        texts = []
        instruction = setup.get("systemInstruction", setup.get("system_instruction"))
        if isinstance(instruction, str):
            texts.append(instruction)
        elif isinstance(instruction, dict):
            texts += [
                part["text"]
                for part in instruction.get("parts") or ()
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            ]
        functions: list[dict[str, Any]] = []
        hosted: list[dict[str, Any]] = []
        for tool in setup.get("tools") or ():
            if not isinstance(tool, dict):
                continue
            declarations = tool.get("functionDeclarations", tool.get("function_declarations"))
            for declaration in declarations if isinstance(declarations, list) else ():
                if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                    functions.append(
                        {
                            "name": declaration["name"],
                            "description": declaration.get("description") or "",
                            "parameters": declaration.get("parameters")
                            or declaration.get("parametersJsonSchema")
                            or {"type": "object", "properties": {}},
                        }
                    )
            hosted += [
                {"type": key, **(value if isinstance(value, dict) else {})}
                for key, value in tool.items()
                if key not in ("functionDeclarations", "function_declarations")
            ]
        realtime = setup.get("realtimeInputConfig", setup.get("realtime_input_config"))
        detection = (
            realtime.get("automaticActivityDetection", realtime.get("automatic_activity_detection"))
            if isinstance(realtime, dict)
            else None
        )
        disabled = isinstance(detection, dict) and detection.get("disabled") is True
        return Configure(
            instructions="".join(texts),
            tools=tuple(functions),
            hosted=tuple(hosted),
            modalities=("audio",) if self.speaks else ("text",),
            turn_detection=not disabled,
            input_audio=PCM16_16K,
            output_audio=PCM16_24K,
        )

    def _turn_intents(self, turns: list[Any]) -> None:
        """What a ``clientContent``'s turns add to the conversation."""
        for turn in turns:
            if not isinstance(turn, dict):
                continue
            role = "assistant" if turn.get("role") == "model" else "user"
            texts: list[str] = []
            images: list[str] = []
            for part in turn.get("parts") or ():
                if not isinstance(part, dict):
                    continue
                if isinstance(part.get("text"), str):
                    texts.append(part["text"])
                data = part.get("inlineData", part.get("inline_data"))
                if isinstance(data, dict) and isinstance(data.get("data"), str):
                    mime = data.get("mimeType", data.get("mime_type")) or ""
                    images.append(f"data:{mime};base64,{data['data']}")
                call = part.get("functionCall", part.get("function_call"))
                if isinstance(call, dict):
                    self._intents.append(
                        AddToolCall(
                            call_id=str(call.get("id") or ""),
                            name=str(call.get("name") or ""),
                            arguments=dump_message(call.get("args") or {}),
                        )
                    )
                answer = part.get("functionResponse", part.get("function_response"))
                if isinstance(answer, dict):
                    self._tool_output(answer)
            if texts or images:
                self._intents.append(
                    AddMessage(role=role, text="".join(texts), images=tuple(images))
                )

    def _tool_output(self, response: dict[str, Any]) -> None:
        self._intents.append(
            ToolOutput(
                call_id=str(response.get("id") or ""),
                output=dump_message(response.get("response") or {}),
                name=response.get("name") if isinstance(response.get("name"), str) else None,
            )
        )

    def _bridged_input(self, body: dict[str, Any]) -> list[Outbound]:
        """A ``realtimeInput`` of a bridge's client."""
        for key in ("video", "mediaChunks", "media_chunks"):
            blobs = body.get(key)
            for blob in blobs if isinstance(blobs, list) else [blobs]:
                if isinstance(blob, dict) and isinstance(blob.get("data"), str):
                    mime = str(blob.get("mimeType", blob.get("mime_type")) or "")
                    data = base64.b64decode(blob["data"])
                    if mime.startswith("audio/"):
                        self._intents.append(InputAudio(data=data))
                        self._audio += len(data)
                    else:
                        self._intents.append(InputVideo(data=data, mime_type=mime))
        audio = body.get("audio")
        if isinstance(audio, dict) and isinstance(audio.get("data"), str):
            data = base64.b64decode(audio["data"])
            self._audio += len(data)
            self._intents.append(InputAudio(data=data))
        if isinstance(body.get("text"), str):
            out = self._interrupt()
            self._intents.append(AddMessage(role="user", text=body["text"]))
            return out + self._ask()
        if "activityStart" in body:
            return self._interrupt()
        if "activityEnd" in body and self._audio:
            self._audio = 0
            self._intents.append(CommitAudio())
            return self._ask()
        return []

    # -- the client's messages -----------------------------------------------------------

    def _on_setup(self, body: dict[str, Any]) -> list[Outbound]:
        if self.setup is not None:
            return [Close(code=1007, reason="The setup was sent already.")]
        if self.token is not None:
            checked = constrained_setup(self.shared, self.token, body, self.created)
            if isinstance(checked, str):
                return [Close(code=1008, reason=checked)]
            body = checked
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return [Close(code=1007, reason="Missing required field: setup.model")]
        self.model = model.removeprefix("models/")
        resumption = body.get("sessionResumption")
        handle = resumption.get("handle") if isinstance(resumption, dict) else None
        connections: dict[str, Any] = self.shared.setdefault("open", {})
        if isinstance(handle, str) and handle:
            # The session as it was when the handle was made: what the client sent
            # after the handle's lastConsumedClientMessageIndex it sends again.
            saved = self.shared.get("handles", {}).get(handle)
            if saved is None:
                return [Close(code=1007, reason="Invalid session resumption handle.")]
            key = saved["session"]
            if key in connections:
                return [Close(code=1011, reason="The session is still open on another connection.")]
            self.session_key = key
            self.history = [dict(turn) for turn in saved["history"]]
            self._last_calls = dict(saved["calls"])
            self._audio = saved["audio"]
        else:
            self.session_key = self.ids.make("session-", 16)
        connections[self.session_key] = self
        self.setup = body
        self._save()
        if self._bridged:
            self._intents.append(self._configuration(body))
        out: list[Outbound] = [dump_message({"setupComplete": {"sessionId": self.session_key}})]
        out += self.resumption_update()
        return out

    def _on_client_content(self, body: dict[str, Any]) -> list[Outbound]:
        turns = body.get("turns", [])
        if not isinstance(turns, list):
            return [Close(code=1007, reason="Invalid value at 'client_content.turns'")]
        out = self._interrupt()
        self.history += [turn for turn in turns if isinstance(turn, dict)]
        if self._bridged:
            self._turn_intents(turns)
        if body.get("turnComplete") is True:
            out += self._ask()
        else:
            self._save()
        return out

    def _on_realtime_input(self, body: dict[str, Any]) -> list[Outbound]:
        if self._bridged:
            return self._bridged_input(body)
        if isinstance(body.get("text"), str):
            out = self._interrupt()
            self.history.append({"role": "user", "parts": [{"text": body["text"]}]})
            return out + self._ask()
        audio = body.get("audio")
        if isinstance(audio, dict) and isinstance(audio.get("data"), str):
            try:
                self._audio += len(base64.b64decode(audio["data"], validate=True))
            except ValueError:
                return [Close(code=1007, reason="Invalid value at 'realtime_input.audio.data'")]
            return []
        if "activityStart" in body:
            return self._interrupt()
        if "activityEnd" in body or body.get("audioStreamEnd") is True:
            if not self._audio:
                return []
            seconds = self._audio / 32000  # PCM16 at 16 kHz
            self._audio = 0
            said: list[Outbound] = []
            if self.setup is not None and "inputAudioTranscription" in self.setup:
                text = f"Emulated transcript of {seconds:.2f} s of audio."
                heard = {"text": text, "finished": True}
                said.append(dump_message({"serverContent": {"inputTranscription": heard}}))
            self.history.append({"role": "user", "parts": [{"text": ""}]})
            return said + self._ask()
        return []

    def _on_tool_response(self, body: dict[str, Any]) -> list[Outbound]:
        responses = body.get("functionResponses")
        if not isinstance(responses, list) or not responses:
            return [Close(code=1007, reason="Invalid value at 'tool_response.function_responses'")]
        parts = []
        for response in responses:
            if not isinstance(response, dict) or not isinstance(response.get("id"), str):
                return [Close(code=1007, reason="A function response has no id.")]
            if not response.get("name"):
                return [Close(code=1007, reason="A function response has no name.")]
            parts.append({"functionResponse": response})
            if self._bridged:
                self._tool_output(response)
        self.history.append({"role": "user", "parts": parts})
        return self._ask(tool_result=True)

    # -- replies -----------------------------------------------------------------------

    def _interrupt(self) -> list[Outbound]:
        run = self._run
        if run is not None and not run.done:
            run.interrupt()
            if self._bridged:
                self._intents.append(Cancel(response_id=run.response_id))
        return []

    def _ask(self, *, tool_result: bool = False) -> list[Outbound]:
        assert self.setup is not None
        user_text = ""
        for turn in reversed(self.history):
            if turn.get("role", "user") == "user":
                texts = [
                    p["text"]
                    for p in turn.get("parts") or ()
                    if isinstance(p, dict) and isinstance(p.get("text"), str)
                ]
                if texts or not tool_result:
                    user_text = "".join(texts)
                    break
        names = _tool_names(self.setup.get("tools"))
        turn = Turn(
            model=self.model,
            user_text=user_text,
            has_tools=bool(names),
            tool_names=names,
            has_tool_result=tool_result,
            audio=PCM16_24K if self.speaks else None,
        )
        answer = self._replier(turn)
        if isinstance(answer, Refusal):
            code = CLOSE_FOR.get(answer.status, 1011)
            return [Close(code=code, reason=answer.message[:120])]
        run = _Run(self, answer.events, answer.tag, answer.feed)
        self._run = run
        return [run]


def _camel(name: str) -> str:
    """A proto field's JSON name (``client_content`` -> ``clientContent``): the service
    reads both, as every proto3 JSON parser does (google-genai sends the top-level keys
    in snake case)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _fields(value: Any) -> Any:
    """An object's keys in camel case (one level: not the values)."""
    if not isinstance(value, dict):
        return value
    return {_camel(key): field for key, field in value.items()}


def normalized(message: dict[str, Any]) -> dict[str, Any]:
    """A client message with the fields the server reads in camel case: its key, its
    body's fields, the setup's ``generationConfig`` and ``sessionResumption`` fields,
    each function response's fields (never a free-form value: a response, arguments)."""
    out: dict[str, Any] = {}
    for key, body in message.items():
        body = _fields(body)
        if isinstance(body, dict):
            for inner in ("generationConfig", "sessionResumption"):
                if inner in body:
                    body[inner] = _fields(body[inner])
            responses = body.get("functionResponses")
            if isinstance(responses, list):
                body["functionResponses"] = [_fields(entry) for entry in responses]
        out[_camel(key)] = body
    return out


def _tool_names(tools: Any) -> tuple[str, ...]:
    names: list[str] = []
    for tool in tools if isinstance(tools, list) else ():
        declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
        for declaration in declarations if isinstance(declarations, list) else ():
            if isinstance(declaration, dict) and isinstance(declaration.get("name"), str):
                names.append(declaration["name"])
    return tuple(names)
