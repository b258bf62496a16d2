"""``__all__`` of each public module equals the set of public names it defines or
re-exports (the httpx ``test_exported_members`` / websockets ``test_exports`` check).

"Defined" means bound at the module's top level by ``def``, ``class`` or an
assignment; "re-exported" means imported from one of the package's own submodules
(``polystream.wire`` re-exports ``polystream.wire.sse``). Names imported from
elsewhere (stdlib, msgspec, a sibling package) are dependencies, not API.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from types import ModuleType

import pytest

PUBLIC_MODULES = [
    "polystream",
    "polystream.events",
    "polystream.errors",
    "polystream.wire",
    "polystream.dialects",
]
# Dunder names that are API (httpx lists ``__version__`` the same way).
PUBLIC_DUNDERS = {"__version__"}


def _is_public(name: str) -> bool:
    return not name.startswith("_") or name in PUBLIC_DUNDERS


def _bound_names(body: list[ast.stmt], module: ModuleType) -> set[str]:
    package = module.__name__ if hasattr(module, "__path__") else None
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and package is not None and node.level == 0:
            source = node.module or ""
            # ``from polystream import events`` and ``from polystream.x import y``
            # inside the ``polystream`` package are re-exports.
            if source == package or source.startswith(package + "."):
                names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.If | ast.Try):
            names |= _bound_names(node.body, module)
            names |= _bound_names(node.orelse, module)
    return {n for n in names if _is_public(n) and n != "__all__"}


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_equals_public_names(name: str) -> None:
    module = importlib.import_module(name)
    tree = ast.parse(inspect.getsource(module))
    expected = _bound_names(tree.body, module)
    # Names served lazily by a module ``__getattr__`` (heavy imports on first use).
    expected |= set(getattr(module, "_LAZY", {}))
    assert sorted(module.__all__) == sorted(expected)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_unique_and_resolvable(name: str) -> None:
    module = importlib.import_module(name)
    assert len(module.__all__) == len(set(module.__all__))
    for member in module.__all__:
        assert hasattr(module, member), f"{name}.{member} is listed but missing"
    namespace: dict[str, object] = {}
    exec(f"from {name} import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(module.__all__)


@pytest.mark.parametrize(
    ("package", "submodules"),
    [
        ("polystream.wire", ["polystream.wire.sse", "polystream.wire.jsonarray"]),
    ],
)
def test_package_re_exports_its_submodules_api(package: str, submodules: list[str]) -> None:
    exported = set(importlib.import_module(package).__all__)
    for sub in submodules:
        names = set(importlib.import_module(sub).__all__)
        # Constants stay in their module; every class is re-exported by the package.
        classes = {n for n in names if inspect.isclass(getattr(importlib.import_module(sub), n))}
        assert classes <= exported, f"{sub}: {sorted(classes - exported)} not re-exported"


def test_errors_are_all_exceptions_and_form_the_documented_tree() -> None:
    errors = importlib.import_module("polystream.errors")
    for member in errors.__all__:
        assert issubclass(getattr(errors, member), Exception)
    assert issubclass(errors.StreamTruncated, errors.RemoteProtocolError)
    assert issubclass(errors.BufferLimitExceeded, errors.RemoteProtocolError)
    assert issubclass(errors.EventOrderError, errors.RemoteProtocolError)
    assert issubclass(errors.RemoteProtocolError, errors.ProtocolError)
    assert issubclass(errors.LocalProtocolError, errors.ProtocolError)
    assert not issubclass(errors.LocalProtocolError, errors.RemoteProtocolError)
    assert issubclass(errors.ToolArgumentsError, errors.PolystreamError)
    assert issubclass(errors.APIStatusError, errors.TransportError)


def test_top_level_re_exports_the_errors_users_catch() -> None:
    import polystream

    errors = importlib.import_module("polystream.errors")
    for name in (
        "PolystreamError",
        "ProtocolError",
        "RemoteProtocolError",
        "LocalProtocolError",
        "StreamTruncated",
        "BufferLimitExceeded",
        "EventOrderError",
        "ToolArgumentsError",
    ):
        assert getattr(polystream, name) is getattr(errors, name)
