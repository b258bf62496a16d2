"""The speech request codec (``POST /v1/audio/speech``): a native body <-> the unified
:class:`~polystream.request_model.Request`.

``input`` becomes one user message of its text and ``model`` the model; the stream is
``stream_format: "sse"``. Every other field (``voice``, ``instructions``,
``response_format``, ``speed``, ``stream_format``) stays in :attr:`Request.extra` and is
written back in its place, so a parsed body builds back to the same body, field for
field and in order.
"""

from __future__ import annotations

from typing import Any, Final

from polystream.dialects._request_common import FamilyCodec, _model, _str
from polystream.dialects._spec import RequestCodec
from polystream.errors import RequestError
from polystream.request_model import Message, NativeRequest, Request, TextPart

__all__ = ["SPEECH", "SpeechCodec"]

_PATH: Final = "/audio/speech"
_ORIGIN: Final = "openai_speech"


def _parse(body: dict[str, Any]) -> Request:
    if "input" not in body:
        raise RequestError("input is required", param="input")
    text = _str(body["input"], "input")
    request = Request(
        model=_model(body),
        messages=[Message(role="user", content=[TextPart(text=text)])],
    )
    request.stream = body.get("stream_format") == "sse"
    return request


def _build(request: Request) -> NativeRequest:
    if request.tools:
        raise RequestError("the speech endpoint takes no tools", param="tools")
    messages = request.messages
    if len(messages) != 1 or messages[0].role != "user":
        raise RequestError(
            f"the speech endpoint speaks one user message's text (the request has "
            f"{len(messages)} messages)",
            param="input",
        )
    for j, part in enumerate(messages[0].content):
        if not isinstance(part, TextPart):
            raise RequestError(
                "the speech endpoint takes text only", param=f"messages[0].content[{j}]"
            )
    text = "".join(p.text for p in messages[0].content if isinstance(p, TextPart))
    body: dict[str, Any] = {"input": text, "model": request.model}
    extra = request.extra if request.origin in (None, _ORIGIN) else None
    if extra:
        for name, value in extra.items():
            body.setdefault(name, value)
    if request.system and "instructions" not in body:
        body["instructions"] = request.system
    if request.stream:
        body["stream_format"] = "sse"
    elif body.get("stream_format") == "sse":
        del body["stream_format"]
    return NativeRequest(path=_PATH, body=body)


class SpeechCodec(FamilyCodec):
    """Speech bodies (see :class:`polystream.dialects._request_common.FamilyCodec`)."""

    family = "speech"
    read_fields = frozenset(("model", "input"))
    decided = ("model", "stream_format")

    def parse(self, body: dict[str, Any], *, model: str | None = None) -> Request:
        return _parse(body)

    def build(self, request: Request, *, framing: str = "sse") -> NativeRequest:
        return _build(request)


SPEECH: Final[RequestCodec] = SpeechCodec()
"""The ``openai_speech`` request codec."""
