"""The Realtime API server, sans-I/O: what the emulator runs for one connection (OpenAI's
service; a family that speaks it with differences, xAI's, subclasses it).

It keeps what the service keeps: the session's configuration (``session.created`` on
connect, ``session.update`` merged into it and echoed by ``session.updated``), the
conversation's items, the input audio buffer and its voice activity (server VAD, see
:mod:`.vad`), and the responses running. It answers the 11 GA client messages:

* ``conversation.item.create`` / ``.retrieve`` / ``.delete`` / ``.truncate``: the
  conversation's news (``conversation.item.added`` + ``.done``, ``.retrieved``,
  ``.deleted``, ``.truncated``), or the service's error;
* ``input_audio_buffer.append``: with turn detection on, speech found in the audio gives
  ``speech_started`` (and cuts the running response, ``interrupt_response``), its end
  ``speech_stopped``, the buffer committed as a user item and, ``create_response``, a
  response; ``.commit`` (at least 100 ms of audio) and ``.clear``;
* ``response.create``: a response (:mod:`.respond`), in the conversation or out-of-band
  (``conversation: "none"``), whose content a replier chooses; ``response.cancel`` ends
  it ``cancelled``.

A malformed or impossible message gets the Realtime ``error`` message, with the type,
code, message and parameter the service gives, and the connection goes on.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import copy
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from polystream.audio.formats import AudioFormat
from polystream.dialects._errors import error_body
from polystream.dialects._realtime.intents import (
    AddMessage,
    AddToolCall,
    Cancel,
    ClearAudio,
    CommitAudio,
    Configure,
    DeleteItem,
    InputAudio,
    Intent,
    ToolOutput,
    Truncate,
)
from polystream.dialects._realtime.server import (
    IdMaker,
    Outbound,
    Refusal,
    Replier,
    ReplyRun,
    SocketServer,
    Turn,
    function_names,
)
from polystream.dialects._realtime_api.audio_format import DEFAULT_FORMAT, read_format
from polystream.dialects._realtime_api.respond import Conversation, ResponseRun
from polystream.dialects._realtime_api.vad import VoiceDetector
from polystream.dialects._spec import ErrorSpec
from polystream.errors import ProtocolError
from polystream.events import Usage
from polystream.wire.ws import MessageReader, dump_message

__all__ = ["InvalidMessage", "RealtimeServer", "default_session"]

_OPENAI_ERRORS: Final = ErrorSpec("openai", param_field=True)
_CLIENT_ORDER: Final = (  # (the GA client messages, as the service lists them)
    "session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "conversation.item.create",
    "conversation.item.retrieve",
    "conversation.item.truncate",
    "conversation.item.delete",
    "response.create",
    "response.cancel",
    "output_audio_buffer.clear",
)
_FORMATS: Final = ("audio/pcm", "audio/pcmu", "audio/pcma")
_SERVER_VAD: Final[dict[str, Any]] = {
    "type": "server_vad",
    "threshold": 0.5,
    "prefix_padding_ms": 300,
    "silence_duration_ms": 200,
    "idle_timeout_ms": None,
    "create_response": True,
    "interrupt_response": True,
}
_SEMANTIC_VAD: Final[dict[str, Any]] = {
    "type": "semantic_vad",
    "eagerness": "auto",
    "create_response": True,
    "interrupt_response": True,
}
_EAGERNESS_MS: Final = {"low": 1000, "medium": 500, "high": 200, "auto": 500}
"""The silence that ends speech under semantic VAD, by eagerness (the emulator's)."""
_ITEM_TYPES: Final = frozenset({"message", "function_call", "function_call_output"})
_ROLES: Final = frozenset({"user", "assistant", "system"})
_MIN_COMMIT_MS: Final = 100
_REQUESTS_LIMIT: Final = 1000
_TOKENS_LIMIT: Final = 50000
_EXPIRED: Final = "Your session hit the maximum duration of 60 minutes."


def default_session(session_id: str, model: str, expires_at: int) -> dict[str, Any]:
    """The configuration a session starts with (``session.created``)."""
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": session_id,
        "model": model,
        "output_modalities": ["audio"],
        "instructions": "",
        "tools": [],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
        "tracing": None,
        "truncation": "auto",
        "prompt": None,
        "expires_at": expires_at,
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": None,
                "noise_reduction": None,
                "turn_detection": dict(_SERVER_VAD),
            },
            "output": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "voice": "marin",
                "speed": 1.0,
            },
        },
        "include": None,
    }


class InvalidMessage(Exception):
    """A client message the service refuses: its error fields (raised by a message's
    handler, answered with the ``error`` message)."""

    def __init__(self, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param


class RealtimeServer(SocketServer):
    """One Realtime connection, served.

    A family binds it with its ``family`` name; one that speaks the Realtime API with
    differences (xAI's) overrides the class attributes and the methods
    :meth:`initial_config`, :meth:`detection`, :meth:`_check_session`, :meth:`_merge`,
    :meth:`_modalities_of` and :meth:`_binary_output`.

    Args:
        replier: Chooses each response's content.
        model: The model of the connection (its ``?model=``).
        created: The Unix time of the connection (``expires_at`` is an hour later).
        seed: What the ids derive from (deterministic ids).
        query: The connection URL's query (unused: the session is configured by
            messages).
        max_items: Most conversation items kept.

    Class attributes:
        client_messages: The client messages served, as the service lists them in its
            error.
        pcm_rates: The lowest and highest rate an ``audio/pcm`` format may state.
        rate_limits: A ``rate_limits.updated`` follows each ``response.created``.
    """

    client_messages: ClassVar[tuple[str, ...]] = _CLIENT_ORDER
    pcm_rates: ClassVar[tuple[int, int]] = (24000, 24000)
    rate_limits: ClassVar[bool] = True

    def __init__(
        self,
        replier: Replier,
        *,
        model: str,
        created: int = 0,
        seed: str = "polystream",
        query: Mapping[str, str] | None = None,
        max_items: int = 4096,
    ) -> None:
        self._replier = replier
        self._ids = IdMaker(seed)
        self._reader = MessageReader(name=self.family)
        self.config = self.initial_config(self._ids.make("sess_"), model, created)
        self.conversation = Conversation(max_items)
        self.conversation_id = self._ids.make("conv_")
        self._runs: dict[str, ResponseRun] = {}
        self._active: ResponseRun | None = None  # the conversation's response
        self._buffer = bytearray()
        self._written_ms = 0.0  # all the input audio written, in ms
        self._detector: VoiceDetector | None = None
        self._speech_item: str | None = None
        self._requests = 0
        self._tokens = 0
        self._bridged = False
        self._intents: list[Intent] = []
        self._configure_audio()

    # -- what a family changes ---------------------------------------------------------

    def initial_config(self, session_id: str, model: str, created: int) -> dict[str, Any]:
        """The configuration the session starts with (``session.created``)."""
        return default_session(session_id, model, created + 3600)

    def detection(self) -> dict[str, Any] | None:
        """The session's turn detection (None: off)."""
        found = self.config["audio"]["input"].get("turn_detection")
        return found if isinstance(found, dict) else None

    def _check_session(self, session: dict[str, Any]) -> None:
        """Refuse a ``session.update`` the service refuses (before any change)."""
        kind = session.get("type")
        if kind is None:
            raise InvalidMessage(
                "missing_required_parameter",
                "Missing required parameter: 'session.type'.",
                "session.type",
            )
        if kind != "realtime":
            raise InvalidMessage(
                "invalid_value",
                f"Invalid value: '{kind}'. Supported values are: 'realtime'.",
                "session.type",
            )
        if "output_modalities" in session:
            _modalities(session["output_modalities"], "session.output_modalities")

    def _merge(self, merged: dict[str, Any], session: dict[str, Any]) -> None:
        """Merge a ``session.update`` into (a copy of) the configuration."""
        for key, field in session.items():
            if key != "audio":
                merged[key] = field
        audio = session.get("audio")
        if isinstance(audio, dict):
            for side in ("input", "output"):
                given = audio.get(side)
                if isinstance(given, dict):
                    self._check_format(given.get("format"), f"session.audio.{side}.format")
                    target = merged["audio"][side]
                    for key, field in given.items():
                        target[key] = _turn_detection(field) if key == "turn_detection" else field

    def _modalities_of(self, params: dict[str, Any]) -> list[str]:
        """The output modalities of a response (its own, else the session's)."""
        modalities = params.get("output_modalities", self.config["output_modalities"])
        _modalities(modalities, "response.output_modalities")
        return list(modalities)

    def _binary_output(self) -> bool:
        """Output audio goes as bytes messages (xAI's ``transport: binary``)."""
        return False

    def _check_format(self, value: Any, param: str) -> None:
        if value is None:
            return
        kind = value.get("type") if isinstance(value, dict) else None
        if kind not in _FORMATS:
            supported = ", ".join(f"'{name}'" for name in _FORMATS)
            raise InvalidMessage(
                "invalid_value",
                f"Invalid value: '{kind}'. Supported values are: {supported}.",
                f"{param}.type",
            )
        rate = value.get("rate")
        low, high = self.pcm_rates
        if (
            kind == "audio/pcm"
            and rate is not None
            and not (type(rate) is int and low <= rate <= high)
        ):
            supported = str(low) if low == high else f"{low} to {high}"
            raise InvalidMessage(
                "invalid_value",
                f"Invalid value: {rate}. Supported values are: {supported}.",
                f"{param}.rate",
            )

    # -- state ---------------------------------------------------------------------------

    @property
    def input_format(self) -> AudioFormat:
        found = read_format(self.config, "input")
        return found[0] if found is not None else DEFAULT_FORMAT

    @property
    def output_format(self) -> AudioFormat:
        found = read_format(self.config, "output")
        return found[0] if found is not None else DEFAULT_FORMAT

    @property
    def active(self) -> ResponseRun | None:
        """The conversation's response while it is written."""
        return self._active if self._active is not None and not self._active.done else None

    # -- the connection ----------------------------------------------------------------

    def open(self) -> list[Outbound]:
        return [self._message("session.created", session=copy.deepcopy(self.config))]

    def receive(self, message: str | bytes) -> list[Outbound]:
        try:
            value = self._reader.read(message).value
        except ProtocolError as exc:
            return [self._error("invalid_json", f"The message could not be read: {exc.message}")]
        event_id = value.get("event_id") if isinstance(value, dict) else None
        event_id = event_id if isinstance(event_id, str) else None
        try:
            if not isinstance(value, dict):
                raise InvalidMessage("invalid_type", "A client event must be a JSON object.")
            kind = value.get("type")
            if not isinstance(kind, str):
                raise InvalidMessage(
                    "missing_required_parameter", "Missing required parameter: 'type'.", "type"
                )
            handler = getattr(self, "_on_" + kind.replace(".", "_"), None)
            if kind not in self.client_messages or handler is None:
                supported = ", ".join(f"'{name}'" for name in self.client_messages)
                raise InvalidMessage(
                    "invalid_value",
                    f"Invalid value: '{kind}'. Supported values are: {supported}.",
                    "type",
                )
            out: list[Outbound] = handler(value)
            return out
        except InvalidMessage as exc:
            return [self._error(exc.code, exc.message, exc.param, event_id)]

    def interrupt(self, run: ReplyRun, *, cancel: bool) -> list[Outbound]:
        item = self._ids.make("item_")
        out: list[Outbound] = [
            self._message(
                "input_audio_buffer.speech_started",
                audio_start_ms=int(self._written_ms),
                item_id=item,
            )
        ]
        if cancel and isinstance(run, ResponseRun) and not run.done:
            out += run.cancel("turn_detected")
        return out

    def expire(self) -> list[str]:
        return [self._error("session_expired", _EXPIRED)]

    # -- a bridge's client side --------------------------------------------------------

    def bridge(self) -> None:
        self._bridged = True
        self._detector = None
        self._intents.append(self._configuration())

    def take_intents(self) -> list[Intent]:
        taken, self._intents = self._intents, []
        return taken

    def heard(self, state: str, at_ms: int) -> list[Outbound]:
        if state == "started":
            return self._speech_started(at_ms)
        if state != "stopped":
            return []
        item = self._speech_item or self._ids.make("item_")
        return [
            self._message("input_audio_buffer.speech_stopped", audio_end_ms=at_ms, item_id=item),
            *self._commit(item),
        ]

    def respond(self) -> list[Outbound]:
        try:
            return self._create({})
        except InvalidMessage as exc:
            return [self._error(exc.code, exc.message, exc.param)]

    @property
    def input_audio(self) -> AudioFormat | None:
        return self.input_format

    @property
    def output_audio(self) -> AudioFormat | None:
        return self.output_format

    def _configuration(self) -> Configure:
        """The session's configuration as a bridge's upstream is to have it."""
        config = self.config
        tools = config.get("tools") or []
        functions = tuple(
            {
                "name": tool["name"],
                "description": tool.get("description") or "",
                "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
            }
            for tool in tools
            if isinstance(tool, dict)
            and tool.get("type", "function") == "function"
            and isinstance(tool.get("name"), str)
        )
        hosted = tuple(
            tool
            for tool in tools
            if isinstance(tool, dict) and tool.get("type", "function") != "function"
        )
        instructions = config.get("instructions")
        return Configure(
            instructions=instructions if isinstance(instructions, str) else "",
            tools=functions,
            hosted=hosted,
            modalities=tuple(self._modalities_of({})),
            turn_detection=self.detection() is not None,
            input_audio=self.input_format,
            output_audio=self.output_format,
        )

    def error(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        kind: str | None = None,
    ) -> str:
        nested = error_body(_OPENAI_ERRORS, status, message, kind=kind, param=param, code=code)
        fields = nested["error"]
        return self._error(fields["code"], fields["message"], fields["param"], type_=fields["type"])

    # -- session -------------------------------------------------------------------------

    def _on_session_update(self, value: dict[str, Any]) -> list[Outbound]:
        session = value.get("session")
        if not isinstance(session, dict):
            raise InvalidMessage(
                "missing_required_parameter", "Missing required parameter: 'session'.", "session"
            )
        self._check_session(session)
        model = session.get("model")
        if model is not None and model != self.config["model"]:
            raise InvalidMessage(
                "invalid_value", "The model of a session cannot be changed.", "session.model"
            )
        merged = copy.deepcopy(self.config)
        self._merge(merged, session)
        self.config = merged
        self._configure_audio()
        if self._bridged:
            self._intents.append(self._configuration())
        return [self._message("session.updated", session=copy.deepcopy(self.config))]

    def _configure_audio(self) -> None:
        detection = self.detection()
        if detection is None or self._bridged:
            self._detector = None
            return
        threshold = detection.get("threshold", 0.5)
        silence = detection.get("silence_duration_ms")
        if detection.get("type") == "semantic_vad":
            silence = _EAGERNESS_MS.get(detection.get("eagerness", "auto"), 500)
        self._detector = VoiceDetector(
            self.input_format,
            threshold=float(threshold) if isinstance(threshold, int | float) else 0.5,
            silence_duration_ms=int(silence) if isinstance(silence, int | float) else 200,
            offset_ms=int(self._written_ms),
        )

    # -- input audio ---------------------------------------------------------------------

    def _on_input_audio_buffer_append(self, value: dict[str, Any]) -> list[Outbound]:
        audio = value.get("audio")
        if not isinstance(audio, str):
            raise InvalidMessage(
                "missing_required_parameter", "Missing required parameter: 'audio'.", "audio"
            )
        try:
            data = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidMessage(
                "invalid_value", "Invalid 'audio'. Expected base64-encoded audio.", "audio"
            ) from None
        return self._append(data)

    def _append(self, data: bytes) -> list[Outbound]:
        """Input audio written to the buffer (and heard by voice activity detection)."""
        self._buffer += data
        self._written_ms += self.input_format.duration_ms(len(data))
        if self._bridged:
            self._intents.append(InputAudio(data=data))
        out: list[Outbound] = []
        if self._detector is not None:
            for what, at in self._detector.feed(data):
                out += self._speech_started(at) if what == "started" else self._speech_stopped(at)
        return out

    def _speech_started(self, at: int) -> list[Outbound]:
        detection = self.detection() or {}
        padding = detection.get("prefix_padding_ms", 0)
        start = max(at - (padding if isinstance(padding, int) else 0), 0)
        self._speech_item = self._ids.make("item_")
        out: list[Outbound] = [
            self._message(
                "input_audio_buffer.speech_started", audio_start_ms=start, item_id=self._speech_item
            )
        ]
        running = self.active
        if running is not None and detection.get("interrupt_response", True):
            out += running.cancel("turn_detected")
        return out

    def _speech_stopped(self, at: int) -> list[Outbound]:
        item = self._speech_item or self._ids.make("item_")
        out: list[Outbound] = [
            self._message("input_audio_buffer.speech_stopped", audio_end_ms=at, item_id=item)
        ]
        out += self._commit(item)
        detection = self.detection() or {}
        if detection.get("create_response", True) and self.active is None:
            out += self._create({})
        return out

    def _on_input_audio_buffer_commit(self, value: dict[str, Any]) -> list[Outbound]:
        held = self.input_format.duration_ms(len(self._buffer))
        if held < _MIN_COMMIT_MS:
            raise InvalidMessage(
                "input_audio_buffer_commit_empty",
                "Error committing input audio buffer: buffer too small. Expected at least "
                f"{_MIN_COMMIT_MS}ms of audio, but buffer only has {held:.2f}ms of audio.",
            )
        item_id = self._speech_item or self._ids.make("item_")
        if self._bridged:
            self._intents.append(CommitAudio())
        return self._commit(item_id)

    def _commit(self, item_id: str) -> list[Outbound]:
        self._speech_item = None
        self._buffer.clear()
        item = {
            "id": item_id,
            "type": "message",
            "status": "completed",
            "role": "user",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        before = self.conversation.add(item)
        return [
            self._message("input_audio_buffer.committed", previous_item_id=before, item_id=item_id),
            *self._item_news(item, before),
        ]

    def _on_input_audio_buffer_clear(self, value: dict[str, Any]) -> list[Outbound]:
        self._buffer.clear()
        if self._bridged:
            self._intents.append(ClearAudio())
        return [self._message("input_audio_buffer.cleared")]

    def _on_output_audio_buffer_clear(self, value: dict[str, Any]) -> list[Outbound]:
        raise InvalidMessage(
            "invalid_value",
            "output_audio_buffer.clear is only supported for WebRTC and SIP sessions.",
        )

    # -- conversation -----------------------------------------------------------------

    def _on_conversation_item_create(self, value: dict[str, Any]) -> list[Outbound]:
        given = value.get("item")
        if not isinstance(given, dict):
            raise InvalidMessage(
                "missing_required_parameter", "Missing required parameter: 'item'.", "item"
            )
        kind = given.get("type")
        if kind not in _ITEM_TYPES:
            supported = ", ".join(f"'{name}'" for name in sorted(_ITEM_TYPES))
            raise InvalidMessage(
                "invalid_value",
                f"Invalid value: '{kind}'. Supported values are: {supported}.",
                "item.type",
            )
        if kind == "message" and given.get("role") not in _ROLES:
            raise InvalidMessage(
                "invalid_value",
                f"Invalid value: '{given.get('role')}'. Supported values are: 'assistant', "
                "'system', 'user'.",
                "item.role",
            )
        item_id = given.get("id")
        if not isinstance(item_id, str):
            item_id = self._ids.make("item_")
        elif item_id in self.conversation.items:
            raise InvalidMessage(
                "invalid_value", f"Item with id '{item_id}' already exists.", "item.id"
            )
        previous = value.get("previous_item_id")
        if previous is not None and previous != "root" and previous not in self.conversation.items:
            raise InvalidMessage(
                "invalid_value",
                f"Previous item with id '{previous}' not found.",
                "previous_item_id",
            )
        item: dict[str, Any] = {"id": item_id, "type": kind, "status": "completed"}
        for key, field in given.items():
            if key not in ("id", "type", "status", "object"):
                item[key] = field
        if isinstance(item.get("content"), list):
            item["content"] = [_stored_part(part) for part in item["content"]]
        if self._bridged:
            self._intents.append(_item_intent(given, item_id))
        before = self.conversation.add(item, previous if isinstance(previous, str) else None)
        return list(self._item_news(item, before))

    def _item_news(self, item: dict[str, Any], before: str | None) -> list[Outbound]:
        return [
            self._message(
                "conversation.item.added", previous_item_id=before, item=copy.deepcopy(item)
            ),
            self._message(
                "conversation.item.done", previous_item_id=before, item=copy.deepcopy(item)
            ),
        ]

    def _item(self, value: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        item_id = value.get("item_id")
        if not isinstance(item_id, str):
            raise InvalidMessage(
                "missing_required_parameter", "Missing required parameter: 'item_id'.", "item_id"
            )
        item = self.conversation.items.get(item_id)
        if item is None:
            raise InvalidMessage(
                "invalid_value", f"Conversation item with id '{item_id}' not found.", "item_id"
            )
        return item_id, item

    def _on_conversation_item_retrieve(self, value: dict[str, Any]) -> list[Outbound]:
        _, item = self._item(value)
        return [self._message("conversation.item.retrieved", item=copy.deepcopy(item))]

    def _on_conversation_item_delete(self, value: dict[str, Any]) -> list[Outbound]:
        item_id, _ = self._item(value)
        self.conversation.delete(item_id)
        if self._bridged:
            self._intents.append(DeleteItem(item_id=item_id))
        return [self._message("conversation.item.deleted", item_id=item_id)]

    def _on_conversation_item_truncate(self, value: dict[str, Any]) -> list[Outbound]:
        item_id, item = self._item(value)
        index = value.get("content_index", 0)
        end = value.get("audio_end_ms")
        if type(end) is not int or end < 0:
            raise InvalidMessage(
                "missing_required_parameter",
                "Missing required parameter: 'audio_end_ms'.",
                "audio_end_ms",
            )
        content = item.get("content")
        part = (
            content[index]
            if isinstance(content, list) and type(index) is int and 0 <= index < len(content)
            else None
        )
        audio = isinstance(part, dict) and part.get("type") == "output_audio"
        # (An item still being spoken has no content yet: its audio so far counts.)
        speaking = not content and index == 0 and item_id in self.conversation.audio
        if item.get("role") != "assistant" or not (audio or speaking):
            raise InvalidMessage(
                "unsupported_content_type", "Only model output audio messages can be truncated"
            )
        made = self.output_format.duration_ms(self.conversation.audio.get(item_id, 0))
        if end > made:
            raise InvalidMessage(
                "invalid_value",
                f"Audio content of {int(made)}ms is already shorter than {end}ms",
                "audio_end_ms",
            )
        if isinstance(part, dict):
            part["transcript"] = ""  # (the unheard transcript is deleted)
        self.conversation.truncated.add(item_id)
        if self._bridged:
            self._intents.append(Truncate(item_id=item_id, audio_end_ms=end))
        return [
            self._message(
                "conversation.item.truncated",
                item_id=item_id,
                content_index=index,
                audio_end_ms=end,
            )
        ]

    # -- responses ---------------------------------------------------------------------

    def _on_response_create(self, value: dict[str, Any]) -> list[Outbound]:
        params = value.get("response", {})
        if not isinstance(params, dict):
            raise InvalidMessage(
                "invalid_type", "Invalid type for 'response': expected an object.", "response"
            )
        return self._create(params)

    def _create(self, params: dict[str, Any], *, say: str | None = None) -> list[Outbound]:
        """Start a response (``say``: the text it says verbatim, a forced message)."""
        conversation = params.get("conversation", "auto")
        if conversation not in ("auto", "none"):
            raise InvalidMessage(
                "invalid_value",
                f"Invalid value: '{conversation}'. Supported values are: 'auto', 'none'.",
                "response.conversation",
            )
        in_band = conversation == "auto"
        running = self.active
        if in_band and running is not None:
            raise InvalidMessage(
                "conversation_already_has_active_response",
                f"Conversation already has an active response in progress: "
                f"{running.response_id}. Wait until the response is finished before creating "
                "a new one.",
            )
        config = self.config
        modalities = self._modalities_of(params)
        context = self._context(params.get("input"))
        tools = params.get("tools", config.get("tools") or [])
        tools = tools if isinstance(tools, list) else []
        output = dict(config["audio"]["output"])
        requested = params.get("audio")
        if isinstance(requested, dict) and isinstance(requested.get("output"), dict):
            self._check_format(requested["output"].get("format"), "response.audio.output.format")
            output.update(requested["output"])
        found = read_format({"audio": {"output": output}}, "output")
        speaks = "audio" in modalities
        turn = Turn(
            model=config["model"],
            user_text=_user_text(context),
            has_tools=bool(tools),
            tool_names=function_names(tools),
            has_tool_result=bool(context) and context[-1].get("type") == "function_call_output",
            audio=(found[0] if found is not None else DEFAULT_FORMAT) if speaks else None,
            say=say,
            out_of_band=not in_band,
            instructions=params.get("instructions")
            if isinstance(params.get("instructions"), str)
            else None,
        )
        answer = self._replier(turn)
        if isinstance(answer, Refusal):
            return [
                self.error(
                    answer.status,
                    answer.message,
                    code=answer.code,
                    param=answer.param,
                    kind=answer.kind,
                )
            ]
        shape = {
            "conversation_id": self.conversation_id if in_band else None,
            "output_modalities": list(modalities),
            "max_output_tokens": params.get("max_output_tokens", config.get("max_output_tokens")),
            "audio": {
                "output": {
                    "format": output.get("format"),
                    "voice": output.get("voice", config.get("voice")),
                }
            }
            if speaks
            else None,
            "metadata": params.get("metadata"),
        }
        run = ResponseRun(
            self._ids.make("resp_"),
            answer.events,
            answer.tag,
            ids=self._ids,
            shape=shape,
            conversation=self.conversation if in_band else None,
            after_created=self._rate_limits if self.rate_limits and not self._bridged else None,
            binary_audio=self._binary_output(),
            feed=answer.feed,
        )
        self._runs = {rid: r for rid, r in self._runs.items() if not r.done}
        self._runs[run.response_id] = run
        if in_band:
            self._active = run
        return [run]

    def _context(self, given: Any) -> list[dict[str, Any]]:
        """The items a response answers: its ``input`` (item references resolved), else
        the conversation."""
        if given is None:
            return [self.conversation.items[i] for i in self.conversation.order]
        if not isinstance(given, list):
            raise InvalidMessage(
                "invalid_type",
                "Invalid type for 'response.input': expected an array.",
                "response.input",
            )
        items: list[dict[str, Any]] = []
        for position, entry in enumerate(given):
            if not isinstance(entry, dict):
                continue
            if entry.get("type") == "item_reference":
                found = self.conversation.items.get(entry.get("id"))  # type: ignore[arg-type]
                if found is None:
                    raise InvalidMessage(
                        "invalid_value",
                        f"Conversation item with id '{entry.get('id')}' not found.",
                        f"response.input[{position}].id",
                    )
                items.append(found)
            else:
                items.append(entry)
        return items

    def _rate_limits(self, usage: Usage | None) -> list[str]:
        self._requests += 1
        self._tokens += (usage.total_tokens or 0) if usage is not None else 0
        limits = []
        for name, limit, used in (
            ("requests", _REQUESTS_LIMIT, self._requests),
            ("tokens", _TOKENS_LIMIT, self._tokens),
        ):
            limits.append(
                {
                    "name": name,
                    "limit": limit,
                    "remaining": max(limit - used, 0),
                    "reset_seconds": round(60 * min(used, limit) / limit, 3),
                }
            )
        return [self._message("rate_limits.updated", rate_limits=limits)]

    def _on_response_cancel(self, value: dict[str, Any]) -> list[Outbound]:
        rid = value.get("response_id")
        run = self._runs.get(rid) if isinstance(rid, str) else self.active
        if run is None or run.done:
            raise InvalidMessage(
                "response_cancel_not_active", "Cancellation failed: no active response found"
            )
        if self._bridged:
            self._intents.append(Cancel(response_id=run.response_id))
        return list(run.cancel("client_cancelled"))

    # -- messages ------------------------------------------------------------------------

    def _message(self, kind: str, **fields: Any) -> str:
        return dump_message({"type": kind, "event_id": self._ids.make("event_"), **fields})

    def _error(
        self,
        code: str | None,
        message: str,
        param: str | None = None,
        event_id: str | None = None,
        *,
        type_: str = "invalid_request_error",
    ) -> str:
        return self._message(
            "error",
            error={
                "type": type_,
                "code": code,
                "message": message,
                "param": param,
                "event_id": event_id,
            },
        )


def _modalities(value: Any, param: str) -> None:
    if not (isinstance(value, list) and len(value) == 1 and value[0] in ("text", "audio")):
        raise InvalidMessage(
            "invalid_value",
            f"Invalid value: {value!r}. Supported values are: ['text'], ['audio'].",
            param,
        )


def _turn_detection(value: Any) -> Any:
    """A ``turn_detection`` as the session states it: the defaults of its type filled in."""
    if not isinstance(value, dict):
        return None
    base = _SEMANTIC_VAD if value.get("type") == "semantic_vad" else _SERVER_VAD
    return {**base, **value}


def _item_intent(item: dict[str, Any], item_id: str) -> Intent:
    """What a ``conversation.item.create`` asks of a bridge's upstream."""
    kind = item.get("type")
    if kind == "function_call_output":
        output = item.get("output")
        return ToolOutput(
            call_id=str(item.get("call_id") or ""),
            output=output if isinstance(output, str) else dump_message(output),
            item_id=item_id,
        )
    if kind == "function_call":
        return AddToolCall(
            call_id=str(item.get("call_id") or ""),
            name=str(item.get("name") or ""),
            arguments=str(item.get("arguments") or ""),
            item_id=item_id,
        )
    texts: list[str] = []
    images: list[str] = []
    audio = bytearray()
    for part in item.get("content") or []:
        if not isinstance(part, dict):
            continue
        ptype = part.get("type")
        if ptype == "input_image":
            url = part.get("image_url")
            images.append(url if isinstance(url, str) else "")
        elif ptype == "input_audio" and isinstance(part.get("audio"), str):
            with contextlib.suppress(binascii.Error, ValueError):
                audio += base64.b64decode(part["audio"], validate=True)
        else:
            text = part.get("text", part.get("transcript"))
            if isinstance(text, str):
                texts.append(text)
    return AddMessage(
        role=str(item.get("role") or "user"),
        text="".join(texts),
        images=tuple(images),
        audio=bytes(audio) if audio else None,
        item_id=item_id,
    )


def _stored_part(part: Any) -> Any:
    """A content part as the conversation keeps it: input audio without its bytes."""
    if isinstance(part, dict) and part.get("type") == "input_audio":
        transcript = part.get("transcript")
        return {
            "type": "input_audio",
            "transcript": transcript if isinstance(transcript, str) else None,
        }
    return part


def _user_text(items: list[dict[str, Any]]) -> str:
    """The text of the last user message (its text parts and spoken transcripts)."""
    for item in reversed(items):
        if item.get("type") == "message" and item.get("role") == "user":
            texts = []
            for part in item.get("content") or []:
                if not isinstance(part, dict):
                    continue
                text = (
                    part.get("text") if part.get("type") == "input_text" else part.get("transcript")
                )
                if isinstance(text, str):
                    texts.append(text)
            return " ".join(texts)
    return ""
