"""The xAI Voice Agent server, sans-I/O: the Realtime API server
(:class:`~polystream.dialects._realtime_api.server.RealtimeServer`) with xAI's
differences, what the emulator runs for one ``xai_realtime`` connection.

* The connection opens with ``conversation.created`` (the conversation's id), then
  ``session.created`` in xAI's shape: no session ``type`` (one given is ignored),
  ``voice`` (``eve``), ``turn_detection`` at the top (server VAD), ``audio.input`` and
  ``audio.output`` each with its ``format`` (PCM at 24 kHz) and ``transport``
  (``json``), and ``resumption``.
* ``audio/pcm`` at any rate from 8 to 48 kHz: the tone, the voice activity and the
  truncation follow the stated rate.
* ``audio.output.transport: "binary"``: each output audio delta is a bytes message of
  the raw audio (no ``response.output_audio.delta``); ``audio.input.transport:
  "binary"``: a bytes message is input audio, appended as ``input_audio_buffer.append``
  would (else it is refused with an ``error``).
* ``resumption: {"enabled": true}`` is answered with the conversation's id:
  ``session.updated`` states ``resumption: {"enabled": true, "conversation_id": ...}``.
  (No turns are kept across connections.)
* ``ping`` (``{"timestamp": <ms>}``) every :data:`PING_SECONDS`.
* A ``conversation.item.create`` of a ``force_message`` (an assistant message of
  ``output_text``) starts a response that says its text verbatim (its ``voice``
  overriding the session's).
* A response's modalities are its ``output_modalities`` or ``modalities`` (``text``,
  ``audio`` or both), else the session's (``audio``).
* 9 client messages (no ``conversation.item.retrieve``, no
  ``output_audio_buffer.clear``), no ``rate_limits.updated``; the lifetime's end is an
  ``error`` of code ``max_duration``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

from polystream.dialects._realtime.server import Outbound
from polystream.dialects._realtime_api.server import InvalidMessage, RealtimeServer

__all__ = ["PING_SECONDS", "XAIRealtimeServer", "xai_session"]

PING_SECONDS: Final = 15.0
"""Seconds between the emulator's ``ping`` messages."""

_CLIENT_ORDER: Final = (
    "session.update",
    "input_audio_buffer.append",
    "input_audio_buffer.commit",
    "input_audio_buffer.clear",
    "conversation.item.create",
    "conversation.item.truncate",
    "conversation.item.delete",
    "response.create",
    "response.cancel",
)
_SERVER_VAD: Final[dict[str, Any]] = {
    "type": "server_vad",
    "threshold": 0.85,
    "prefix_padding_ms": 333,
    "silence_duration_ms": 500,
    "idle_timeout_ms": None,
}
_TRANSPORTS: Final = ("json", "binary")
_MODALITIES: Final = frozenset({"text", "audio"})
_EXPIRED: Final = "The session reached its maximum duration of 120 minutes."


def xai_session(session_id: str, model: str) -> dict[str, Any]:
    """The configuration an xAI session starts with (``session.created``)."""
    return {
        "id": session_id,
        "object": "realtime.session",
        "model": model,
        "instructions": "",
        "voice": "eve",
        "turn_detection": dict(_SERVER_VAD),
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "transcription": None,
                "transport": "json",
            },
            "output": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "speed": 1.0,
                "transport": "json",
            },
        },
        "tools": [],
        "resumption": {"enabled": False},
    }


class XAIRealtimeServer(RealtimeServer):
    """One xAI Voice Agent connection, served (see the module docstring; made as
    :class:`~polystream.dialects._realtime_api.server.RealtimeServer` is)."""

    family: ClassVar[str] = "xai_realtime"
    client_messages: ClassVar[tuple[str, ...]] = _CLIENT_ORDER
    pcm_rates: ClassVar[tuple[int, int]] = (8000, 48000)
    rate_limits: ClassVar[bool] = False
    keepalive: ClassVar[float | None] = PING_SECONDS

    # -- what differs ------------------------------------------------------------------

    def initial_config(self, session_id: str, model: str, created: int) -> dict[str, Any]:
        return xai_session(session_id, model)

    def detection(self) -> dict[str, Any] | None:
        found = self.config.get("turn_detection")
        return found if isinstance(found, dict) else None

    def _check_session(self, session: dict[str, Any]) -> None:
        for key in ("output_modalities", "modalities"):
            if key in session:
                _check_modalities(session[key], f"session.{key}")
        resumption = session.get("resumption")
        if resumption is not None and not (
            isinstance(resumption, dict) and isinstance(resumption.get("enabled", False), bool)
        ):
            raise InvalidMessage(
                "invalid_type",
                "Invalid type for 'session.resumption': expected an object with a boolean "
                "'enabled'.",
                "session.resumption",
            )

    def _merge(self, merged: dict[str, Any], session: dict[str, Any]) -> None:
        for key, field in session.items():
            if key in ("type", "audio"):
                continue
            if key == "turn_detection":
                # (``{"type": null}``, like null, turns detection off.)
                on = isinstance(field, dict) and field.get("type", "server_vad") is not None
                merged[key] = {**_SERVER_VAD, **field} if on else None
            elif key == "resumption":
                enabled = field.get("enabled", False) is True
                merged[key] = {"enabled": enabled}
                if enabled:
                    merged[key]["conversation_id"] = self.conversation_id
            else:
                merged[key] = field
        audio = session.get("audio")
        if not isinstance(audio, dict):
            return
        for side in ("input", "output"):
            given = audio.get(side)
            if not isinstance(given, dict):
                continue
            self._check_format(given.get("format"), f"session.audio.{side}.format")
            transport = given.get("transport")
            if transport is not None and transport not in _TRANSPORTS:
                raise InvalidMessage(
                    "invalid_value",
                    f"Invalid value: '{transport}'. Supported values are: 'json', 'binary'.",
                    f"session.audio.{side}.transport",
                )
            merged["audio"][side].update(given)

    def _modalities_of(self, params: dict[str, Any]) -> list[str]:
        for key in ("output_modalities", "modalities"):
            if key in params:
                _check_modalities(params[key], f"response.{key}")
                return list(params[key])
        for key in ("output_modalities", "modalities"):
            if key in self.config:
                return list(self.config[key])
        return ["audio"]

    def _binary_output(self) -> bool:
        return bool(self.config["audio"]["output"].get("transport") == "binary")

    # -- the connection ----------------------------------------------------------------

    def open(self) -> list[Outbound]:
        conversation = {"id": self.conversation_id, "object": "realtime.conversation"}
        return [self._message("conversation.created", conversation=conversation), *super().open()]

    def receive(self, message: str | bytes) -> list[Outbound]:
        if isinstance(message, bytes | bytearray):
            if self.config["audio"]["input"].get("transport") != "binary":
                return [
                    self._error(
                        "invalid_value",
                        "A binary message is input audio only with audio.input.transport 'binary'.",
                    )
                ]
            return self._append(bytes(message))
        return super().receive(message)

    def ping(self, timestamp_ms: int) -> list[str]:
        return [self._message("ping", timestamp=timestamp_ms)]

    def expire(self) -> list[str]:
        return [self._error("max_duration", _EXPIRED)]

    # -- forced messages ---------------------------------------------------------------

    def _on_conversation_item_create(self, value: dict[str, Any]) -> list[Outbound]:
        item = value.get("item")
        if not (isinstance(item, dict) and item.get("type") == "force_message"):
            return super()._on_conversation_item_create(value)
        parts = item.get("content")
        texts = [
            part["text"]
            for part in (parts if isinstance(parts, list) else [])
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        ]
        if not texts:
            raise InvalidMessage(
                "missing_required_parameter",
                "Missing required parameter: 'item.content' (the text to say).",
                "item.content",
            )
        params: dict[str, Any] = {}
        voice = item.get("voice")
        if isinstance(voice, str):
            params["audio"] = {"output": {"voice": voice}}
        return self._create(params, say="".join(texts))


def _check_modalities(value: Any, param: str) -> None:
    if not (isinstance(value, list) and value and set(value) <= _MODALITIES):
        raise InvalidMessage(
            "invalid_value",
            f"Invalid value: {value!r}. Supported values are: 'text', 'audio'.",
            param,
        )
