"""Several processes (not threads) write at once, to distinct sessions and to the same session, on
SQLite and PostgreSQL. Afterwards every acknowledged event is in the log exactly once and where it
was acknowledged, every refused one raised ConcurrencyError and left no trace, the chains verify
and rebuilding from the first event gives the live buffers."""

from __future__ import annotations

import json
import multiprocessing
from collections import Counter
from pathlib import Path

import pytest

from engine import EstimateCounter, Ledger, Observed

WORKERS = 4
ATTEMPTS = 100


def writer(url: str, session: str, create: bool, worker: int, attempts: int, out: str, barrier) -> None:
    """One process: open its own Ledger, wait for the others, then write as fast as it can.
    Every outcome is written to ``out`` when the loop ends."""
    from engine import ConcurrencyError, EstimateCounter, Ledger

    acked, refused, errors = [], [], []
    led = Ledger.open(url, token_counter=EstimateCounter())
    s = led.create_session(session) if create else led.session(session)
    barrier.wait(timeout=60)
    for i in range(attempts):
        texts = [f"w{worker}-{i}-{k}" for k in range(3 if i % 10 == 9 else 1)]
        try:
            if len(texts) == 1:
                span = s.observe(texts[0])
                acked.append([texts[0], span.position])
            else:  # every tenth command is a batch of three: all three are written, or none
                with s.batch():
                    spans = [s.observe(t) for t in texts]
                acked.extend([t, sp.position] for t, sp in zip(texts, spans))
        except ConcurrencyError:
            refused.extend(texts)
        except Exception as e:  # anything else is a failure the parent reports
            errors.append(f"{type(e).__name__}: {e}")
    s.refresh()
    rebuilt_equal = s.rebuild() == s.state
    led.close()
    Path(out).write_text(json.dumps({"acked": acked, "refused": refused, "errors": errors, "rebuilt_equal": rebuilt_equal}))


def run_writers(url: str, tmp_path: Path, sessions: list[str], create: bool) -> list[dict]:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(sessions))
    outs = [str(tmp_path / f"w{w}.json") for w in range(len(sessions))]
    procs = [
        ctx.Process(target=writer, args=(url, name, create, w, ATTEMPTS, outs[w], barrier))
        for w, name in enumerate(sessions)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
        assert p.exitcode == 0, f"writer exited with {p.exitcode}"
    return [json.loads(Path(o).read_text()) for o in outs]


def observed(session) -> list[Observed]:
    return [e for e in session.events() if isinstance(e, Observed)]


def check_log(led: Ledger, name: str, results: list[dict]) -> None:
    s = led.session(name)
    events = observed(s)
    acked = [tuple(a) for r in results for a in r["acked"]]
    refused = [t for r in results for t in r["refused"]]
    counts = Counter(e.text for e in events)
    # every acknowledged event is in the log exactly once, at the position it was acknowledged at
    assert all(counts[text] == 1 for text, _ in acked)
    by_text = {e.text: e.originator_version for e in events}
    assert all(by_text[text] == position for text, position in acked)
    # nothing else is: refused commands left no trace
    assert not set(refused) & set(counts)
    assert len(events) == len(acked)
    assert s.position == 1 + len(acked)
    assert [e.originator_version for e in s.events()] == list(range(1, s.position + 1))
    assert s.verify().ok
    assert s.rebuild() == s.state
    assert all(r["rebuilt_equal"] for r in results)


def test_processes_writing_distinct_sessions(url, tmp_path):
    names = [f"agent-{w}" for w in range(WORKERS)]
    results = run_writers(url, tmp_path, names, create=True)
    led = Ledger.open(url, token_counter=EstimateCounter())
    for name, result in zip(names, results):
        assert result["errors"] == []
        assert result["refused"] == []  # nobody else writes to this session
        assert len(result["acked"]) == ATTEMPTS + 2 * (ATTEMPTS // 10)
        check_log(led, name, [result])
    assert sorted(i.name for i in led.sessions()) == names
    led.close()


def test_processes_writing_the_same_session(url, tmp_path):
    led = Ledger.open(url, token_counter=EstimateCounter())
    led.create_session("shared")
    results = run_writers(url, tmp_path, ["shared"] * WORKERS, create=False)
    for r in results:
        assert r["errors"] == []
        assert len(r["acked"]) + len(r["refused"]) == ATTEMPTS + 2 * (ATTEMPTS // 10)
    assert sum(len(r["acked"]) for r in results) > 0
    check_log(led, "shared", results)
    # the refused batches are all-or-nothing: a batch's three texts are all acked or all refused
    for r in results:
        refused_batches = Counter(t.rsplit("-", 1)[0] for t in r["refused"])
        assert all(n in (1, 3) for n in refused_batches.values())
    led.close()


def test_a_refused_command_reloads_the_session_and_the_next_one_lands(tmp_path):
    """The in-process view of the same guarantee, deterministic: two Ledgers, one session."""
    from engine import ConcurrencyError

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    a, b = Ledger.open(url, token_counter=EstimateCounter()), Ledger.open(url, token_counter=EstimateCounter())
    sa = a.create_session("s")
    sb = b.session("s")
    for i in range(50):  # alternate: each writer is stale every time
        sa.observe(f"a{i}")
        with pytest.raises(ConcurrencyError):
            sb.observe(f"b{i}-refused")
        sb.observe(f"b{i}")
        with pytest.raises(ConcurrencyError):
            sa.observe(f"a{i}-refused")
    texts = [e.text for e in observed(a.session("s"))]
    assert texts == [t for i in range(50) for t in (f"a{i}", f"b{i}")]
    # no payload of a refused event is left behind to be written under a later event
    assert a.store.app.mapper.prepared == {} and b.store.app.mapper.prepared == {}
    assert a.session("s").verify().ok
    a.close()
    b.close()


def test_two_processes_creating_the_same_session_one_wins(url, tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(3)
    outs = [tmp_path / f"c{i}.txt" for i in range(3)]
    procs = [ctx.Process(target=creator, args=(url, str(o), barrier)) for o in outs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    outcomes = sorted(o.read_text() for o in outs)
    assert outcomes.count("created") == 1 and outcomes.count("DuplicateSessionError") == 2
    led = Ledger.open(url, token_counter=EstimateCounter())
    assert [i.name for i in led.sessions()] == ["race"]
    assert led.session("race").position == 1 and led.session("race").verify().ok
    led.close()


def creator(url: str, out: str, barrier) -> None:
    from engine import DuplicateSessionError, Ledger

    led = Ledger.open(url)
    barrier.wait(timeout=60)
    try:
        led.create_session("race")
        Path(out).write_text("created")
    except DuplicateSessionError:
        Path(out).write_text("DuplicateSessionError")
    finally:
        led.close()


def opener(url: str, out: str, barrier) -> None:
    from engine import Ledger, LedgerError
    from engine.fleet import Fleet

    barrier.wait(timeout=60)
    try:
        with Ledger.open(url) as led, Fleet(led):
            Path(out).write_text("ok")
    except LedgerError as e:
        Path(out).write_text(f"{type(e).__name__}: {e.message}")


def test_many_processes_opening_a_fresh_store_at_once(url, tmp_path):
    """Agents on many hosts starting together on an empty database: every one of them opens it
    (eventsourcing's table creation races unless it is serialized), and the store is marked once."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    outs = [tmp_path / f"o{i}.txt" for i in range(WORKERS)]
    procs = [ctx.Process(target=opener, args=(url, str(o), barrier)) for o in outs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    assert [o.read_text() for o in outs] == ["ok"] * WORKERS
    led = Ledger.open(url)
    assert led.sessions() == []
    from engine._store.log_store import MARK_ID as _MARK_ID

    assert len(led.store.app.recorder.select_events(_MARK_ID)) == 1
    led.close()
