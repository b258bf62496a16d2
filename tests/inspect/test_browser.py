"""The inspector's page in a real browser: Debian's chromium, driven by Playwright.

One browser for the module. Skipped only when ``/usr/bin/chromium`` is missing outside CI
(with ``CI`` set, a missing chromium fails: ``.ci/run`` installs it). Each test saves a
screenshot under its ``tmp_path``, and under ``$POLYSTREAM_ARTIFACTS`` when that is set.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from polystream import decode
from polystream.decoding import decode_events
from polystream.dialects import DIALECTS
from polystream.inspector import build_capture, page_data, render_page
from polystream.scenario import Emulator
from polystream.server import ServerThread
from polystream.transcode import convert
from tests.helpers import FIXTURES
from tests.inspect.test_server import KEY_A, _gateway, _request

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
THINKING = FIXTURES / "anthropic_messages" / "thinking.sse"
TOOLS = FIXTURES / "anthropic_messages" / "parallel_tools.sse"
BAD = FIXTURES / "openai_responses" / "bad" / "malformed_json.sse"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: CI installs Debian's chromium (.ci/run)")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield launched
        launched.close()


class Page:
    """A browser page that records the page's errors (none is allowed)."""

    def __init__(self, browser: Any, tmp_path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.errors: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.tmp_path = tmp_path

    def shot(self, name: str) -> Path:
        path = self.tmp_path / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        artifacts = os.environ.get("POLYSTREAM_ARTIFACTS")
        if artifacts:
            Path(artifacts).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(artifacts) / path.name)
        return path

    def text(self, selector: str) -> str:
        value: str = self.page.locator(selector).first.text_content()
        return value

    def cells(self, selector: str) -> list[str]:
        found: list[str] = self.page.locator(selector).all_text_contents()
        return found


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[Page]:
    opened = Page(browser, tmp_path)
    yield opened
    opened.page.close()
    assert opened.errors == []


def _open(page: Page, paths: list[Path]) -> None:
    captures = [build_capture(p.read_bytes(), name=p.name) for p in paths]
    out = page.tmp_path / "page.html"
    out.write_text(render_page(page_data(captures)))
    page.page.goto(out.as_uri())
    page.page.wait_for_selector("table.timeline")


def test_a_capture_shows_what_the_decoder_says(page: Page) -> None:
    _open(page, [THINKING, TOOLS, BAD])
    data = THINKING.read_bytes()
    events = decode_events(data)
    result = decode(data)
    assert page.page.locator("table.timeline tbody tr").count() == len(events) == 13
    assert page.text("pre[data-field=text]") == result.text
    assert page.text("pre[data-field=reasoning]") == result.reasoning
    assert json.loads(page.text("dd[data-field=finish]")) == {"unified": "stop", "raw": "end_turn"}
    assert page.cells("table.usage tr[data-usage=output_tokens] td") == ["output_tokens", "172"]
    assert page.cells("table.usage tr[data-usage=tool_prompt_tokens] td") == [
        "tool_prompt_tokens",
        "–",
    ]
    assert page.page.locator(".pairs .native details").count() == 12
    # A timeline row opens its unified event, whose JSON is the decoder's.
    page.page.locator("table.timeline tbody tr[data-event='9']").click()
    opened = page.page.locator("#ev-0-9")
    assert opened.get_attribute("open") == ""
    shown = json.loads(opened.locator("pre.json").text_content())
    assert shown == json.loads(msgspec.json.encode(events[9]))
    page.shot("capture")

    # The second capture: tool calls with their parsed arguments.
    page.page.click("nav button[data-tab=c1]")
    tools = decode(TOOLS.read_bytes())
    rows = page.page.locator("table.tools tbody tr")
    assert rows.count() == len(tools.tool_calls) == 2
    for n, call in enumerate(tools.tool_calls):
        cells = rows.nth(n).locator("td")
        assert cells.nth(0).text_content() == call.name
        assert json.loads(cells.nth(2).text_content()) == call.arguments

    # The third: its problems, at their byte offsets.
    page.page.click("nav button[data-tab=c2]")
    problems = page.page.locator("table.problems tbody tr")
    assert problems.count() == 2
    assert problems.nth(0).locator("td").all_text_contents()[:5] == [
        "error",
        "protocol",
        "malformed JSON payload: Input data was truncated",
        "2079",
        "4",
    ]
    page.shot("problems")


def test_two_captures_side_by_side(page: Page) -> None:
    _open(page, [THINKING, TOOLS])
    page.page.click("nav button[data-tab=diff]")
    page.page.wait_for_selector("table.diff-usage")
    a, b = decode(THINKING.read_bytes()), decode(TOOLS.read_bytes())
    assert page.text("pre[data-side=a]") == a.text
    assert page.text("pre[data-side=b]") == b.text
    assert page.text("pre[data-side=b] ins") == b.text.split(" ")[0]
    usage = "table.diff-usage tr[data-field=output_tokens]"
    assert page.cells(f"{usage} td") == [
        "output_tokens",
        str(a.usage.output_tokens),
        str(b.usage.output_tokens),
    ]
    assert page.page.locator(usage).get_attribute("class") == "changed"
    assert page.cells("table.diff-finish tr[data-field='finish.raw'] td") == [
        "finish.raw",
        "end_turn",
        "tool_use",
    ]
    same = "table.diff-usage tr[data-field=cache_read_tokens]"
    assert page.page.locator(same).get_attribute("class") == "same"
    # Every event of A is on a row kept or removed, every event of B kept or added.
    kept = page.page.locator("table.diff-events tr.same").count()
    removed = page.page.locator("table.diff-events tr.removed").count()
    added = page.page.locator("table.diff-events tr.added").count()
    assert kept + removed == len(decode_events(THINKING.read_bytes()))
    assert kept + added == len(decode_events(TOOLS.read_bytes()))
    assert kept > 0
    page.shot("diff")


def test_the_transcoding_preview(page: Page) -> None:
    _open(page, [THINKING])
    page.page.select_option("select.target", "openai_chat")
    wire, losses = convert(THINKING.read_bytes(), "openai_chat")
    assert page.text("pre.wire") == wire.decode()
    rows = page.page.locator("table.losses tbody tr")
    assert rows.count() == len(losses) == 4
    assert rows.nth(0).locator("td").all_text_contents() == [
        losses[0].what,
        f"#{losses[0].event_index}",
        losses[0].event_type,
        losses[0].reason,
        losses[0].kind,
        "yes" if losses[0].carried else "no",
    ]
    assert [loss.kind for loss in losses].count("defaulted") >= 1
    page.shot("transcode")


def test_served_pages_open_files_and_follow_gateway_streams(page: Page) -> None:
    emulator = ServerThread(Emulator()).start()
    try:
        page.page.goto(f"{emulator.base_url}/inspect")
        page.page.set_input_files("#open-file", str(TOOLS))
        page.page.wait_for_selector("table.timeline")
        rows = page.page.locator("table.timeline tbody tr").count()
        assert rows == len(decode_events(TOOLS.read_bytes()))
        assert page.text("nav button[data-tab=c0]") == "1. parallel_tools.sse"
    finally:
        emulator.stop()
    gateway = _gateway(delay=0.0)
    try:
        with httpx.Client(base_url=gateway.base_url, timeout=10) as client:
            reply = client.post("/openai/v1/chat/completions", **_request(KEY_A))
        page.page.goto(f"{gateway.base_url}/inspect")
        page.page.fill("#key", KEY_A)
        page.page.dispatch_event("#key", "change")
        page.page.click("nav button[data-tab=streams]")
        page.page.click("button.follow")
        page.page.wait_for_selector("pre[data-field=text]")
        assert page.text("pre[data-field=text]") == decode(reply.content).text
        page.shot("gateway")
    finally:
        gateway.stop()


def _one_capture_per_dialect() -> list[Path]:
    chosen = []
    for name in DIALECTS:
        found = sorted(
            p for p in (FIXTURES / name).glob("*") if p.suffix in (".sse", ".jsonarray", ".raw")
        )
        assert found, name
        chosen.append(found[0])
    return chosen


def test_a_capture_of_every_dialect_renders(page: Page) -> None:
    paths = _one_capture_per_dialect()
    _open(page, paths)
    for n, path in enumerate(paths):
        page.page.click(f"nav button[data-tab=c{n}]")
        data = path.read_bytes()
        events = decode_events(data)
        rows = page.page.locator("table.timeline tbody tr")
        assert rows.count() == len(events), path
        text = decode(data).text
        if text:
            assert page.text("pre[data-field=text]") == text, path
    page.shot("every_dialect")
