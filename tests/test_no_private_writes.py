"""No module reads or writes another object's private attribute.

Every module under ``src/`` is parsed with :mod:`ast`: an attribute whose name starts
with ``_`` (a dunder aside) may only be taken from ``self`` or ``cls`` (``super()`` and
``type(self)`` too), or from the module's own objects (its classes, functions and
module-level names). Anything else, ``decoder._switch = True`` or ``reply._body``, is
a switch or a piece of state set from outside: it belongs in a public, documented
interface. The modules that still do so are listed, each with exactly what it reads,
in :data:`NOT_YET_PUBLIC`; the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import polystream

SRC = Path(polystream.__file__).parent

NOT_YET_PUBLIC: dict[str, frozenset[str]] = {
    # A class and its helper in the same module (the direct client and its exchange, a
    # reply and its body iterator): one unit, split only to keep each class short.
    "client/_direct.py": frozenset(
        {
            "client._fallback",
            "client._head",
            "client._target",
            "client._timeouts",
            "client._transport",
            "reply._body",
            "reply._decode",
            "reply._decoder",
        }
    ),
    # The event stream and its client, in one module.
    "client/_http.py": frozenset({"stream._http"}),
    # Python 3.11 has no public eager task start; 3.12's eager task factory replaces it.
    "server/_h1support.py": frozenset({"asyncio.tasks._enter_task", "asyncio.tasks._leave_task"}),
}
"""Modules (relative to the package) that still take another object's private
attributes, and exactly which (as written): anything else in them fails too."""


def _own_names(tree: ast.Module) -> set[str]:
    """The names a module defines at its top level."""
    names = {"self", "cls"}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def private_uses(source: str) -> list[tuple[int, str]]:
    """Each attribute of another object that ``source`` reads or writes (line, as
    written), by line."""
    tree = ast.parse(source)
    own = _own_names(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id in own:
            continue
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in ("super", "type")
        ):
            continue
        found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_takes_another_objects_private_attributes(path: Path) -> None:
    name = path.relative_to(SRC).as_posix()
    allowed = NOT_YET_PUBLIC.get(name, frozenset())
    found = [(line, text) for line, text in private_uses(path.read_text()) if text not in allowed]
    assert found == [], f"{name}: private attributes of other objects: {found}"


def test_the_allow_list_names_only_what_is_there() -> None:
    # (An entry no longer needed is removed, so that it cannot come back unseen.)
    for name, allowed in NOT_YET_PUBLIC.items():
        seen = {text for _, text in private_uses((SRC / name).read_text())}
        assert allowed <= seen, (name, sorted(allowed - seen))


def test_the_check_sees_what_it_is_for() -> None:
    source = """
import other
from other import Thing

class Own:
    _flag = False

def f(decoder, self):
    decoder._switch = True
    x = decoder._runs
    self._mine = 1
    Own._flag = True
    Thing._hidden
    other._private()
    super()._hook()
    type(self)._hook
    decoder.__class__
    decoder.public
"""
    assert [text for _, text in private_uses(source)] == [
        "decoder._switch",
        "decoder._runs",
        "Thing._hidden",
        "other._private",
    ]
