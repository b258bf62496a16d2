"""The images request codec (``POST /v1/images/generations``, a JSON body, and
``POST /v1/images/edits``, a multipart form) <-> the unified
:class:`~polystream.request_model.Request`.

An edit's ``multipart/form-data`` body reaches the codec as a dict, which the shell that
reads the HTTP request builds and the shell that sends one encodes as multipart again:

* each text field under its name, as its text (``"stream": "true"``, ``"partial_images":
  "2"``); a field sent more than once (``image[]``) as the list of its values, in order;
* each file part under its field name as its metadata only, ``{"filename": str,
  "content_type": str, "size": int}`` (the image bytes stay with the shell).

The ``prompt`` becomes the user message, the model and ``stream`` are read; every other
field (``size``, ``quality``, ``background``, ``output_format``, ``partial_images``, ``n``,
the edit's ``image`` / ``image[]`` and ``mask`` files, ...) stays in
:attr:`Request.extra`. :meth:`ImagesCodec.build` writes the generation body, or the edit
form when the fields include an ``image`` (or ``image[]``) file (``stream`` then as the text
``"true"`` / ``"false"``).
"""

from __future__ import annotations

from typing import Any, Final

from polystream.dialects._request_common import FamilyCodec
from polystream.dialects._spec import RequestCodec
from polystream.errors import RequestError
from polystream.request_model import Message, NativeRequest, Request, TextPart

__all__ = ["IMAGES", "ImagesCodec", "form_bool"]

DIALECT: Final = "openai_images"
GENERATIONS: Final = "/images/generations"
EDITS: Final = "/images/edits"


def form_bool(body: dict[str, Any], key: str) -> bool:
    """A boolean field (JSON, or ``true`` / ``false`` as form text); absent is False.

    Raises:
        RequestError: The field holds anything else.
    """
    value = body.get(key)
    if value is None or value is False or value == "false":
        return False
    if value is True or value == "true":
        return True
    raise RequestError("expected true or false", param=key)


def _is_edit(fields: dict[str, Any]) -> bool:
    return "image" in fields or "image[]" in fields


class ImagesCodec(FamilyCodec):
    """Image generation bodies and edit forms (see the module docstring and
    :class:`polystream.dialects._request_common.FamilyCodec`)."""

    family = "images"
    read_fields = frozenset(("model", "prompt", "stream"))
    decided = ("model", "stream")
    settings: dict[str, str] = {}

    def parse(self, body: dict[str, Any], *, model: str | None = None) -> Request:
        """The unified request of a generation body or an edit form dict.

        Raises:
            RequestError: No prompt, a model that is not a string, or a malformed
                ``stream``.
        """
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise RequestError("prompt is required", param="prompt")
        name = body.get("model", model) or ""
        if not isinstance(name, str):
            raise RequestError("expected a string", param="model")
        return Request(
            model=name,
            messages=[Message(role="user", content=[TextPart(text=prompt)])],
            stream=form_bool(body, "stream"),
        )

    def build(self, request: Request, *, framing: str = "sse") -> NativeRequest:
        """The body of ``request``: the prompt (the last user message's text), the model
        and ``stream``, with the fields it keeps in :attr:`Request.extra` (those of a
        request parsed from an images body, or made in code).

        Raises:
            RequestError: The request has no user text for the prompt.
        """
        prompt = request.last_user_text()
        if not prompt:
            raise RequestError("an image request needs a prompt (a user message)", param="prompt")
        extra = request.extra if request.origin in (None, DIALECT) else None
        body: dict[str, Any] = dict(extra or {})
        edit = _is_edit(body)
        body["prompt"] = prompt
        if request.model:
            body["model"] = request.model
        if edit:
            body["stream"] = "true" if request.stream else "false"
        else:
            body["stream"] = request.stream
        return NativeRequest(path=EDITS if edit else GENERATIONS, body=body)


IMAGES: Final[RequestCodec] = ImagesCodec()
"""The ``openai_images`` request codec."""
