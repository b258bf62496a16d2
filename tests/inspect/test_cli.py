"""``polystream inspect``: one self-contained page, or the page served on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from polystream.cli import main
from polystream.inspector import build_capture
from tests.helpers import FIXTURES

THINKING = FIXTURES / "anthropic_messages" / "thinking.sse"
ARRAY = FIXTURES / "gemini_generate" / "thoughts.jsonarray"


def _page_data(html: str) -> dict[str, Any]:
    head = '<script type="application/json" id="ps-data">'
    start = html.index(head) + len(head)
    data: dict[str, Any] = json.loads(html[start : html.index("</script>", start)])
    return data


def _without_previews(capture: dict[str, Any]) -> dict[str, Any]:
    # (Ids a target needs and the source has none of are minted at random.)
    return {k: v for k, v in capture.items() if k != "transcodes"}


def test_html_writes_one_page_with_every_capture(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "page.html"
    assert main(["inspect", str(THINKING), str(ARRAY), "--html", str(out)]) == 0
    assert capsys.readouterr().err == f"polystream: wrote {out} (2 capture(s))\n"
    data = _page_data(out.read_text())
    assert data["server"] is None
    expected = [
        build_capture(THINKING.read_bytes(), name="thinking.sse"),
        build_capture(ARRAY.read_bytes(), name="thoughts.jsonarray"),
    ]
    assert [_without_previews(c) for c in data["captures"]] == [
        json.loads(json.dumps(_without_previews(c))) for c in expected
    ]


def test_options_reach_the_decoder(tmp_path: Path) -> None:
    out = tmp_path / "page.html"
    assert main(["inspect", str(THINKING), "--dialect", "xai_messages", "--html", str(out)]) == 0
    (capture,) = _page_data(out.read_text())["captures"]
    assert capture["dialect"] == "xai_messages"
    bad = FIXTURES / "openai_responses" / "bad" / "malformed_json.sse"
    assert main(["inspect", str(bad), "--strict", "--html", str(out)]) == 0
    (strict,) = _page_data(out.read_text())["captures"]
    assert strict["fatal"]["byte_offset"] == 2079


def test_a_capture_that_does_not_decode_is_shown_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01 nothing")
    out = tmp_path / "page.html"
    assert main(["inspect", str(junk), "--html", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.startswith(
        f"polystream: warning: {junk}: decoding stopped at byte 0: could not detect the dialect"
    )
    (capture,) = _page_data(out.read_text())["captures"]
    assert capture["name"] == "junk.bin" and capture["dialect"] is None


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "--html", str(tmp_path / "x.html")]) == 2
    assert "inspect --html needs at least one FILE" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path / "missing.sse"), "--html", "x.html"]) == 2


def test_without_html_it_serves_the_page(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    command = [sys.executable, "-m", "polystream", "inspect", str(THINKING)]
    process = subprocess.Popen(
        [*command, "--port", "0", "--no-browser"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith("polystream inspector on http://127.0.0.1:")
        url = line.split(" on ", 1)[1].split(" ", 1)[0]
        assert url.endswith("/inspect")
        with httpx.Client(timeout=10) as client:
            root = client.get(url.removesuffix("/inspect") + "/")
            assert (root.status_code, root.headers["location"]) == (302, "/inspect")
            data = _page_data(client.get(url).text)
            server = {"decode": "/inspect/api/decode", "streams": None, "auth": False}
            assert data["server"] == server
            (capture,) = data["captures"]
            assert capture["name"] == "thinking.sse" and capture["stats"]["events"] == 13
            decoded = client.post(url + "/api/decode", content=ARRAY.read_bytes()).json()
            assert decoded["dialect"] == "gemini_generate"
    finally:
        process.terminate()
        process.wait(10)
