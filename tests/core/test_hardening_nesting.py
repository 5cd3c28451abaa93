"""Nesting depth and size (issue 24, items 2 and 18): whatever nests past what every reader of the log
can decode is refused at validation with a typed error and the log unchanged; whatever is accepted
is readable by every reader, at any stack depth they run at; a log that already holds such an event
(an older ctxledger wrote it) is reported as undecodable, not as tampered, by the API and the CLI
alike; and the audit of a tampered log exits 1 with a finding, never 3 with a Python error."""

from __future__ import annotations

import json
import sqlite3
import sys

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import EstimateCounter, InvalidInputError, Ledger
from engine import validate
from engine.cli import main
from engine._store.codec import READABLE_DEPTH
from engine._store.transfer import import_lines

LIMIT = validate.MAX_META_DEPTH
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def nested(depth: int, leaf=1, kind: str = "list"):
    """A value ``depth`` containers deep (lists, dicts or both in turn)."""
    value = leaf
    for i in range(depth):
        use_dict = kind == "dict" or (kind == "mixed" and i % 2)
        value = {"k": value} if use_dict else [value]
    return value


def meta_of_depth(depth: int, kind: str = "list") -> dict:
    """A meta dict whose nesting, meta itself included, is exactly ``depth``."""
    return {"deep": nested(depth - 1, kind=kind)}


def at_stack_depth(frames: int, fn):
    """Run ``fn`` with ``frames`` more Python frames on the stack: a reader deep inside a framework."""
    if frames <= 0:
        return fn()
    return at_stack_depth(frames - 1, fn)


COMMANDS = {
    "observe": lambda s, m: s.observe("x", meta=m),
    "prune": lambda s, m: s.prune("o1", meta=m),
    "rewrite": lambda s, m: s.rewrite(["o1"], "sum", meta=m),
    "tool call": lambda s, m: s.observe("call", role="assistant", kind="tool_call",
                                        meta={"tool_call_id": "c", "name": "t", "arguments": m}),
}


def test_nesting_counts_every_container_without_recursion():
    assert validate.nesting(1, 10) == 0
    assert validate.nesting({}, 10) == 1
    assert validate.nesting({"a": [1, {"b": ()}]}, 10) == 4
    assert validate.nesting(nested(50, kind="mixed"), 100) == 50
    assert validate.nesting(nested(100_000), 64) == 65  # stops early, no RecursionError
    cycle: list = []
    cycle.append(cycle)
    assert validate.nesting(cycle, 64) == 65


@SETTINGS
@given(depth=st.integers(1, 3 * LIMIT), kind=st.sampled_from(["list", "dict", "mixed"]),
       command=st.sampled_from(sorted(COMMANDS)))
def test_meta_at_most_the_limit_is_accepted_and_deeper_is_refused(mem_ledger, depth, kind, command):
    name = f"n{depth}-{kind}-{command}".replace(" ", "-")
    s = mem_ledger.session(name) if name in mem_ledger else mem_ledger.create_session(name)
    if not s.position > 1:
        s.observe("first")
    meta = meta_of_depth(depth, kind)
    if command == "tool call":
        meta = nested(depth - 2, kind=kind) if depth > 2 else {}  # the arguments sit one level down
    before = s.export()
    if depth <= LIMIT:
        COMMANDS[command](s, meta)
        assert s.verify().ok
        return
    with pytest.raises(InvalidInputError) as err:
        COMMANDS[command](s, meta)
    assert f"{LIMIT} levels" in err.value.message and "\n" not in err.value.message
    assert s.export() == before
    assert mem_ledger.session(name).export() == before


@pytest.mark.parametrize("depth", [LIMIT + 1, 990, 996, 5000, 100_000])
def test_hostile_depths_are_a_typed_error_never_a_recursion_error(mem_ledger, depth):
    s = mem_ledger.create_session("deep")
    s.observe("one")
    before = s.export()
    with pytest.raises(InvalidInputError):
        s.observe("x", meta=meta_of_depth(depth))
    assert s.export() == before and s.verify().ok


def test_a_meta_that_refers_to_itself_is_a_typed_error(mem_ledger):
    s = mem_ledger.create_session("cycle")
    loop: dict = {}
    loop["self"] = loop
    before = s.export()
    with pytest.raises(InvalidInputError):
        s.observe("x", meta={"a": loop})
    assert s.export() == before


def test_size_is_bounded_as_well_as_depth(mem_ledger):
    s = mem_ledger.create_session("wide")
    before = s.export()
    wide = {"k": [[str(i) * 10 for i in range(1000)] for _ in range(30)]}  # shallow, 300k+ bytes
    with pytest.raises(InvalidInputError, match="bytes"):
        s.observe("x", meta=wide)
    assert s.export() == before


@pytest.fixture
def deepest(tmp_path):
    """A SQLite store whose session 'a' holds an event nested exactly as deep as validation allows."""
    url = f"sqlite:///{tmp_path / 'deep.db'}"
    with Ledger.open(url, token_counter=EstimateCounter()) as led:
        s = led.create_session("a")
        s.observe("hello")
        s.observe("x", meta=meta_of_depth(LIMIT, "mixed"))
        s.observe("after")
    return url


def test_an_accepted_event_is_readable_by_every_reader_at_any_stack_depth(deepest):
    headroom = sys.getrecursionlimit() - 3 * READABLE_DEPTH - 150  # a deep framework stack, and room

    def read_everything():
        with Ledger.open(deepest, token_counter=EstimateCounter()) as led:
            s = led.session("a")
            lines = s.export()
            assert [e.type for e in s.events()][-1] == "Observed"
            assert s.verify().ok and s.audit().chain_ok
            other = Ledger.open("memory://", token_counter=EstimateCounter())
            copy = other.session(import_lines(other.store, lines))
            assert copy.export() == lines
            return json.loads(lines[2])

    assert at_stack_depth(headroom, read_everything)["event"]["meta"]["deep"]
    runner = CliRunner()
    for args in (["show", "a"], ["log", "a"], ["log", "a", "--json"], ["export", "a"], ["audit", "a"],
                 ["verify", "a"]):
        result = at_stack_depth(headroom // 2, lambda: runner.invoke(main, ["--db", deepest, *args]))
        assert result.exit_code == 0, (args, result.output)
        assert "RecursionError" not in result.output


def _legacy_store(tmp_path, monkeypatch, depth: int, *, after: bool) -> str:
    """A store written by a ctxledger that did not bound nesting (validation's limit lifted)."""
    url = f"sqlite:///{tmp_path / 'legacy.db'}"
    monkeypatch.setattr(validate, "MAX_META_DEPTH", 10**6)
    with Ledger.open(url, token_counter=EstimateCounter()) as led:
        s = led.create_session("a")
        s.observe("hello")
        s.observe("x", meta=meta_of_depth(depth))
        if after:
            s.observe("after")
    monkeypatch.setattr(validate, "MAX_META_DEPTH", LIMIT)
    return url


@pytest.mark.parametrize("depth", [READABLE_DEPTH + 1, 500, 900])
@pytest.mark.parametrize("after", [True, False], ids=["then more", "last event"])
def test_a_too_deep_event_already_in_the_log_is_undecodable_not_tampered(tmp_path, monkeypatch, depth, after):
    url = _legacy_store(tmp_path, monkeypatch, depth, after=after)
    with Ledger.open(url, token_counter=EstimateCounter()) as led:
        api = led.verify("a")
    assert not api.ok and api.first_bad_position == 3 and api.cause == "undecodable"
    runner = CliRunner()
    text = runner.invoke(main, ["--db", url, "verify", "a"])
    assert text.exit_code == 1
    assert text.output.startswith("a: UNDECODABLE at position 3") and "BROKEN" not in text.output
    as_json = runner.invoke(main, ["--db", url, "verify", "a", "--json"])
    assert as_json.exit_code == 1
    data = json.loads(as_json.output)
    assert (data["ok"], data["first_bad_position"], data["cause"], data["reason"]) == (
        api.ok, api.first_bad_position, api.cause, api.reason)
    audit = runner.invoke(main, ["--db", url, "audit", "a"])  # a finding (exit 1), not a store failure (3)
    assert audit.exit_code == 1 and "chain-broken" in audit.output and "RecursionError" not in audit.output
    # the same verdict from deep inside a caller's stack: the API and the CLI cannot disagree
    deep = at_stack_depth(600, lambda: Ledger.open(url, token_counter=EstimateCounter()).verify("a"))
    assert (deep.ok, deep.cause, deep.first_bad_position) == (api.ok, api.cause, api.first_bad_position)


def test_a_deep_event_swapped_in_by_hand_is_tampering(tmp_path, monkeypatch):
    """An event replaced by a deep one its successor does not chain to: BROKEN, cause tampered."""
    url = _legacy_store(tmp_path, monkeypatch, 500, after=True)
    good = f"sqlite:///{tmp_path / 'good.db'}"
    with Ledger.open(good, token_counter=EstimateCounter()) as led:
        s = led.create_session("a")
        s.observe("hello")
        s.observe("y")
        s.observe("after")
        sid = s.id.hex
    con = sqlite3.connect(url[len("sqlite:///"):])
    (deep_state,), = con.execute("SELECT state FROM stored_events WHERE originator_id=? AND originator_version=3", (sid,))
    con.close()
    con = sqlite3.connect(good[len("sqlite:///"):])
    con.execute("UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=3", (deep_state, sid))
    con.commit()
    con.close()
    with Ledger.open(good, token_counter=EstimateCounter()) as led:
        result = led.verify("a")
    assert not result.ok and result.cause == "tampered" and result.first_bad_position == 3
    out = CliRunner().invoke(main, ["--db", good, "verify", "a"])
    assert out.exit_code == 1 and out.output.startswith("a: BROKEN at position 3")


def _tampered(tmp_path, how: str) -> tuple[str, list]:
    url = f"sqlite:///{tmp_path / 'tampered.db'}"
    with Ledger.open(url, token_counter=EstimateCounter()) as led:
        s = led.create_session("a")
        for i in range(5):
            s.observe(f"observation {i}")
        sid = s.id.hex
    con = sqlite3.connect(url[len("sqlite:///"):])
    if how == "first event deleted":
        con.execute("DELETE FROM stored_events WHERE originator_id=? AND originator_version=1", (sid,))
    elif how == "garbage bytes":
        con.execute("UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=3", (b"\xc1junk", sid))
    elif how == "middle event deleted":
        con.execute("DELETE FROM stored_events WHERE originator_id=? AND originator_version=3", (sid,))
    con.commit()
    rows = con.execute("SELECT originator_version, state FROM stored_events ORDER BY originator_version").fetchall()
    con.close()
    return url, rows


@pytest.mark.parametrize("how", ["first event deleted", "garbage bytes", "middle event deleted"])
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_audit_of_a_tampered_log_exits_1_with_a_chain_finding(tmp_path, how, as_json):
    url, rows = _tampered(tmp_path, how)
    result = CliRunner().invoke(main, ["--db", url, "audit", "a", *(["--json"] if as_json else [])])
    assert result.exit_code == 1, result.output
    for leak in ("AttributeError", "n_obs", "Traceback", "NoneType"):
        assert leak not in result.output
    if as_json:
        report = json.loads(result.output)
        assert report["ok"] is False and report["chain_ok"] is False
        assert [f["kind"] for f in report["findings"]] == ["chain-broken"]
    else:
        assert "DRIFT" in result.output and "chain-broken" in result.output
    con = sqlite3.connect(url[len("sqlite:///"):])
    assert con.execute("SELECT originator_version, state FROM stored_events ORDER BY originator_version").fetchall() == rows
    con.close()


def test_loading_a_log_that_does_not_replay_names_no_python_internals(tmp_path):
    url, _ = _tampered(tmp_path, "first event deleted")
    with Ledger.open(url, token_counter=EstimateCounter()) as led, pytest.raises(Exception) as err:
        led.session("a")
    message = getattr(err.value, "message", str(err.value))
    assert "does not replay" in message and "AttributeError" not in message and "n_obs" not in message


@pytest.mark.parametrize("depth,ok", [(200, True), (500, False), (900, False)])
def test_a_deep_field_the_event_types_do_not_know_is_judged_the_same_everywhere(tmp_path, depth, ok):
    """Bytes a decoder skips without showing them (an unknown field) still count: a last event
    carrying one nested past what readers skip at any stack is undecodable, from any caller; a
    small one (at most a few hundred bytes besides the text) is harmless and verifies."""
    import msgspec

    from engine._store.codec import chain_hash, encode_payload
    from engine.events import Observed, now

    url = f"sqlite:///{tmp_path / 'hidden.db'}"
    with Ledger.open(url, token_counter=EstimateCounter()) as led:
        s = led.create_session("a")
        s.observe("hello")
        head = chain_hash(led.store.plaintext(led.store.stored_row(s.id, 2)))
        sid = s.id.hex
        s.observe("placeholder")
    good = encode_payload(Observed(originator_version=3, at=now(), prev=head, span_id="o2", text="x"))
    hidden = bytes([good[0] + 1]) + good[1:] + msgspec.msgpack.encode("junk") + b"\x91" * depth + b"\x01"
    con = sqlite3.connect(url[len("sqlite:///"):])
    con.execute("UPDATE stored_events SET state=? WHERE originator_id=? AND originator_version=3", (hidden, sid))
    con.commit()
    con.close()
    with Ledger.open(url, token_counter=EstimateCounter()) as led:
        api = led.verify("a")
    deep = at_stack_depth(700, lambda: Ledger.open(url, token_counter=EstimateCounter()).verify("a"))
    assert (api.ok, api.cause) == (deep.ok, deep.cause) == ((True, "") if ok else (False, "undecodable"))
    out = CliRunner().invoke(main, ["--db", url, "verify", "a"])
    assert out.exit_code == (0 if ok else 1)
    assert ("UNDECODABLE at position 3" in out.output) is not ok
