"""Shared fixtures. The core suite runs on every store: memory://, a real SQLite file, and the real
PostgreSQL server named by $CTXLEDGER_TEST_POSTGRES (skipped, with the reason, when it is unset)."""

from __future__ import annotations

import importlib.util
import os
import re
import uuid

import pytest

from engine import EstimateCounter, Ledger

POSTGRES_DSN = os.environ.get("CTXLEDGER_TEST_POSTGRES", "")
NO_POSTGRES = "CTXLEDGER_TEST_POSTGRES is not set (e.g. postgresql://postgres@127.0.0.1:5432/test); .ci/run sets it"


def postgres_url() -> str:
    """A URL on the test server with a schema of its own, so tests never see each other's tables."""
    if not POSTGRES_DSN:
        pytest.skip(NO_POSTGRES)
    import psycopg

    schema = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in POSTGRES_DSN else "?"
    return f"{POSTGRES_DSN}{sep}schema={schema}"


def drop_schema(url: str) -> None:
    import psycopg

    schema = url.rsplit("schema=", 1)[1]
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request, tmp_path):
    """A fresh store URL of each kind."""
    if request.param == "memory":
        yield "memory://"
    elif request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        url = postgres_url()
        yield url
        drop_schema(url)


@pytest.fixture
def ledger(store_url):
    """A fresh ledger on each store, counting tokens with the fast estimate."""
    led = Ledger.open(store_url, token_counter=EstimateCounter())
    yield led
    led.close()


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    """A fresh durable store URL of each kind: a SQLite file, a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
    else:
        u = postgres_url()
        yield u
        drop_schema(u)


@pytest.fixture
def no_proxy(monkeypatch):
    """Requests to the fake servers on 127.0.0.1 go direct, whatever proxy the environment names."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def server(no_proxy):
    """A scripted fake OpenAI/Anthropic server (tests/fake_model_server.py's ``FakeServer``)."""
    from fake_model_server import FakeServer

    srv = FakeServer()
    yield srv
    srv.close()


@pytest.fixture
def anyio_backend():
    """The async tests (MCP) run on asyncio."""
    return "asyncio"


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def mem_ledger():
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    yield led
    led.close()


# -- tests that need an optional extra -------------------------------------------------------------
# A test module whose imports need an extra that is not installed is skipped, with the extra named
# (an importorskip for every module, keyed on engine.extras' table): the core suite runs green in a
# core-only install (`pip install -e .`). .ci/run's main run sets CTXLEDGER_TEST_ALL_EXTRAS=1, where
# a missing extra is the failure it is.
ALL_EXTRAS = os.environ.get("CTXLEDGER_TEST_ALL_EXTRAS") == "1"
TEST_ONLY_MODULES = {"anyio": "mcp", "playwright": "test", "onnx": "test", "grimp": "test", "importlinter": "test"}


_EXTRA_HINT = re.compile(r"pip install 'ctxledger\[([a-z-]+)\]'")
_NO_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")  # a subprocess's traceback


def _installed(extra: str) -> bool:
    from engine.extras import EXTRA_OF_MODULE

    modules = [m for m, e in {**EXTRA_OF_MODULE, **TEST_ONLY_MODULES}.items() if e == extra]
    return bool(modules) and all(importlib.util.find_spec(m) is not None for m in modules)


def needed_extra(error: BaseException | None) -> tuple[str, str] | None:
    """(extra, what is missing) when ``error`` -- or an error it was raised from -- says an extra
    that is not installed is missing: a missing module an extra installs, or ctxledger's own
    one-line error naming ``pip install 'ctxledger[EXTRA]'``."""
    from engine.extras import extra_for

    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, ModuleNotFoundError) and error.name:
            top = error.name.split(".", 1)[0]
            extra = extra_for(top) or TEST_ONLY_MODULES.get(top)
            if extra and importlib.util.find_spec(top) is None:
                return extra, f"{top} is not installed"
        text = str(error)
        for name in _NO_MODULE.findall(text):
            top = name.split(".", 1)[0]
            extra = extra_for(top) or TEST_ONLY_MODULES.get(top)
            if extra and importlib.util.find_spec(top) is None:
                return extra, f"{top} is not installed"
        hint = _EXTRA_HINT.search(text)
        if hint and not _installed(hint.group(1)):
            return hint.group(1), "it is not installed"
        error = error.__cause__ or error.__context__
    return None


def _skip_reason(found: tuple[str, str]) -> str:
    return f"needs the {found[0]} extra (pip install 'ctxledger[{found[0]}]'): {found[1]}"


class ModuleNeedingExtras(pytest.Module):
    def collect(self):
        try:
            return super().collect()
        except pytest.Collector.CollectError as e:
            found = None if ALL_EXTRAS else needed_extra(e.__cause__)
            if found is None:
                raise
            raise pytest.skip.Exception(_skip_reason(found), allow_module_level=True) from None


def pytest_pycollect_makemodule(module_path, parent):
    return ModuleNeedingExtras.from_parent(parent, path=module_path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test (or its fixture) that fails only because an extra is missing is skipped, naming it."""
    outcome = yield
    report = outcome.get_result()
    if ALL_EXTRAS or not report.failed or call.excinfo is None:
        return
    found = needed_extra(call.excinfo.value)
    if found is not None:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1], f"Skipped: {_skip_reason(found)}")


# -- the slow tests: `pytest -m "not slow"` is the inner loop ----------------------------------------
# Driving a browser, running the demo study and fuzzing take most of the suite's time; they are
# marked here by what they are, so a new test of those kinds is marked too.
SLOW_FILE_PARTS = ("browser", "fuzz")
SLOW_FILE_PREFIXES = ("test_demo",)


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = item.path.name
        if (
            item.get_closest_marker("browser") is not None
            or any(part in name for part in SLOW_FILE_PARTS)
            or name.startswith(SLOW_FILE_PREFIXES)
        ):
            item.add_marker(pytest.mark.slow)
