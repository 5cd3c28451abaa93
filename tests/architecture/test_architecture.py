"""The dependency rules of DESIGN.md, checked by import-linter (contracts in pyproject.toml): each
layer imports only the layers below it, projections never import the store or the session, the core
never imports an SDK, no two sibling modules import each other (no cycles). Plus what a static check
cannot see: ``import engine`` stays light."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(cwd: Path) -> subprocess.CompletedProcess:
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: install the test tools (pip install -e '.[test]')")
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-logo", "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_the_import_contracts_hold():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 kept, 0 broken" in result.stdout


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    for name in ("engine", "projections"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize(
    "module, line, broken",
    [
        # the cycle issue #10 removed: the read side reaching back into the application layer
        ("projections/buffer.py", "from engine.ledger import Ledger", "Projections are pure folds"),
        # the session importing the ledger that holds it
        ("engine/session.py", "from engine.ledger import Ledger", "Layers:"),
        # the store reaching up into the session
        ("engine/_store/log_store.py", "import engine.session", "Layers:"),
        # the core importing an SDK at import time
        ("engine/ledger.py", "import openai", "The core never imports an SDK"),
        # the three cycles issue #25 removed: the views' shared helpers back in the module that
        # chooses between them, the demo editor reading the study's config, the importer base and
        # the runner that Importer.run calls
        ("engine/fleet/view.py", "import engine.fleet.updater", "No import cycles"),
        ("engine/demo/editor.py", "from engine.demo.study import StudyConfig", "No import cycles"),
        ("engine/importers/runner.py", "import engine.importers.base", "No import cycles"),
        # the CLI reaching past the Ledger into store access (it asks Ledger.looks_like_export)
        ("engine/cli/core.py", "from engine._store.transfer import looks_like_export", "Store access is private"),
    ],
)
def test_a_reintroduced_cycle_fails_the_check(tree_copy: Path, module: str, line: str, broken: str):
    path = tree_copy / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}  # reintroduced\n", encoding="utf-8")
    result = _lint(tree_copy)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "BROKEN" in result.stdout
    broken_section = result.stdout.split("Broken contracts", 1)[1]
    assert broken in broken_section


def _fresh(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_importing_the_packages_loads_no_store_session_or_sdk():
    out = _fresh(
        "import sys, engine, projections, engine.events\n"
        "heavy = ['engine.ledger', 'engine.session', 'engine._store.log_store', 'eventsourcing', 'openai', 'anthropic',"
        " 'mcp', 'agents', 'langchain_core', 'starlette', 'httpx', 'tiktoken']\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    assert out == ""


def test_functions_named_like_their_modules_stay_functions():
    out = _fresh(
        "import engine.render, engine.replay, engine\n"
        "from engine import render, replay\n"
        "print(callable(render), callable(replay), render.__module__, replay.__module__)"
    )
    assert out == "True True engine.render engine.replay"


def test_every_public_name_resolves_lazily_and_once():
    out = _fresh(
        "import engine\n"
        "missing = [n for n in engine.__all__ if getattr(engine, n, None) is None]\n"
        "from engine import Ledger\n"
        "from engine.ledger import Ledger as L2\n"
        "assert Ledger is L2 and engine.Ledger is L2\n"
        "assert set(engine.__all__) <= set(dir(engine))\n"
        "print(missing)"
    )
    assert out == "[]"
    with pytest.raises(AttributeError):
        import engine

        engine.NoSuchThing  # noqa: B018


@pytest.mark.parametrize(
    "first",
    ["projections.grounding.checker", "projections.buffer", "projections", "engine.events", "engine.render", "engine._store.log_store",
     "engine.session", "engine.tools", "engine.cli", "engine.importers", "engine.checkers"],
)
def test_any_module_can_be_imported_first(first):
    """No import-order trick: whichever module a program imports first, everything loads."""
    assert _fresh(f"import {first}\nimport engine, projections\nfrom engine import Ledger, render\nprint(callable(render))") == "True"
