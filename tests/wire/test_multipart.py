"""Multipart forms (``polystream.wire.multipart``): what an HTTP client writes is read as
the form dict the request codecs take, and what polystream writes reads back the same."""

from __future__ import annotations

import httpx
import pytest

from polystream.wire.multipart import FormError, decode_form, encode_form, is_form

AUDIO = bytes(range(256)) * 4 + b"\r\n--not-a-boundary\r\n"


def _httpx_form() -> tuple[str, bytes]:
    request = httpx.Request(
        "POST",
        "http://127.0.0.1/v1/audio/transcriptions",
        data={"model": "gpt-4o-transcribe", "stream": "true", "include[]": ["logprobs", "x"]},
        files={"file": ("speech.wav", AUDIO, "audio/wav")},
    )
    return request.headers["content-type"], request.read()


def test_an_httpx_form_reads_as_the_codec_dict() -> None:
    content_type, body = _httpx_form()
    assert is_form(content_type)
    form = decode_form(content_type, body)
    assert form.fields == {
        "model": "gpt-4o-transcribe",
        "stream": "true",
        "include[]": ["logprobs", "x"],
        "file": {"filename": "speech.wav", "content_type": "audio/wav", "size": len(AUDIO)},
    }
    assert form.files == {"file": AUDIO}


def test_what_is_written_reads_back() -> None:
    fields = {
        "model": "gpt-image-1",
        "prompt": 'a "quoted"\\ name',
        "stream": True,
        "partial_images": 2,
        "image": {"filename": "in.png", "content_type": "image/png", "size": 3},
    }
    content_type, body = encode_form(fields, {"image": b"PNG"}, boundary="b0undary")
    assert content_type == "multipart/form-data; boundary=b0undary"
    assert body.startswith(b'--b0undary\r\nContent-Disposition: form-data; name="model"\r\n\r\n')
    assert body.endswith(b"\r\n--b0undary--\r\n")
    form = decode_form(content_type, body)
    assert form.fields == {**fields, "stream": "true", "partial_images": "2"}
    assert form.files == {"image": b"PNG"}
    # httpx reads it as the same form.
    again = decode_form(*encode_form(form.fields, form.files))
    assert again == form


@pytest.mark.parametrize(
    ("content_type", "body", "message"),
    [
        ("application/json", b"{}", "expected a multipart/form-data body"),
        ("multipart/form-data", b"--x\r\n", "has no boundary"),
        ("multipart/form-data; boundary=x", b"--x--\r\n", "holds no parts"),
        (
            "multipart/form-data; boundary=x",
            b"--x\r\nContent-Disposition: form-data\r\n\r\nv\r\n--x--\r\n",
            "part 0 of the form has no name",
        ),
        (
            "multipart/form-data; boundary=x",
            b'--x\r\nContent-Disposition: form-data; name="a"\r\n\r\n\xff\r\n--x--\r\n',
            "form field 'a' is not UTF-8 text",
        ),
        ("multipart/form-data; boundary=x", b"garbage", "malformed multipart/form-data"),
    ],
)
def test_a_bad_form_is_a_typed_error(content_type: str, body: bytes, message: str) -> None:
    with pytest.raises(FormError, match=message):
        decode_form(content_type, body)


def test_a_file_without_its_bytes_is_refused() -> None:
    with pytest.raises(FormError, match="no bytes for the file part 'file'"):
        encode_form({"file": {"filename": "a.wav"}}, {})


def test_the_size_limit_holds() -> None:
    content_type, body = _httpx_form()
    with pytest.raises(FormError, match="over the limit of 100"):
        decode_form(content_type, body, max_size=100)
