"""Request summaries of the media and agent-session families.

Each family's request codec (its dialect folder's ``request.py``, through
``DialectSpec.request_codec()``) reads the model, the stream flag and the text; this
module reads the options that shape an emulated reply (the audio format, the images'
size and number, ``include[]=logprobs``, ...) into a :class:`MediaAsk`, and refuses what
the emulator cannot answer with the provider's status and wording, naming what it can.

A transcription or an image edit arrives as the form dict of a ``multipart/form-data``
body (see :mod:`polystream.wire.multipart`): text fields as text, file parts as their
metadata.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.errors import RequestError
from polystream.scenario._media import (
    AUDIO_MIME,
    COMPRESSED_FORMATS,
    MAX_SIDE,
    PCM_MIME,
    compressed_available,
)

__all__ = ["MEDIA_FAMILIES", "MediaAsk", "audio_ask", "media_ask"]

MEDIA_FAMILIES: Final = frozenset({"speech", "transcription", "images"})
"""The request families whose reply is audio, a transcript or images."""

SPEECH_FORMATS: Final = ("mp3", "opus", "aac", "flac", "wav", "pcm")
"""The speech endpoint's ``response_format`` values."""
_STREAM_FORMATS: Final = ("sse", "audio")
_TRANSCRIPT_FORMATS: Final = ("json", "text", "diarized_json")
"""The transcription ``response_format`` values the emulator answers (``srt``, ``vtt``
and ``verbose_json`` are refused)."""
_QUALITIES: Final = ("auto", "low", "medium", "high", "xhigh", "max", "standard", "hd")
_MAX_SPEECH_INPUT: Final = 4096
_DEFAULT_SIDE: Final = 1024


class MediaAsk(msgspec.Struct, frozen=True, kw_only=True):
    """What a media request asks for, beyond the model, the stream flag and the text.

    Fields:
        audio_format: The audio's format (``mp3``, ``wav``, ``pcm``...); Gemini's
            audio is ``pcm``.
        mime_type: The audio's media type.
        framing: Speech: ``sse`` or ``raw`` (the audio file as the body).
        speak: The text the audio stands for.
        response_format: A transcription's ``response_format``.
        logprobs: A transcription asks for ``include[]=logprobs``.
        diarize: A transcription asks for speakers (``diarized_json``, or a model
            whose name says ``diarize``).
        upload: The uploaded file's name (transcription, image edit).
        upload_size: Its size in bytes.
        operation: Images: ``generation`` or ``edit`` (the route's).
        count: Images: how many (``n``).
        partial_images: Images: partial images before each final one.
        width, height: Images: the requested size (``auto``: 1024 x 1024).
        quality, background: Images: as requested (``auto`` when not).
    """

    audio_format: str | None = None
    mime_type: str | None = None
    framing: str | None = None
    speak: str = ""
    response_format: str | None = None
    logprobs: bool = False
    diarize: bool = False
    upload: str | None = None
    upload_size: int = 0
    operation: str | None = None
    count: int = 1
    partial_images: int = 0
    width: int = _DEFAULT_SIDE
    height: int = _DEFAULT_SIDE
    quality: str = "auto"
    background: str = "auto"


def _invalid(param: str, message: str) -> RequestError:
    return RequestError(message, param=param, code="invalid_value")


def _choice(body: dict[str, Any], key: str, allowed: tuple[str, ...], default: str) -> str:
    value = body.get(key, default)
    if value is None:
        return default
    if value not in allowed:
        listed = ", ".join(f"'{a}'" for a in allowed)
        raise _invalid(key, f"Invalid value: '{value}'. Supported values are: {listed}.")
    return str(value)


def _integer(body: dict[str, Any], key: str, low: int, high: int, default: int) -> int:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise _invalid(key, f"Invalid '{key}': expected an integer from {low} to {high}.")
    return value


def _upload(body: dict[str, Any], key: str) -> tuple[str, int] | None:
    """A file part's name and size (the first, for a repeated field)."""
    value = body.get(key)
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, dict) and isinstance(value.get("filename"), str):
        size = value.get("size")
        return str(value["filename"]), size if isinstance(size, int) else 0
    return None


def media_ask(family: str, body: dict[str, Any], *, operation: str | None) -> MediaAsk:
    """The options of a speech, transcription or images request.

    Raises:
        RequestError: An option the provider refuses, or one the emulator does not
            answer (the message names what it answers).
    """
    if family == "speech":
        return _speech(body)
    if family == "transcription":
        return _transcription(body)
    return _images(body, operation or "generation")


def _speech(body: dict[str, Any]) -> MediaAsk:
    text = body.get("input")
    if isinstance(text, str) and len(text) > _MAX_SPEECH_INPUT:
        raise RequestError(
            f"Invalid 'input': string too long. Expected a string with maximum length "
            f"{_MAX_SPEECH_INPUT}, but got a string with length {len(text)} instead.",
            param="input",
            code="string_above_max_length",
        )
    if body.get("voice") is None:
        raise RequestError(
            "Missing required parameter: 'voice'.",
            param="voice",
            code="missing_required_parameter",
        )
    audio_format = _choice(body, "response_format", SPEECH_FORMATS, "mp3")
    stream_format = _choice(body, "stream_format", _STREAM_FORMATS, "audio")
    if audio_format in COMPRESSED_FORMATS and not compressed_available():
        raise _invalid(
            "response_format",
            f"The emulator writes {audio_format} audio with PyAV, which is not installed "
            "(pip install 'polystream[audio]'); without it it writes 'wav' and 'pcm'.",
        )
    return MediaAsk(
        audio_format=audio_format,
        mime_type=AUDIO_MIME[audio_format],
        framing="sse" if stream_format == "sse" else "raw",
        speak=text if isinstance(text, str) else "",
    )


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _transcription(body: dict[str, Any]) -> MediaAsk:
    response_format = _choice(
        body,
        "response_format",
        ("json", "text", "srt", "verbose_json", "vtt", "diarized_json"),
        "json",
    )
    if response_format not in _TRANSCRIPT_FORMATS:
        raise _invalid(
            "response_format",
            f"The emulator answers response_format 'json', 'text' and 'diarized_json', "
            f"not '{response_format}'.",
        )
    include = _as_list(body.get("include[]", body.get("include")))
    unknown = [v for v in include if v != "logprobs"]
    if unknown:
        raise _invalid(
            "include", f"Invalid value: '{unknown[0]}'. Supported values are: 'logprobs'."
        )
    model = body.get("model")
    diarize = response_format == "diarized_json" or (isinstance(model, str) and "diarize" in model)
    logprobs = bool(include)
    if logprobs and (response_format != "json" or diarize):
        raise _invalid(
            "include",
            "logprobs are only available with response_format 'json' and a model that "
            "does not diarize.",
        )
    name, size = _upload(body, "file") or (None, 0)
    return MediaAsk(
        response_format=response_format,
        logprobs=logprobs,
        diarize=diarize,
        upload=name,
        upload_size=size,
    )


def _size(body: dict[str, Any]) -> tuple[int, int]:
    value = body.get("size")
    if value is None or value == "auto":
        return _DEFAULT_SIDE, _DEFAULT_SIDE
    width, sep, height = str(value).partition("x")
    if sep and width.isdigit() and height.isdigit():
        w, h = int(width), int(height)
        if 1 <= w <= MAX_SIDE and 1 <= h <= MAX_SIDE:
            return w, h
    raise _invalid(
        "size",
        f"Invalid value: '{value}'. The emulator takes 'auto' or WIDTHxHEIGHT, each side "
        f"1 to {MAX_SIDE}.",
    )


def _images(body: dict[str, Any], operation: str) -> MediaAsk:
    output_format = _choice(body, "output_format", ("png", "jpeg", "webp"), "png")
    if output_format != "png":
        raise _invalid(
            "output_format", f"The emulator writes 'png' images only, not '{output_format}'."
        )
    width, height = _size(body)
    upload = _upload(body, "image") or _upload(body, "image[]")
    if operation == "edit" and upload is None:
        raise RequestError(
            "Missing required parameter: 'image'.",
            param="image",
            code="missing_required_parameter",
        )
    return MediaAsk(
        operation=operation,
        count=_integer(body, "n", 1, 10, 1),
        partial_images=_integer(body, "partial_images", 0, 3, 0),
        width=width,
        height=height,
        quality=_choice(body, "quality", _QUALITIES, "auto"),
        background=_choice(body, "background", ("auto", "transparent", "opaque"), "auto"),
        upload=upload[0] if upload is not None else None,
        upload_size=upload[1] if upload is not None else 0,
    )


def audio_ask(config: Any, speak: str) -> MediaAsk | None:
    """A Gemini ``generationConfig`` that asks for audio out
    (``responseModalities: ["AUDIO"]``): 24 kHz PCM standing for ``speak``; None when it
    asks for none."""
    if not isinstance(config, dict):
        return None
    modalities = config.get("responseModalities", config.get("response_modalities"))
    if not isinstance(modalities, list):
        return None
    if not any(isinstance(m, str) and m.upper() == "AUDIO" for m in modalities):
        return None
    return MediaAsk(audio_format="pcm", mime_type=PCM_MIME, speak=speak)
