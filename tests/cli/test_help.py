"""``polystream --version``, the LICENSE, and the help of every command: each option
has help text, the defaults are shown, the dialect options list the registry's names."""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

import polystream
from polystream.cli import main
from polystream.cli._main import _parser, version
from polystream.cli._serve import DEFAULT_PORT
from polystream.dialects import DIALECTS

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _option(command: str, flag: str) -> argparse.Action:
    parser = _commands()[command]
    return next(a for a in parser._actions if flag in a.option_strings)


def _help(capsys: pytest.CaptureFixture[str], command: str) -> str:
    assert main([command, "--help"]) == 0
    # (one line per option: the help's own line breaks joined)
    return re.sub(r"\s+", " ", capsys.readouterr().out)


def test_version_is_the_installed_package_s(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"polystream {importlib.metadata.version('polystream')}\n"


def test_version_without_package_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert version() == polystream.__version__


def test_the_license_is_the_apache_license_pyproject_names() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert text.split("\n")[1:3] == [
        "                                 Apache License",
        "                           Version 2.0, January 2004",
    ]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert len(text.splitlines()) == 202  # (the whole text, appendix included)


def test_every_option_of_every_command_has_help() -> None:
    missing = [
        (name, action.option_strings or action.dest)
        for name, parser in _commands().items()
        for action in parser._actions
        if not (action.help or "").strip()
    ]
    assert missing == []
    assert set(_commands()) >= {"frames", "decode", "convert", "serve", "demo", "call", "gateway"}


@pytest.mark.parametrize(
    ("command", "flag"), [("decode", "--dialect"), ("convert", "--from"), ("convert", "--to")]
)
def test_the_dialect_options_list_every_registered_dialect(command: str, flag: str) -> None:
    text = _option(command, flag).help or ""
    assert f"one of: {', '.join(DIALECTS)}" in text


@pytest.mark.parametrize(
    ("command", "text"),
    [
        ("gateway", "--listen HOST:PORT the address to listen on"),
        ("gateway", "(default: 127.0.0.1:8080)"),
        ("gateway", "(default: memory)"),
        ("gateway", "--resume-grace SECONDS seconds to keep reading"),
        ("gateway", "--max-concurrency N streams served at once"),
        ("serve", "(default: 127.0.0.1)"),
        ("serve", f"(default: {DEFAULT_PORT})"),
        ("serve", "(default: 1024)"),
        ("call", "--idle-timeout SECONDS seconds without a byte"),
        ("call", "(default: 120.0)"),
        ("call", f"http://127.0.0.1:{DEFAULT_PORT}/openai/v1"),
        ("call", "--max-tokens N the most tokens the reply may have"),
        ("frames", "--framing {auto,sse,json_array} sse (Server-Sent Events)"),
        ("decode", "--pretty with --result: indented JSON"),
    ],
)
def test_help_shows_units_and_defaults(
    capsys: pytest.CaptureFixture[str], command: str, text: str
) -> None:
    assert text in _help(capsys, command)


def test_flags_without_a_value_show_no_default(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "decode")
    assert "(default: False)" not in text and "(default: None)" not in text
    assert "(default: auto)" in text  # --dialect and --framing
