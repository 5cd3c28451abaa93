"""A ``_``-private name belongs to the package that holds it: no module of ``engine`` or
``projections`` imports another package's private module or name, and nothing outside store
access reaches past the ``LogStore`` into the eventsourcing application behind it (its recorder,
environment or mapper): the CLI, the fleet and the viewer ask the library (``Ledger.backend``,
``Ledger.encrypted``, ``LogStore.notifications``, ``LogStore.environment``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "projections")


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(dotted: str) -> bool:
    return MODULES.get(dotted, Path()).name == "__init__.py"


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _imported(module: str, path: Path) -> list[tuple[int, str]]:
    """Every dotted name the module imports (``from a.b import c`` gives ``a.b.c``), relative
    imports resolved."""
    here = module if _is_package(module) else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if alias.name != "*"]
    return out


def private_imports_from_outside(module: str, path: Path) -> list[str]:
    """Imports of a private name by a module outside the package that holds the name. The owner of
    ``a._b`` is ``a`` (a package) or, if ``a`` is a module, the package ``a`` sits in."""
    bad = []
    for line, dotted in _imported(module, path):
        parts = dotted.split(".")
        if parts[0] not in PACKAGES:
            continue
        for i, part in enumerate(parts):
            if i == 0 or not _private(part):
                continue
            owner = ".".join(parts[:i])
            if not _is_package(owner):
                owner = owner.rpartition(".")[0]
            if not (module == owner or module.startswith(owner + ".")):
                bad.append(f"{path.name}:{line}: {module} imports {dotted} (private to {owner})")
            break
    return bad


def test_no_module_imports_another_packages_private_names():
    bad = [b for module, path in MODULES.items() for b in private_imports_from_outside(module, path)]
    assert bad == []


def test_the_check_names_a_private_import_from_outside_only(tmp_path):
    """The check itself: the viewer importing the proxy's private names is named (both forms);
    the same names imported inside the proxy package are not."""
    assert _is_package("engine.proxy") and not _is_package("engine.proxy.app")
    source = tmp_path / "m.py"
    source.write_text("from engine.proxy.app import _helper\nfrom engine.proxy import _wire\nimport engine._store.codec\n",
                      encoding="utf-8")
    outside = private_imports_from_outside("engine.viewer.app", source)
    assert [b.split(" imports ")[1] for b in outside] == [
        "engine.proxy.app._helper (private to engine.proxy)",
        "engine.proxy._wire (private to engine.proxy)",
    ]
    assert private_imports_from_outside("engine.proxy.recording", source) == []
    source.write_text("from ._private import x\n", encoding="utf-8")  # relative: inside its own package
    assert private_imports_from_outside("projections.buffer", source) == []
    source.write_text("from engine._store.codec import TOPICS\n", encoding="utf-8")
    assert private_imports_from_outside("projections.buffer", source) == [
        "m.py:1: projections.buffer imports engine._store.codec.TOPICS (private to engine)"
    ]


# The eventsourcing application behind a LogStore: ``store.app``, ``….app.recorder`` and the like.
_REACH = re.compile(r"\bstore\.app\b|\.app\.(recorder|env|mapper|repository|events|factory)\b|getattr\([^)]*store[^)]*[\"']app[\"']")


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("engine._store")))
def test_nothing_outside_store_access_reaches_the_recorder(module):
    text = MODULES[module].read_text(encoding="utf-8")
    hits = [f"{MODULES[module].relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in _REACH.finditer(text)]
    assert hits == []


def test_the_reach_pattern_sees_the_old_reads():
    """What the CLI's and the fleet's follow read before they asked the library."""
    for old in ('ledger.store.app.env.get("PERSISTENCE_MODULE")', "recorder = self.ledger.store.app.recorder",
                'getattr(getattr(ledger.store, "app", None), "mapper", None)'):
        assert _REACH.search(old), old
    assert not _REACH.search("ledger.store.head_version(s.id)")
