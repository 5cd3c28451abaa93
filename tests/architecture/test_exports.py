"""The public surface is marked once (after httpx's test_exported_members): each package's ``__all__``
is exactly the public names it binds, every one resolves to an object defined in a public module of
ours, nothing private is exported, and ``engine``'s lazy names come from its one export list."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import engine
import projections

ROOT = Path(__file__).resolve().parents[2]


def public_names_bound(module: ModuleType) -> list[str]:
    """What a user sees in ``vars(module)``: public names that are not submodules."""
    return sorted(n for n, v in vars(module).items() if not n.startswith("_") and not isinstance(v, ModuleType))


def defining_module(obj: object) -> str:
    return getattr(obj, "__module__", None) or ""


def is_private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split("."))


@pytest.mark.parametrize("package", [engine, projections], ids=lambda p: p.__name__)
def test_all_is_every_public_name_and_nothing_else(package):
    for name in package.__all__:
        getattr(package, name)  # resolves (engine's lazy names bind on first use)
    assert len(package.__all__) == len(set(package.__all__))
    assert sorted(package.__all__) == public_names_bound(package)


@pytest.mark.parametrize("package", [engine, projections], ids=lambda p: p.__name__)
def test_nothing_private_is_exported(package):
    for name in package.__all__:
        assert not name.startswith("_"), name
        obj = getattr(package, name)
        where = defining_module(obj)
        assert where.startswith(package.__name__ + ".") and not is_private(where), (name, where)
        if hasattr(obj, "__name__"):  # classes and functions are exported under their own names
            assert obj.__name__ == name, (name, obj.__name__)


def test_engine_exports_each_name_from_the_module_its_list_names():
    assert engine.__all__ == [n for names in engine._EXPORTS.values() for n in names]
    for module, names in engine._EXPORTS.items():
        defined = importlib.import_module(module)
        for name in names:
            assert getattr(engine, name) is getattr(defined, name)
            assert defining_module(getattr(defined, name)) == module, (name, module)


def test_a_fresh_import_of_engine_binds_nothing_public_but_its_exports():
    """Lazily: before any name is used, the only public names bound are the two eager ones (whose
    modules share their names) and no helper of the package itself."""
    code = (
        "import json, types, engine\n"
        "bound = sorted(n for n, v in vars(engine).items() if not n.startswith('_') "
        "and not isinstance(v, types.ModuleType))\n"
        "print(json.dumps(bound))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    bound = json.loads(out.stdout)
    assert set(bound) <= set(engine.__all__)
    assert bound == ["render", "replay"]


def _our_modules():
    for package in (engine, projections):
        yield package.__name__
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not is_private(info.name):
                yield info.name


@pytest.mark.parametrize("name", sorted(_our_modules()))
def test_every_module_all_resolves_and_names_nothing_private(name):
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] not in ("engine", "projections"):
            pytest.skip(f"{name} needs {e.name} (an optional extra)")
        raise
    exported = getattr(module, "__all__", None)
    if exported is None:
        return
    assert len(exported) == len(set(exported)), name
    for item in exported:
        assert not item.startswith("_"), (name, item)
        assert hasattr(module, item), (name, item)
