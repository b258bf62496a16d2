"""The Lyria RealTime server, sans-I/O: what the emulator runs for one ``gemini_lyria``
connection.

The first client message must be ``setup`` naming a Lyria model
(``models/lyria-...``); it is answered ``{"setupComplete":{}}``. ``clientContent``
replaces the weighted prompts: each prompt is put to the replier as a turn of its own
text, and one it refuses (a scenario matching it with an ``http_error`` fault) is
answered ``filteredPrompt`` (``{text, filteredReason}``: the refusal's message) and
left out of the music. ``musicGenerationConfig`` replaces the configuration.
``playbackControl``: ``PLAY`` starts the music (a reply without end: one
``serverContent`` message per :attr:`LyriaServer.chunk_seconds` of audio, its chunk's
``sourceMetadata`` the prompts and configuration it was made from), ``PAUSE`` holds it
(a later ``PLAY`` goes on from where it was), ``STOP`` holds it and resets the context,
``RESET_CONTEXT`` resets the context without stopping. What the music sounds like is
:mod:`.music`'s (its context is the position in the tone).

The replier is asked once more at each ``PLAY``, with the active prompts' texts (one
per line): its scenario times the music (by default, real time: one chunk per
``chunk_seconds``; a scenario's ``timing`` changes it), and a refusal closes the
connection (1011). The service reports errors as close codes, and so does the server:
a malformed or unknown message, a message before ``setup``, a second ``setup``, a
zero weight or an unknown enum value closes it with 1007 (invalid argument); a model
other than Lyria with 1008.
"""

from __future__ import annotations

import base64
from typing import Any, ClassVar, Final

from polystream.dialects._errors import error_body
from polystream.dialects._realtime.server import (
    Close,
    IdMaker,
    Message,
    Outbound,
    Refusal,
    Replier,
    ReplyRun,
    SocketServer,
    Turn,
)
from polystream.dialects.gemini_lyria.music import music_pcm
from polystream.dialects.gemini_lyria.wire import (
    CLIENT_KEYS,
    CONFIG_FIELDS,
    CONTROLS,
    MIME_TYPE,
    MODES,
    OUTPUT,
    SCALES,
)
from polystream.errors import ProtocolError
from polystream.events import ErrorInfo
from polystream.wire.ws import MessageReader, dump_message

__all__ = ["LyriaServer", "MusicRun", "MusicState"]

INVALID: Final = 1007
POLICY: Final = 1008
INTERNAL: Final = 1011
_SETUP_COMPLETE: Final = '{"setupComplete":{}}'
_WIRE_FIELDS: Final = dict(CONFIG_FIELDS.values())


class MusicState:
    """What the music is made from: the prompts and configuration in force, and the
    position in the context (frames since it began)."""

    def __init__(self) -> None:
        self.prompts: list[dict[str, Any]] = []
        self.config: dict[str, Any] = {}
        self.position = 0

    def metadata(self) -> dict[str, Any]:
        """A chunk's ``sourceMetadata``."""
        out: dict[str, Any] = {"clientContent": {"weightedPrompts": list(self.prompts)}}
        if self.config:
            out["musicGenerationConfig"] = dict(self.config)
        return out


class MusicRun(ReplyRun):
    """The music from a ``PLAY``, written chunk by chunk until it is ended.

    Args:
        response_id: An id for the run (the service names none on the wire).
        tag: Handed back to whoever drives the run.
        state: The server's music state, read at each chunk (a new prompt or
            configuration is heard from the next one).
        frames: Frames per chunk.
    """

    def __init__(self, response_id: str, tag: Any, state: MusicState, frames: int) -> None:
        self.response_id = response_id
        self.tag = tag
        self._state = state
        self._frames = frames
        self._ended = False

    @property
    def done(self) -> bool:
        return self._ended

    def next(self) -> Message | None:
        if self._ended:
            return None
        state = self._state
        pcm = music_pcm(
            [(p["text"], p["weight"]) for p in state.prompts],
            start=state.position,
            frames=self._frames,
            density=state.config.get("density"),
            bpm=state.config.get("bpm"),
        )
        state.position += self._frames
        chunk = {
            "data": base64.b64encode(pcm).decode("ascii"),
            "mimeType": MIME_TYPE,
            "sourceMetadata": state.metadata(),
        }
        return Message(text=dump_message({"serverContent": {"audioChunks": [chunk]}}), audio=True)

    def fail(self, error: ErrorInfo) -> None:
        """End the music (the service has no in-band error: a scenario closes the
        connection with its ``close`` fault instead)."""
        self._ended = True

    def end(self) -> None:
        """End the music (``PAUSE``, ``STOP``)."""
        self._ended = True


class LyriaServer(SocketServer):
    """One Lyria RealTime connection, served (see the module docstring).

    Args:
        replier: Chooses what filters a prompt and what times the music.
        model: Unused (the model comes in ``setup``).
        created: Unused.
        seed: What the run ids derive from.
        query: Unused.
    """

    family: ClassVar[str] = "gemini_lyria"
    chunk_seconds: ClassVar[float] = 1.0
    """Seconds of audio per ``serverContent`` message."""

    def __init__(
        self,
        replier: Replier,
        *,
        model: str = "",
        created: int = 0,
        seed: str = "polystream",
        query: dict[str, str] | None = None,
    ) -> None:
        self._replier = replier
        self._ids = IdMaker(seed)
        self._reader = MessageReader(name=self.family)
        self.model: str | None = None
        """The model ``setup`` named (None before it)."""
        self.state = MusicState()
        self._run: MusicRun | None = None

    # -- the connection ----------------------------------------------------------------

    def open(self) -> list[Outbound]:
        return []

    def receive(self, message: str | bytes) -> list[Outbound]:
        try:
            value = self._reader.read(message).value
        except ProtocolError as exc:
            return [_invalid(f"Invalid JSON payload received. {exc.message}")]
        if not isinstance(value, dict) or len(value) != 1:
            return [_invalid("a message must hold exactly one of " + ", ".join(CLIENT_KEYS))]
        ((key, body),) = value.items()
        if key not in CLIENT_KEYS:
            return [_invalid(f'Unknown name "{key}": Cannot find field.')]
        if key == "setup":
            return self._setup(body)
        if self.model is None:
            return [_invalid(f"the first message must be setup, not {key}")]
        if key == "clientContent":
            return self._prompts(body)
        if key == "musicGenerationConfig":
            return self._configure(body)
        return self._control(body)

    def finished(self, run: ReplyRun) -> list[Outbound]:
        if run is self._run:
            self._run = None
        return []

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
        """A Google error object as a message (the service closes the connection
        instead; this is what a caller that needs a message is given)."""
        return dump_message(error_body("google", status, message, kind=kind, param=param))

    # -- messages ----------------------------------------------------------------------

    def _setup(self, body: Any) -> list[Outbound]:
        if self.model is not None:
            return [_invalid("setup was sent already")]
        model = body.get("model") if isinstance(body, dict) else None
        if not isinstance(model, str) or not model:
            return [_invalid("setup.model is required")]
        if not model.startswith("models/lyria"):
            reason = f"{model} is not found for API version v1alpha, or is not supported "
            return [_close(POLICY, reason + "for bidiGenerateMusic.")]
        self.model = model
        return [_SETUP_COMPLETE]

    def _prompts(self, body: Any) -> list[Outbound]:
        prompts = body.get("weightedPrompts") if isinstance(body, dict) else None
        if not isinstance(prompts, list):
            return [_invalid("clientContent.weightedPrompts must be a list")]
        out: list[Outbound] = []
        kept: list[dict[str, Any]] = []
        for position, prompt in enumerate(prompts):
            text = prompt.get("text") if isinstance(prompt, dict) else None
            weight = prompt.get("weight", 1.0) if isinstance(prompt, dict) else None
            if not isinstance(text, str):
                return [_invalid(f"weightedPrompts[{position}].text must be a string")]
            if isinstance(weight, bool) or not isinstance(weight, int | float) or weight == 0:
                return [_invalid(f"weightedPrompts[{position}].weight must not be 0")]
            answer = self._replier(Turn(model=self.model or "", user_text=text, audio=OUTPUT))
            if isinstance(answer, Refusal):
                filtered = {"text": text, "filteredReason": answer.message}
                out.append(dump_message({"filteredPrompt": filtered}))
            else:
                kept.append({"text": text, "weight": weight})
        self.state.prompts = kept
        return out

    def _configure(self, body: Any) -> list[Outbound]:
        if not isinstance(body, dict):
            return [_invalid("musicGenerationConfig must be an object")]
        for name, value in body.items():
            types = _WIRE_FIELDS.get(name)
            if types is None:
                return [_invalid(f"Unknown name \"{name}\" at 'music_generation_config'.")]
            if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
                return [_invalid(f"musicGenerationConfig.{name}: wrong type")]
        if body.get("scale", SCALES[0]) not in SCALES:
            return [_invalid(f"Invalid value at 'music_generation_config.scale': {body['scale']}")]
        mode = body.get("musicGenerationMode", MODES[0])
        if mode not in MODES:
            return [_invalid(f"Invalid value at 'music_generation_config.mode': {mode}")]
        self.state.config = dict(body)
        return []

    def _control(self, body: Any) -> list[Outbound]:
        if body not in CONTROLS:
            return [_invalid(f"Invalid value at 'playback_control': {body!r}")]
        if body == "PLAY":
            if self._run is not None:
                return []
            texts = "\n".join(p["text"] for p in self.state.prompts)
            turn = Turn(
                model=self.model or "", user_text=texts, audio=OUTPUT, pace=self.chunk_seconds
            )
            answer = self._replier(turn)
            if isinstance(answer, Refusal):
                return [_close(INTERNAL, answer.message)]
            frames = round(self.chunk_seconds * OUTPUT.rate)
            self._run = MusicRun(self._ids.make("lyria_"), answer.tag, self.state, frames)
            return [self._run]
        if body in ("PAUSE", "STOP") and self._run is not None:
            self._run.end()
        if body in ("STOP", "RESET_CONTEXT"):
            self.state.position = 0
        return []


def _close(code: int, reason: str) -> Close:
    """A close, its reason cut to the 123 bytes a close frame holds."""
    data = reason.encode("utf-8")
    if len(data) > 123:
        reason = data[:123].decode("utf-8", "ignore")
    return Close(code=code, reason=reason)


def _invalid(reason: str) -> Close:
    return _close(INVALID, reason)
