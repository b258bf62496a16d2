"""The transcription request codec (``POST /v1/audio/transcriptions``): a multipart form
<-> the unified :class:`~polystream.request_model.Request`.

The request is a ``multipart/form-data`` body, not JSON. The codec works on the form as a
dict, which the shell that reads the HTTP request builds and the shell that sends one
encodes as multipart again:

* each text field under its name, as its text (``"stream": "true"``, ``"language":
  "en"``); a field sent more than once (``include[]``) as the list of its values, in order;
* each file part under its field name as its metadata only, ``{"filename": str,
  "content_type": str, "size": int}`` (the audio stays with the shell).

JSON values are accepted too (``"stream": true``). The model and ``stream`` are read; the
audio file and every other field (``language``, ``prompt``, ``response_format``,
``include[]``, ``temperature``, ``chunking_strategy``, ...) stay in
:attr:`Request.extra`: a transcription has no text input, so the unified request has no
messages. :meth:`TranscriptionCodec.build` writes the form dict back (``stream`` as the
text ``"true"`` / ``"false"``) with those fields, and needs the file among them.
"""

from __future__ import annotations

from typing import Any, Final

from polystream.dialects._request_common import FamilyCodec
from polystream.dialects._spec import RequestCodec
from polystream.errors import RequestError
from polystream.request_model import NativeRequest, Request

__all__ = ["TRANSCRIPTION", "TranscriptionCodec", "file_of", "form_bool"]

DIALECT: Final = "openai_transcription"
PATH: Final = "/audio/transcriptions"


def form_bool(body: dict[str, Any], key: str) -> bool:
    """A boolean form field (``true`` / ``false`` as text, or JSON); absent is False.

    Raises:
        RequestError: The field holds anything else.
    """
    value = body.get(key)
    if value is None or value is False or value == "false":
        return False
    if value is True or value == "true":
        return True
    raise RequestError("expected true or false", param=key)


def file_of(body: dict[str, Any], key: str) -> dict[str, Any]:
    """A file part's metadata (``{"filename", "content_type", "size"}``).

    Raises:
        RequestError: The field is missing or is not a file's metadata.
    """
    value = body.get(key)
    if value is None:
        raise RequestError(f"{key} is required (a file part)", param=key)
    if not isinstance(value, dict) or not isinstance(value.get("filename"), str):
        raise RequestError("expected a file part ({filename, content_type, size})", param=key)
    return value


class TranscriptionCodec(FamilyCodec):
    """Transcription forms (see the module docstring and
    :class:`polystream.dialects._request_common.FamilyCodec`)."""

    family = "transcription"
    read_fields = frozenset(("model", "stream"))
    decided = ("model", "stream")
    settings: dict[str, str] = {}

    def parse(self, body: dict[str, Any], *, model: str | None = None) -> Request:
        """The unified request of a form dict: the model and ``stream``; the audio file
        (required) and the other fields go to :attr:`Request.extra` (set by
        :func:`polystream.request.codecs.parse_request`).

        Raises:
            RequestError: No model, no file part, or a malformed ``stream``.
        """
        name = body.get("model", model)
        if not isinstance(name, str) or not name:
            raise RequestError("model is required", param="model")
        file_of(body, "file")
        return Request(model=name, stream=form_bool(body, "stream"))

    def build(self, request: Request, *, framing: str = "sse") -> NativeRequest:
        """The form dict of ``request``: its model, ``stream`` and the fields it keeps in
        :attr:`Request.extra` (those of a request parsed from a transcription form, or made
        in code), for a shell to send as multipart.

        Raises:
            RequestError: The request holds no audio file (``extra["file"]``), or has
                messages (a transcription takes no text input).
        """
        extra = request.extra if request.origin in (None, DIALECT) else None
        if request.messages or request.system:
            raise RequestError("a transcription takes audio, not messages", param="messages")
        body: dict[str, Any] = dict(extra or {})
        file_of(body, "file")
        body["model"] = request.model
        body["stream"] = "true" if request.stream else "false"
        return NativeRequest(path=PATH, body=body)


TRANSCRIPTION: Final[RequestCodec] = TranscriptionCodec()
"""The ``openai_transcription`` request codec."""
