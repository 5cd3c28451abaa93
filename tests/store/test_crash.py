"""Crashes: a child process writing in a loop is killed with SIGKILL at random moments, many times,
on SQLite. After every kill the log is a prefix of what was attempted that holds everything that
was acknowledged (at most the one command in flight is there unacknowledged), it verifies, the
rebuild equals the live buffer, the database passes SQLite's integrity check, and the next process
continues the session from it."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import sqlite3
import time
from pathlib import Path

from engine import EstimateCounter, Ledger, Observed, Pruned, Rewritten

KILLS = 20


def child(url: str, run: int, log_path: str) -> None:
    """Write for ever: observe, sometimes prune or rewrite, now and then a large text (so
    snapshots are taken too). Before each command its intent is logged; after it returns, the
    acknowledgement (with the position it got) is logged and fsynced."""
    from engine import EstimateCounter, Ledger

    f = open(log_path, "a", encoding="utf-8")
    # the previous writer may have been killed in the middle of a long line (a large text takes
    # several write calls): end that line, or this run's first record would be glued to it
    f.write("\n")

    def note(**record) -> None:
        f.write(json.dumps({"run": run, **record}) + "\n")
        f.flush()
        os.fsync(f.fileno())

    led = Ledger.open(url, token_counter=EstimateCounter())
    s = led.session("crashy") if "crashy" in led else led.create_session("crashy")
    note(ready=True, position=s.position)
    rng = random.Random(run)
    i = 0
    while True:
        i += 1
        observed = [sp.id for sp in s.spans() if sp.observed]
        if i % 7 == 0 and len(observed) > 3:
            target = observed[0]
            note(intent="prune", span=target)
            s.prune(target)
            note(ack="prune", span=target, position=s.position)
        elif i % 11 == 0 and len(observed) > 4:
            inputs, text = observed[1:3], f"r{run}-{i} summary"
            note(intent="rewrite", text=text)
            span = s.rewrite(inputs, text)
            note(ack="rewrite", text=text, span=span.id, position=s.position)
        else:
            text = f"r{run}-{i} " + ("large " * 1000 if rng.random() < 0.1 else "small")
            note(intent="observe", text=text)
            span = s.observe(text)
            note(ack="observe", text=text, span=span.id, position=s.position)


def read_log(path: Path) -> list[dict]:
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:  # the line being written when the kill came
            pass
    return records


def wait_ready(path: Path, run: int, proc) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and any(r.get("run") == run and r.get("ready") for r in read_log(path)):
            return
        assert proc.is_alive(), f"the writer of run {run} died before it was ready (exit {proc.exitcode})"
        time.sleep(0.01)
    proc.kill()  # no writer left behind to write for ever
    raise AssertionError(f"the writer of run {run} never became ready")


def check(url: str, db: Path, records: list[dict], seed: int) -> int:
    acks = [r for r in records if "ack" in r]
    intents = [r for r in records if "intent" in r]
    led = Ledger.open(url, token_counter=EstimateCounter())
    try:
        s = led.session("crashy")
        events = list(s.events())
        n = len(events)
        assert s.verify().ok, f"seed {seed}: {s.verify()}"
        assert s.rebuild() == s.state, f"seed {seed}"
        # everything acknowledged is there, where it was acknowledged
        for a in acks:
            ev = events[a["position"] - 1]
            if a["ack"] == "observe":
                assert isinstance(ev, Observed) and ev.text == a["text"] and ev.span_id == a["span"], (seed, a)
            elif a["ack"] == "rewrite":
                assert isinstance(ev, Rewritten) and ev.text == a["text"], (seed, a)
            else:
                assert isinstance(ev, Pruned) and ev.span_id == a["span"], (seed, a)
        # and at most the one command in flight is there without an acknowledgement
        last = acks[-1]["position"] if acks else 1
        assert last <= n <= last + 1, f"seed {seed}: log has {n} events, last acknowledged {last}"
        if n == last + 1:
            pending = intents[-1]
            tail = events[-1]
            assert pending["intent"] == {Observed: "observe", Rewritten: "rewrite", Pruned: "prune"}[type(tail)], seed
            if pending["intent"] != "prune":
                assert tail.text == pending["text"], seed
        # the file itself is sound
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        con.close()
        return n
    finally:
        led.close()


def test_sigkill_at_random_moments_loses_nothing_acknowledged(tmp_path):
    seed = int(os.environ.get("CTXLEDGER_CRASH_SEED", time.time_ns() % 2**32))
    rng = random.Random(seed)
    db = tmp_path / "crash.db"
    url = f"sqlite:///{db}"
    log = tmp_path / "acks.jsonl"
    # forkserver: children are forked from a clean, single-threaded server process that has
    # imported ctxledger once, so each of the many restarts is quick and safe from the test
    # process's threads.
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["engine", "engine.ledger", "engine.session"])
    sizes = []
    for run in range(KILLS):
        proc = ctx.Process(target=child, args=(url, run, str(log)))
        proc.start()
        wait_ready(log, run, proc)
        time.sleep(rng.uniform(0.05, 0.3))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(timeout=30)
        assert proc.exitcode == -signal.SIGKILL, f"seed {seed}: run {run} ended with {proc.exitcode}"
        records = read_log(log)
        ready = next(r for r in records if r.get("run") == run and r.get("ready"))
        # each run continued from exactly where the previous crash left the log
        if sizes:
            assert ready["position"] == sizes[-1], f"seed {seed}: run {run} started at {ready['position']}"
        sizes.append(check(url, db, records, seed))
    assert sizes == sorted(sizes) and sizes[-1] > KILLS, f"seed {seed}: the writers made no progress: {sizes}"
    # the session carries on after the last crash
    led = Ledger.open(url, token_counter=EstimateCounter())
    s = led.session("crashy")
    s.observe("after the crashes")
    assert s.position == sizes[-1] + 1 and s.verify().ok
    assert Ledger.open(url, token_counter=EstimateCounter()).session("crashy").rebuild() == s.state
    led.close()


_KILLED_MID_CREATE = """
import os, signal, sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA journal_mode=delete")
con.execute("PRAGMA cache_size=1")  # pages spill into the file before the commit: the journal is hot
con.execute("BEGIN")
con.execute("CREATE TABLE stored_events (originator_id, originator_version, topic, state)")
con.executemany("INSERT INTO stored_events VALUES (?, ?, ?, ?)", [(b"x" * 16, i, "t", b"y" * 500) for i in range(2000)])
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_store_whose_creator_was_killed_mid_transaction_opens(tmp_path):
    """A process killed while it created the store (a hook stopped by the agent's timeout) leaves a
    hot rollback journal; the next open rolls it back, as any writer would, instead of calling the
    file "not a SQLite database" forever after."""
    import subprocess
    import sys

    db = tmp_path / "hooks.db"
    subprocess.run([sys.executable, "-c", _KILLED_MID_CREATE, str(db)], timeout=60)
    assert Path(f"{db}-journal").exists()
    with Ledger.open(f"sqlite:///{db}") as ledger:
        ledger.create_session("after-the-crash").observe("hello", role="user")
    with Ledger.open(f"sqlite:///{db}") as ledger:
        assert [i.name for i in ledger.sessions()] == ["after-the-crash"]
