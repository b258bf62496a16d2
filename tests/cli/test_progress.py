"""The progress bar of ``decode`` and ``convert``: on stderr, for an input larger than
8 MiB, only when stderr is a terminal (and stdout is not the terminal being written);
the output is the same either way."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from polystream.cli import _progress, main
from polystream.cli._progress import PROGRESS_BYTES, progress_chunks, shows_progress
from tests.helpers import FIXTURES

SOURCE = FIXTURES / "anthropic_messages" / "skeleton.sse"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_threshold_is_8_mib() -> None:
    assert PROGRESS_BYTES == 8 * 1024 * 1024


def test_when_a_bar_is_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.sse"
    with big.open("wb") as handle:
        handle.truncate(PROGRESS_BYTES + 1)  # (sparse: no 8 MiB written)
    small = tmp_path / "small.sse"
    small.write_bytes(b"x" * PROGRESS_BYTES)
    monkeypatch.setattr(sys, "stdout", io.StringIO())  # (not a terminal)
    assert shows_progress(str(big), Terminal(), stdout_busy=True) == PROGRESS_BYTES + 1
    assert shows_progress(str(small), Terminal(), stdout_busy=True) is None
    assert shows_progress(str(big), io.StringIO(), stdout_busy=True) is None  # stderr: a file
    assert shows_progress(str(tmp_path / "missing"), Terminal(), stdout_busy=True) is None
    monkeypatch.setattr(sys, "stdout", Terminal())
    assert shows_progress(str(big), Terminal(), stdout_busy=True) is None  # (the same terminal)
    assert shows_progress(str(big), Terminal(), stdout_busy=False) == PROGRESS_BYTES + 1


def test_the_bar_is_drawn_on_stderr_and_the_bytes_are_the_file_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_progress, "PROGRESS_BYTES", 10)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    err = Terminal()
    chunks = list(progress_chunks(str(SOURCE), "decode", err=err))
    assert b"".join(chunks) == SOURCE.read_bytes()
    assert "decode skeleton.sse" in err.getvalue()


@pytest.mark.parametrize(
    "command", [["decode"], ["decode", "--result"], ["convert", "--to", "openai_chat"]]
)
def test_the_output_is_the_same_with_a_bar(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    assert main([*command, str(SOURCE)]) == 0
    plain = capsysbinary.readouterr()
    assert plain.err == b""
    monkeypatch.setattr(_progress, "PROGRESS_BYTES", 10)
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert main([*command, str(SOURCE)]) == 0
    assert capsysbinary.readouterr().out == plain.out
    assert f" {SOURCE.name}" in err.getvalue()
