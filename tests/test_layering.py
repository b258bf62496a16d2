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

# Layer of each top-level part of the package (DESIGN.md "Layers"): a part imports only
# parts of its own layer or below.
LAYERS = {
    # 1: the unified model and what needs nothing else
    "events": 1,
    "errors": 1,
    "request_model": 1,
    "retry": 1,
    "journal": 1,
    # 2: framing and text helpers
    "wire": 2,
    "scrub": 2,
    "audio": 2,  # audio formats, media types, G.711, resampling, WAV (bytes in, bytes out)
    # 3: the dialects (tiered inside: see DIALECT_TIERS)
    "dialects": 3,
    # 4: what reads any dialect's events or requests
    "accumulate": 4,
    "media": 4,  # the audio, images and transcript of a Result
    "request": 4,
    "realtime": 4,  # the WebSocket families' sessions (public entry)
    # 5: decoding to a result; the gateway's core
    "decoding": 5,
    "gateway_core": 5,
    "api": 5,  # (the older name of decoding)
    "proxy": 5,  # (the older name of gateway_core)
    # 6: calling providers, transcoding, the emulator's scenarios
    "call": 6,
    "transcode": 6,
    "scenario": 6,
    "inspector": 6,  # the stream inspector's page data (decoding, transcoding previews)
    # 7-9: the shells
    "client": 7,
    "server": 8,
    "cli": 9,
    "__main__": 9,
}
SHELLS = frozenset({"client", "server", "cli", "__main__"})
"""The parts that may do I/O; everything else is the sans-I/O core."""

# Tiers inside ``polystream.dialects``: a module imports only modules of its own tier or
# below, and a public dialect folder never imports another.
DIALECT_TIERS = {
    "_spec": 0,  # the descriptor types
    "_socket_spec": 0,  # the WebSocket families' descriptor type
    "_base": 1,  # decoder and encoder bases, and what every family shares
    "_carrier": 1,
    "_cursors": 1,
    "_errors": 1,
    "_free_form": 1,
    "_request_common": 1,
    "_google": 1,
    "_usage_fold": 1,
    "_realtime": 1,  # the WebSocket families' session base
    "_realtime_api": 2,  # the Realtime API session (OpenAI, xAI)
    "_responses_ws": 2,  # the Responses WebSocket session (OpenAI, xAI)
    "_xai_voice": 2,  # what xAI's text-to-speech and speech-to-text sockets share
    "_responses": 2,  # the families shared by sibling dialects
    "_chat": 2,
    "_messages": 2,
    "_detect": 4,  # reads every dialect's detection hints
    "_sockets": 4,  # the WebSocket families' registry
}
PUBLIC_TIER = 3
REGISTRY_TIER = 4


def _dialect_tier(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 2:
        return REGISTRY_TIER
    name = parts[2]
    if name.startswith("_"):
        assert name in DIALECT_TIERS, f"{module}: add it to DIALECT_TIERS"
        return DIALECT_TIERS[name]
    return PUBLIC_TIER


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


def _lazy_hook(tree: ast.Module) -> ast.FunctionDef | None:
    """A module's own ``__getattr__`` (PEP 562), where it imports what it re-exports
    lazily."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            return node
    return None


def _imports(path: Path, *, lazy: bool = False) -> list[str]:
    """The modules a file imports, but for those under ``if TYPE_CHECKING:`` (names for
    annotations, no import when the program runs) and those inside the module's
    ``__getattr__`` (lazy re-exports, imported when the name is first used); ``lazy``:
    only the latter."""
    tree = ast.parse(path.read_text())
    hook = _lazy_hook(tree)
    hooked = {id(inner) for inner in ast.walk(hook)} if hook is not None else set()
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    found = []
    for node in ast.walk(tree):
        if id(node) in skipped or (id(node) in hooked) != lazy:
            continue
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
            if part not in SHELLS:
                assert imported.split(".")[0] not in IO_MODULES, (
                    f"{name} (sans-I/O core) imports {imported}"
                )
            continue
        assert LAYERS[target] <= own, (
            f"{name} (layer {own}) imports {imported} (layer {LAYERS[target]})"
        )
        if part == "dialects" and target == "dialects":
            _check_dialect_import(name, imported)


@pytest.mark.parametrize(("name", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_lazy_reexports_reach_only_the_shells(name: str, path: Path) -> None:
    # The one way up: a package's ``__getattr__`` may hand out a shell's names (the
    # socket client from ``polystream.realtime``), imported when first used. Importing
    # the core still loads no shell (test_core_imports_no_io_at_runtime).
    part = _part(name)
    for imported in _imports(path, lazy=True):
        target = _part(imported)
        if part is None or target is None or LAYERS[target] <= LAYERS[part]:
            continue
        assert name.endswith(f".{part}") and target in SHELLS, (
            f"{name} re-exports {imported} lazily: only a part's package may, from a shell"
        )


def _check_dialect_import(name: str, imported: str) -> None:
    mine, theirs = _dialect_tier(name), _dialect_tier(imported)
    assert theirs <= mine, f"{name} (tier {mine}) imports {imported} (tier {theirs})"
    folder, other = name.split(".")[2:3], imported.split(".")[2:3]
    if mine == PUBLIC_TIER and theirs == PUBLIC_TIER:
        assert folder == other, f"dialect {name} imports another dialect: {imported}"
    if name.endswith(".spec") and mine == PUBLIC_TIER:
        # A descriptor is data: it imports the descriptor types only.
        assert theirs == 0, f"{name} imports {imported}: a spec.py holds data only"


def test_core_imports_no_io_at_runtime() -> None:
    # time/threading are loaded by the interpreter itself; the static test covers them.
    runtime_io = tuple(m for m in IO_MODULES if m not in ("time", "threading"))
    core = [n for n, _ in MODULES if (p := _part(n)) is not None and p not in SHELLS]
    code = (
        "import sys\n"
        f"for m in {core!r}:\n"
        "    __import__(m)\n"
        f"bad = sorted(m for m in {runtime_io!r} if m in sys.modules)\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"core imported I/O modules: {out.stdout.strip()}"


def test_every_registered_dialect_is_a_folder_with_a_spec() -> None:
    from polystream.dialects import DIALECTS, REGISTERED

    assert tuple(DIALECTS) == REGISTERED
    for name in REGISTERED:
        folder = SRC / "dialects" / name
        assert (folder / "spec.py").is_file() and (folder / "binding.py").is_file(), name
        assert DIALECTS[name].name == name
