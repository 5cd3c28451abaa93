"""Shared fixtures. The core suite runs on every store: memory://, a real SQLite file, and the real
PostgreSQL server named by $CTXLEDGER_TEST_POSTGRES (skipped, with the reason, when it is unset)."""

from __future__ import annotations

import os
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


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'ledger.db'}"


@pytest.fixture
def mem_ledger():
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    yield led
    led.close()
