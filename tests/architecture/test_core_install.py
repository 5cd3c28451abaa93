"""A core-only install (`pip install -e .`, no extras): every command that needs an extra says so in
the README's one line -- ``ctxledger: error: ... pip install 'ctxledger[EXTRA]'`` -- exits 2, prints
no traceback and nothing before it, and leaves the store as it was. Each case runs where its extra
is missing (.ci/run's core-only venv) and is skipped where it is installed; the extras table itself
is checked everywhere against pyproject.toml."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from engine import EstimateCounter, Ledger, MissingExtraError
from engine.extras import EXTRA_OF_MODULE, extra_for, require

ROOT = Path(__file__).resolve().parents[2]
CTXLEDGER = Path(sys.executable).with_name("ctxledger")


def missing(extra: str) -> bool:
    """Whether none of the extra's modules can be imported (a core-only install)."""
    return all(importlib.util.find_spec(m) is None for m, e in EXTRA_OF_MODULE.items() if e == extra)


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """A store with a session holding a summary (so checkers run) and one due for compaction."""
    url = f"sqlite:///{tmp_path_factory.mktemp('core') / 'core.db'}"
    ledger = Ledger.open(url, token_counter=EstimateCounter())
    s = ledger.create_session("rw")
    for i in range(12):
        s.observe(f"billing-api returned 503 at 14:{i:02d} " + "detail " * 30, tokens=60)
    s.rewrite(["o1", "o2"], "billing-api returned 503 twice", by="test", tokens=8)
    ledger.close()
    return url


def snapshot(url: str) -> list[tuple[str, int]]:
    ledger = Ledger.open(url, token_counter=EstimateCounter())
    try:
        return [(i.name, i.position) for i in ledger.sessions()]
    finally:
        ledger.close()


CASES = [
    ("proxy", ["proxy", "--upstream", "http://127.0.0.1:9"]),
    ("serve", ["serve", "--port", "0"]),
    ("watch", ["watch", "{tmp}"]),
    ("mcp", ["mcp", "--session", "rw"]),
    ("otel", ["otel", "export", "rw"]),
    ("crypto", ["keygen", "{tmp}/key"]),
    ("crypto", ["checkpoint", "rw", "--key", "{tmp}/key"]),
    ("openai", ["--checker", "llm:gpt-4o-mini", "audit", "rw"]),
    ("openai", ["compact", "rw", "--budget", "200", "--keep-turns", "1", "--rewriter", "openai", "--model", "m"]),
    ("anthropic", ["compact", "rw", "--budget", "200", "--keep-turns", "1", "--rewriter", "anthropic", "--model", "m"]),
    ("openai", ["demo", "--model", "openai:gpt-4o-mini", "--cycles", "1", "--prefix", "core"]),
    ("nli", ["--checker", "nli:{tmp}", "audit", "rw"]),
    ("postgres", ["--db", "postgresql://postgres@127.0.0.1:9/test", "sessions"]),
]


@pytest.mark.parametrize("extra, args", CASES, ids=[f"{e}:{a[0] if a[0] != '--checker' else a[1]}" for e, a in CASES])
def test_a_command_needing_a_missing_extra_says_which_in_one_line(extra, args, store, tmp_path):
    if not missing(extra):
        pytest.skip(f"the {extra} extra is installed: this case checks a core-only install")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if args[0] != "--db":
        args = ["--db", store, *args]
    before = snapshot(store)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_", "ANTHROPIC_", "CTXLEDGER_URL"))}
    run = subprocess.run([str(CTXLEDGER), *args], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                         env=env, cwd=tmp_path)
    assert run.returncode == 2, (run.stdout, run.stderr)
    assert run.stdout == ""
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr  # nothing before the error (watch used to announce itself first)
    assert lines[0].startswith("ctxledger: error: ") and f"pip install 'ctxledger[{extra}]'" in lines[0]
    assert snapshot(store) == before


@pytest.mark.parametrize("module, extra", [("engine.integrations.openai_agents", "openai-agents"),
                                           ("engine.integrations.langchain", "langchain"),
                                           ("engine.integrations.mcp", "mcp"), ("engine.proxy", "proxy"),
                                           ("engine.viewer.app", "serve")])
def test_an_adapter_without_its_extra_is_an_import_error_naming_it(module, extra):
    if not missing(extra):
        pytest.skip(f"the {extra} extra is installed: this case checks a core-only install")
    code = f"import {module}"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 1
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ") and f"pip install 'ctxledger[{extra}]'" in last


def test_the_extras_table_names_extras_pyproject_declares():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    for module, extra in EXTRA_OF_MODULE.items():
        assert extra in declared, (module, extra)
        assert extra in declared["all"][0], (module, extra)
    assert extra_for("opentelemetry.sdk.trace") == "otel" and extra_for("json") is None and extra_for(None) is None


def test_require_names_the_extra_and_the_module():
    with pytest.raises(MissingExtraError) as e:
        require("ctxledger_no_such_module", "watch", "ctxledger watch")
    assert e.value.extra == "watch" and e.value.missing == "ctxledger_no_such_module"
    assert e.value.message == (
        "ctxledger watch needs the watch extra: pip install 'ctxledger[watch]' (ctxledger_no_such_module is missing)"
    )
    assert require("json", "watch", "x").__name__ == "json"


@pytest.mark.skipif(os.environ.get("CTXLEDGER_TEST_ALL_EXTRAS") != "1", reason="only where every extra is meant to be")
def test_every_extra_is_installed_where_the_full_suite_runs():
    """The full run installs '.[all]': a missing extra there would skip its tests silently."""
    assert [m for m in EXTRA_OF_MODULE if importlib.util.find_spec(m) is None] == []
