"""The Lyria RealTime wire vocabulary (google-genai's ``LiveMusicClientMessage`` and
``LiveMusicServerMessage``, camelCase on the wire): what both the session and the
emulator's server read and write.

Each client message has exactly one key: ``setup`` (``{model}``), ``clientContent``
(``{weightedPrompts: [{text, weight}]}``), ``musicGenerationConfig`` (the fields of
:data:`CONFIG_FIELDS`) or ``playbackControl`` (one of :data:`CONTROLS`). A server
message holds ``setupComplete`` (``{}``), ``serverContent`` (``{audioChunks: [{data,
mimeType, sourceMetadata}]}``) or ``filteredPrompt`` (``{text, filteredReason}``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from polystream.audio.formats import AudioFormat
from polystream.errors import LocalProtocolError

__all__ = [
    "CLIENT_KEYS",
    "CONFIG_FIELDS",
    "CONTROLS",
    "MIME_TYPE",
    "MODES",
    "OUTPUT",
    "SCALES",
    "SERVER_KEYS",
    "model_name",
    "weighted_prompts",
]

OUTPUT: Final = AudioFormat("pcm16", 48000, 2)
"""What the service sends: 16-bit PCM, 48 kHz, stereo."""

MIME_TYPE: Final = "audio/l16;rate=48000;channels=2"
"""The media type of the audio chunks (the emulator's; the session reads whatever the
chunks state)."""

CLIENT_KEYS: Final = ("setup", "clientContent", "musicGenerationConfig", "playbackControl")
SERVER_KEYS: Final = ("setupComplete", "serverContent", "filteredPrompt")

CONTROLS: Final = ("PLAY", "PAUSE", "STOP", "RESET_CONTEXT")
"""The playback controls (``PLAYBACK_CONTROL_UNSPECIFIED`` aside)."""

SCALES: Final = (
    "SCALE_UNSPECIFIED",
    "C_MAJOR_A_MINOR",
    "D_FLAT_MAJOR_B_FLAT_MINOR",
    "D_MAJOR_B_MINOR",
    "E_FLAT_MAJOR_C_MINOR",
    "E_MAJOR_D_FLAT_MINOR",
    "F_MAJOR_D_MINOR",
    "G_FLAT_MAJOR_E_FLAT_MINOR",
    "G_MAJOR_E_MINOR",
    "A_FLAT_MAJOR_F_MINOR",
    "A_MAJOR_G_FLAT_MINOR",
    "B_FLAT_MAJOR_G_MINOR",
    "B_MAJOR_A_FLAT_MINOR",
)
MODES: Final = ("MUSIC_GENERATION_MODE_UNSPECIFIED", "QUALITY", "DIVERSITY", "VOCALIZATION")

CONFIG_FIELDS: Final[dict[str, tuple[str, tuple[type, ...]]]] = {
    "temperature": ("temperature", (int, float)),
    "top_k": ("topK", (int,)),
    "seed": ("seed", (int,)),
    "guidance": ("guidance", (int, float)),
    "bpm": ("bpm", (int,)),
    "density": ("density", (int, float)),
    "brightness": ("brightness", (int, float)),
    "scale": ("scale", (str,)),
    "mute_bass": ("muteBass", (bool,)),
    "mute_drums": ("muteDrums", (bool,)),
    "only_bass_and_drums": ("onlyBassAndDrums", (bool,)),
    "music_generation_mode": ("musicGenerationMode", (str,)),
}
"""``musicGenerationConfig``'s fields: Python name -> (wire name, accepted types)."""


def model_name(model: str) -> str:
    """The model as the service names it: ``lyria-realtime-exp`` ->
    ``models/lyria-realtime-exp`` (as google-genai's ``t_model`` does)."""
    return model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"


def weighted_prompts(
    prompts: str | Sequence[str | tuple[str, float] | Mapping[str, Any]], dialect: str
) -> list[dict[str, Any]]:
    """``weightedPrompts`` from a text, or texts (weight 1.0), ``(text, weight)`` pairs
    or ``{"text", "weight"}`` mappings.

    Raises:
        LocalProtocolError: No prompt, a text that is not a string, or a weight that is
            not a number or is 0 (the service refuses it).
    """
    items = [prompts] if isinstance(prompts, str) else list(prompts)
    if not items:
        raise LocalProtocolError("at least one weighted prompt is needed", dialect=dialect)
    out: list[dict[str, Any]] = []
    for position, item in enumerate(items):
        text: Any
        weight: Any
        if isinstance(item, str):
            text, weight = item, 1.0
        elif isinstance(item, tuple):
            text, weight = item
        elif isinstance(item, Mapping):
            text, weight = item.get("text"), item.get("weight", 1.0)
        else:
            raise LocalProtocolError(f"prompt {position}: not a text", dialect=dialect)
        if not isinstance(text, str):
            raise LocalProtocolError(f"prompt {position}: text must be a string", dialect=dialect)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or weight == 0:
            raise LocalProtocolError(
                f"prompt {position} ({text!r}): weight must be a nonzero number (got {weight!r})",
                dialect=dialect,
            )
        out.append({"text": text, "weight": weight})
    return out
