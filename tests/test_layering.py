"""The layers of DESIGN.md: imports only go downward, and the sans-I/O core never
imports an I/O module. Checked two ways: statically over every module's imports, and
dynamically by importing each core module in a fresh interpreter."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import polystream

SRC = Path(polystream.__file__).parent
IO_MODULES = (
    "asyncio",
    "anyio",
    "httpx",
    "httpx2",
    "websockets",
    "socket",
    "starlette",
    "uvicorn",
    "rich",
    "redis",
    "sqlite3",
    "threading",
    "time",
    "ssl",
    "select",
)

# Layer of each top-level part of the package (DESIGN.md "Layers").
LAYERS = {
    "events": 1,
    "errors": 1,
    "wire": 2,
    "dialects": 3,
    "accumulate": 4,
    "api": 4,
    "journal": 4,
    "request": 4,
    "retry": 4,
    "resume": 4,
    "call": 4,
    "proxy": 4,
    "realtime": 4,
    "transcode": 4,
    "scenario": 4,
    "scrub": 4,
    "client": 5,
    "server": 5,
    "cli": 5,
    "__main__": 5,
}
CORE_MAX_LAYER = 4


def _part(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "polystream" or len(parts) < 2:
        return None
    return parts[1]


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        name = ".".join(rel.parts)
        if name.endswith(".__init__"):
            name = name[: -len(".__init__")]
        out.append((name, path))
    return out


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


MODULES = _modules()


def test_every_part_has_a_layer() -> None:
    for name, _ in MODULES:
        part = _part(name)
        if part is not None:
            assert part in LAYERS, f"{name}: add its part to LAYERS (DESIGN.md)"


@pytest.mark.parametrize(("name", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_imports_go_downward(name: str, path: Path) -> None:
    part = _part(name)
    if part is None:
        return
    own = LAYERS[part]
    for imported in _imports(path):
        target = _part(imported)
        if target is None:
            if own <= CORE_MAX_LAYER:
                assert imported.split(".")[0] not in IO_MODULES, (
                    f"{name} (sans-I/O core) imports {imported}"
                )
            continue
        assert LAYERS[target] <= own, (
            f"{name} (layer {own}) imports {imported} (layer {LAYERS[target]})"
        )
        if part == "dialects" and target == "dialects":
            mine = name.split(".")[2:3]
            theirs = imported.split(".")[2:3]
            if mine and theirs and not mine[0].startswith("_") and not theirs[0].startswith("_"):
                assert mine == theirs, f"dialect {name} imports another dialect: {imported}"


def test_core_imports_no_io_at_runtime() -> None:
    # time/threading are loaded by the interpreter itself; the static test covers them.
    runtime_io = tuple(m for m in IO_MODULES if m not in ("time", "threading"))
    core = [n for n, _ in MODULES if (p := _part(n)) is not None and LAYERS[p] <= CORE_MAX_LAYER]
    code = (
        "import sys\n"
        f"for m in {core!r}:\n"
        "    __import__(m)\n"
        f"bad = sorted(m for m in {runtime_io!r} if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"core imported I/O modules: {out.stdout.strip()}"
