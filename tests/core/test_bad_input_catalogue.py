"""The bad-input catalogue: every kind of bad input gets its own clear, typed, one-line error; the
log is unchanged; nothing crashes with a dependency's traceback.

API misuse runs on every store (memory, SQLite, PostgreSQL). Hostile import files, broken and
foreign databases, a wrong PostgreSQL password and a server that goes away have their own sections.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import struct
import threading
import uuid
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from conftest import POSTGRES_DSN, drop_schema, postgres_url
from engine import (
    ConcurrencyError,
    DuplicateSessionError,
    EstimateCounter,
    ImportFormatError,
    InvalidInputError,
    Ledger,
    LedgerError,
    NotALedgerError,
    PositionOutOfRangeError,
    RewritePolicyError,
    RewriterError,
    RewriteRefused,
    SpanNotLiveError,
    SpanStateError,
    StorageError,
    StoreUnavailableError,
    UnknownSessionError,
    UnknownSpanError,
)
from engine.cli import main
from engine._store.codec import chain_hash, encode_payload
from engine._store.transfer import EVENT_DECODERS

MB = 2**20


def fingerprint(led: Ledger, name: str) -> list[str]:
    """The whole log as stored, re-read from the store."""
    return led.session(name).export()


def setup(led: Ledger):
    """o1 live, o2 pruned, d1 <- o3,o4, o5 a tool call, o6 its result, mark 'm'."""
    s = led.create_session("cat")
    s.observe("one")
    s.prune(s.observe("two").id)
    s.rewrite([s.observe("three").id, s.observe("four").id], "three and four")
    s.observe("call", role="assistant", kind="tool_call", meta={"tool_call_id": "c1", "name": "ls"})
    s.observe("result", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
    s.mark("m")
    return s


class Boom:
    name = "boom"

    def rewrite(self, spans, instruction=None):
        raise ConnectionResetError("the model API hung up")


def _nested(depth: int) -> dict:
    """A meta dict nesting ``depth`` lists below itself, built without recursion."""
    value: object = 1
    for _ in range(depth):
        value = [value]
    return {"k": value}


def _cycle() -> dict:
    loop: dict = {}
    loop["self"] = loop
    return {"a": loop}


CASES = {
    # wrong types
    "observe int": (lambda s: s.observe(42), InvalidInputError),
    "observe None": (lambda s: s.observe(None), InvalidInputError),
    "observe bytes": (lambda s: s.observe(b"bytes"), InvalidInputError),
    "observe list": (lambda s: s.observe(["a"]), InvalidInputError),
    "role int": (lambda s: s.observe("x", role=5), InvalidInputError),
    "role unknown": (lambda s: s.observe("x", role="robot"), InvalidInputError),
    "kind unknown": (lambda s: s.observe("x", kind="bogus"), InvalidInputError),
    "kind summary is not observable": (lambda s: s.observe("x", kind="summary"), InvalidInputError),
    "tool result without call id": (lambda s: s.observe("x", role="tool", kind="tool_result"), InvalidInputError),
    "meta str": (lambda s: s.observe("x", meta="k=v"), InvalidInputError),
    "meta int key": (lambda s: s.observe("x", meta={1: "a"}), InvalidInputError),
    "meta object value": (lambda s: s.observe("x", meta={"a": object()}), InvalidInputError),
    "meta lone surrogate": (lambda s: s.observe("x", meta={"a": "\ud800"}), InvalidInputError),
    "meta huge": (lambda s: s.observe("x", meta={"a": "x" * (300 * 1024)}), InvalidInputError),
    # nesting past what every reader decodes (issue 24): refused, never a RecursionError
    "meta nested 65 deep": (lambda s: s.observe("x", meta=_nested(64)), InvalidInputError),
    "meta nested 990 deep": (lambda s: s.observe("x", meta=_nested(989)), InvalidInputError),
    "meta nested 100k deep": (lambda s: s.observe("x", meta=_nested(100_000)), InvalidInputError),
    "meta that contains itself": (lambda s: s.observe("x", meta=_cycle()), InvalidInputError),
    "prune meta nested": (lambda s: s.prune("o1", meta=_nested(200)), InvalidInputError),
    "rewrite meta nested": (lambda s: s.rewrite(["o1"], "x", meta=_nested(200)), InvalidInputError),
    "tool call arguments nested": (lambda s: s.observe("c", role="assistant", kind="tool_call", meta={
        "tool_call_id": "c9", "name": "t", "arguments": _nested(996)["k"]}), InvalidInputError),
    "tokens negative": (lambda s: s.observe("x", tokens=-1), InvalidInputError),
    "tokens str": (lambda s: s.observe("x", tokens="3"), InvalidInputError),
    "tokens float": (lambda s: s.observe("x", tokens=1.5), InvalidInputError),
    "tokens bool": (lambda s: s.observe("x", tokens=True), InvalidInputError),
    "by int": (lambda s: s.observe("x", by=5), InvalidInputError),
    "reason huge": (lambda s: s.prune("o1", reason="r" * 20_000), InvalidInputError),
    # empty and huge texts, bad Unicode
    "text empty": (lambda s: s.observe(""), InvalidInputError),
    "text whitespace": (lambda s: s.observe(" \n\t "), InvalidInputError),
    "text 20 MB": (lambda s: s.observe("x" * (20 * MB)), InvalidInputError),
    "text 30 MB multibyte": (lambda s: s.observe("é" * (15 * MB)), InvalidInputError),
    "text lone surrogate": (lambda s: s.observe("abc\ud800def"), InvalidInputError),
    "text lone low surrogate": (lambda s: s.observe("\udfff"), InvalidInputError),
    "rewrite text 20 MB": (lambda s: s.rewrite(["o1"], "y" * (20 * MB)), InvalidInputError),
    "rewrite text surrogate": (lambda s: s.rewrite(["o1"], "\ud83d"), InvalidInputError),
    # unknown or pruned span ids
    "prune unknown": (lambda s: s.prune("o99"), UnknownSpanError),
    "prune not an id": (lambda s: s.prune("x1"), UnknownSpanError),
    "prune empty id": (lambda s: s.prune(""), UnknownSpanError),
    "prune zero id": (lambda s: s.prune("o0"), UnknownSpanError),
    "prune padded id": (lambda s: s.prune("o01"), UnknownSpanError),
    "prune int id": (lambda s: s.prune(1), InvalidInputError),
    "prune None id": (lambda s: s.prune(None), InvalidInputError),
    "prune pruned": (lambda s: s.prune("o2"), SpanNotLiveError),
    "prune rewritten": (lambda s: s.prune("o3"), SpanNotLiveError),
    "restore live": (lambda s: s.restore("o1"), SpanStateError),
    "restore unknown": (lambda s: s.restore("d7"), UnknownSpanError),
    "restore rewritten source": (lambda s: s.restore("o3"), SpanStateError),
    "original of derived": (lambda s: s.original("d1"), SpanStateError),
    "original unknown": (lambda s: s.original("o99"), UnknownSpanError),
    "span of pruned": (lambda s: s.span("o2"), SpanNotLiveError),
    # rewrite / rederive misuse
    "rewrite nothing": (lambda s: s.rewrite([], "x"), InvalidInputError),
    "rewrite twice the same": (lambda s: s.rewrite(["o1", "o1"], "x"), InvalidInputError),
    "rewrite not a list": (lambda s: s.rewrite(5, "x"), InvalidInputError),
    "rewrite unknown": (lambda s: s.rewrite(["o99"], "x"), UnknownSpanError),
    "rewrite pruned": (lambda s: s.rewrite(["o2"], "x"), SpanNotLiveError),
    "rewrite empty text": (lambda s: s.rewrite(["o1"], ""), InvalidInputError),
    "rewrite text int": (lambda s: s.rewrite(["o1"], 5), InvalidInputError),
    "rewrite role bad": (lambda s: s.rewrite(["o1"], "x", role="robot"), InvalidInputError),
    "rederive observed": (lambda s: s.rederive("o1", text="x"), SpanStateError),
    "rederive unknown": (lambda s: s.rederive("d9", text="x"), UnknownSpanError),
    "rederive both": (lambda s: s.rederive("d1", text="x", rewriter=lambda o: "y"), InvalidInputError),
    "rederive neither": (lambda s: s.rederive("d1"), InvalidInputError),
    "rederive rewriter raises": (lambda s: s.rederive("d1", rewriter=Boom()), RewriterError),
    "rederive rewriter returns int": (lambda s: s.rederive("d1", rewriter=lambda o: 5), RewriterError),
    "rederive rewriter returns empty": (lambda s: s.rederive("d1", rewriter=lambda o: " "), RewriterError),
    "rederive rewriter returns 20 MB": (lambda s: s.rederive("d1", rewriter=lambda o: "z" * (20 * MB)), RewriterError),
    "expand observed": (lambda s: s.expand("o1"), SpanStateError),
    "expand unknown": (lambda s: s.expand("d5"), UnknownSpanError),
    "mark empty": (lambda s: s.mark(""), InvalidInputError),
    "mark newline": (lambda s: s.mark("a\nb"), InvalidInputError),
    "mark NUL": (lambda s: s.mark("a\x00b"), InvalidInputError),
    "mark int": (lambda s: s.mark(5), InvalidInputError),
    # positions out of range
    "at 0": (lambda s: s.at(0), PositionOutOfRangeError),
    "at past head": (lambda s: s.at(10_000), PositionOutOfRangeError),
    "at far negative": (lambda s: s.at(-10_000), PositionOutOfRangeError),
    "at unknown mark": (lambda s: s.at("nomark"), PositionOutOfRangeError),
    "at float": (lambda s: s.at(1.5), PositionOutOfRangeError),
    "at bool": (lambda s: s.at(True), PositionOutOfRangeError),
    "event 0": (lambda s: s.event(0), PositionOutOfRangeError),
    "event past head": (lambda s: s.event(99), PositionOutOfRangeError),
    "events from 0": (lambda s: list(s.events(0)), PositionOutOfRangeError),
    "diff out of range": (lambda s: s.view(99), PositionOutOfRangeError),
}


def check_cases(cases: dict, run) -> None:
    """Run every case (each checks its own error and its own unchanged log); report all failures
    at once, by name."""
    failures = []
    for name, (call, expected) in cases.items():
        try:
            run(name, call, expected)
        except (AssertionError, pytest.fail.Exception) as e:  # a wrong or missing error
            failures.append(f"{name}: {e}")
        except Exception as e:  # an untyped error escaped: the worst failure
            failures.append(f"{name}: untyped {type(e).__name__}: {e}")
    assert not failures, "\n".join(failures)


def test_api_misuse_is_a_typed_error_and_the_log_is_unchanged(ledger):
    s = setup(ledger)

    def run(name, call, expected):
        before = fingerprint(ledger, "cat")
        with pytest.raises(expected) as err:
            call(s)
        assert isinstance(err.value, LedgerError)
        assert err.value.message and "\n" not in err.value.message
        assert "Traceback" not in err.value.message
        assert s.export() == before
        assert fingerprint(ledger, "cat") == before

    check_cases(CASES, run)
    s.observe("still usable")  # the session object is still good after every refusal
    assert s.verify().ok and s.rebuild() == s.state


def test_a_refused_rewrite_changes_the_log_only_by_its_refusal(ledger):
    s = setup(ledger)
    before = fingerprint(ledger, "cat")
    with pytest.raises(RewritePolicyError):
        s.rewrite(["d1"], "a summary of a summary")
    after = fingerprint(ledger, "cat")
    assert after[: len(before)] == before and len(after) == len(before) + 1
    assert isinstance(ledger.session("cat").event(len(after)), RewriteRefused)


SESSION_CASES = {
    "name empty": (lambda led: led.create_session(""), InvalidInputError),
    "name int": (lambda led: led.create_session(5), InvalidInputError),
    "name NUL": (lambda led: led.create_session("a\x00b"), InvalidInputError),
    "name newline": (lambda led: led.create_session("a\nb"), InvalidInputError),
    "name escape sequence": (lambda led: led.create_session("\x1b[31mred"), InvalidInputError),
    "name too long": (lambda led: led.create_session("x" * 201), InvalidInputError),
    "name surrogate": (lambda led: led.create_session("a\ud800"), InvalidInputError),
    "strict not bool": (lambda led: led.create_session("n", strict="yes"), InvalidInputError),
    "duplicate": (lambda led: led.create_session("cat"), DuplicateSessionError),
    "unknown session": (lambda led: led.session("nosuch"), UnknownSessionError),
    "session int": (lambda led: led.session(5), InvalidInputError),
    "session empty": (lambda led: led.session(""), InvalidInputError),
    "fork at bad position": (lambda led: led.fork("cat", at=999, name="f"), PositionOutOfRangeError),
    "fork to taken name": (lambda led: led.fork("cat", name="cat"), DuplicateSessionError),
    "verify unknown": (lambda led: led.verify("nosuch"), UnknownSessionError),
}


def test_session_misuse_is_a_typed_error_and_the_store_is_unchanged(ledger):
    setup(ledger)

    def run(name, call, expected):
        before = fingerprint(ledger, "cat")
        sessions = ledger.sessions()
        with pytest.raises(expected) as err:
            call(ledger)
        assert "\n" not in err.value.message
        assert fingerprint(ledger, "cat") == before
        assert ledger.sessions() == sessions

    check_cases(SESSION_CASES, run)


def test_nul_bytes_are_data_and_round_trip(ledger, tmp_path):
    s = ledger.create_session("nul")
    text = "before\x00after\x00"
    span = s.observe(text, meta={"k\x00": "v\x00"})
    s.rewrite([span.id], "sum\x00mary")
    again = ledger.session("nul")
    assert again.original("o1").text == text and again.original("o1").meta == {"k\x00": "v\x00"}
    assert again.spans()[0].text == "sum\x00mary"
    assert again.verify().ok and again.rebuild() == again.state
    path = tmp_path / "nul.jsonl"
    s.export(path)
    other = Ledger.open("memory://", token_counter=EstimateCounter())
    imported = other.import_(path)
    assert imported.original("o1").text == text
    other.close()


def test_texts_up_to_the_limit_are_accepted(ledger):
    s = ledger.create_session("big")
    text = "word " * (7 * MB // 5)  # 7 MB, under the 8 MB limit
    span = s.observe(text, tokens=1)
    assert ledger.session("big").original(span.id).text == text


# -- hostile import files -------------------------------------------------------------------------


def rechain(lines: list[str], edit) -> list[str]:
    """Apply ``edit(index, event_dict)`` to the decoded events, then recompute every hash and
    ``prev`` so the file is internally consistent: what a careful forger produces."""
    out = []
    prev = b""
    for i, raw in enumerate(lines):
        d = json.loads(raw)
        edit(i, d)
        ev = EVENT_DECODERS[d["type"]].decode(json.dumps(d["event"]))
        ev = msgspec.structs.replace(ev, prev=prev)
        payload = encode_payload(ev)
        d["event"] = json.loads(msgspec.json.encode(ev))
        d["hash"] = chain_hash(payload).hex()
        prev = chain_hash(payload)
        out.append(json.dumps(d))
    return out


@pytest.fixture(scope="module")
def good_export():
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    s = setup(led)
    lines = s.export()
    led.close()
    return lines


def _set(i_target, **fields):
    def edit(i, d):
        if i == i_target:
            d["event"].update(fields)

    return edit


def _rename(name):
    def edit(i, d):
        d["session"] = name
        d["session_id"] = str(uuid.uuid5(uuid.uuid5(uuid.NAMESPACE_URL, "https://ctxledger.dev/"), "session:" + name))
        if d["type"] == "SessionStarted":
            d["event"]["name"] = name

    return edit


HOSTILE = {
    "empty file": lambda L: [],
    "not json": lambda L: ["this is not json"],
    "json array": lambda L: ["[1, 2, 3]"],
    "json scalar": lambda L: ["42"],
    "deeply nested": lambda L: ["[" * 100_000 + "]" * 100_000],
    "missing fields": lambda L: ['{"session": "x"}'],
    "unknown field": lambda L: [L[0][:-1] + ', "evil": 1}'] + L[1:],
    "unknown event type": lambda L: [L[0].replace('"type":"SessionStarted"', '"type":"Exec"')] + L[1:],
    "a line removed": lambda L: L[:3] + L[4:],
    "a line duplicated": lambda L: L[:3] + [L[2]] + L[3:],
    "two lines swapped": lambda L: L[:2] + [L[3], L[2]] + L[4:],
    "text edited, hash kept": lambda L: L[:1] + [L[1].replace('"one"', '"ONE"')] + L[2:],
    "hash edited": lambda L: L[:1] + [json.dumps({**json.loads(L[1]), "hash": "00" * 16})] + L[2:],
    "position edited": lambda L: L[:1] + [json.dumps({**json.loads(L[1]), "position": 7})] + L[2:],
    "session id inside event": lambda L: L[:1] + [json.dumps({**json.loads(L[1]), "event": {**json.loads(L[1])["event"], "originator_id": str(uuid.uuid4())}})] + L[2:],
    "does not start with SessionStarted": lambda L: L[1:],
    "lone surrogate escape": lambda L: L[:1] + [L[1].replace('"one"', '"\\ud800"')] + L[2:],
    "binary garbage": lambda L: [os.urandom(200).decode("latin-1")],
    # internally consistent (hashes and chain recomputed) but not something the API can produce
    "forged: role robot": lambda L: rechain(L, _set(1, role="robot")),
    "forged: kind bogus": lambda L: rechain(L, _set(1, kind="bogus")),
    "forged: negative tokens": lambda L: rechain(L, _set(1, tokens=-5)),
    "forged: 9 MB text": lambda L: rechain(L, _set(1, text="x" * (9 * MB))),
    "forged: empty text": lambda L: rechain(L, _set(1, text="")),
    "forged: wrong span id": lambda L: rechain(L, _set(1, span_id="o7")),
    "forged: injected span id": lambda L: rechain(L, _set(1, span_id="o1'; DROP TABLE stored_events;--")),
    "forged: prune of an unknown span": lambda L: rechain(L, _set(3, span_id="o9")),
    "forged: prune pointing at another event": lambda L: rechain(L, _set(3, content_position=1)),
    "forged: rewrite of generation 2 in a strict session": lambda L: rechain(L, _set(6, generation=2)),
    "forged: rewrite with a wrong derived id": lambda L: rechain(L, _set(6, span_id="d5")),
    "forged: session name with a newline": lambda L: rechain(L, _rename("a\nb")),
    "forged: session name of 500 chars": lambda L: rechain(L, _rename("n" * 500)),
    "forged: mark with control characters": lambda L: rechain(L, _set(9, label="\x1b[2J")),
    "forged: tool result without call id": lambda L: rechain(L, _set(8, meta={})),
    "forged: meta of 300 kB": lambda L: rechain(L, _set(1, meta={"a": "x" * 300_000})),
    # nesting past what every reader decodes (issue 24)
    "an event nested 5000 deep": lambda L: L[:1] + [L[1].replace('"event":{', '"event":{"x":' + "[" * 5000 + "]" * 5000 + ",", 1)] + L[2:],
    "forged: meta nested 80 deep": lambda L: rechain(L, _set(1, meta=_nested(79))),
    "forged: prune meta nested 100 deep": lambda L: rechain(L, _set(3, meta=_nested(99))),
}


def test_hostile_import_files_are_refused_and_write_nothing(ledger, good_export, tmp_path):
    other = ledger.create_session("bystander")
    other.observe("x")
    before = fingerprint(ledger, "bystander")

    def run(name, make, expected):
        lines = make(list(good_export))
        path = tmp_path / "hostile.jsonl"
        path.write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8", errors="surrogatepass")
        with pytest.raises(expected) as err:
            ledger.import_(path)
        assert "\n" not in err.value.message
        assert [i.name for i in ledger.sessions()] == ["bystander"]
        assert fingerprint(ledger, "bystander") == before

    check_cases({name: (make, ImportFormatError) for name, make in HOSTILE.items()}, run)


@pytest.mark.parametrize("case", ["not json", "forged: 9 MB text", "forged: session name with a newline", "forged: injected span id"])
def test_hostile_import_files_through_the_cli(good_export, tmp_path, case):
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(HOSTILE[case](list(good_export))) + "\n", encoding="utf-8")
    url = f"sqlite:///{tmp_path / 'x.db'}"
    res = CliRunner().invoke(main, ["--db", url, "import", str(path)])
    assert res.exit_code == 2 and res.output.startswith("ctxledger: error:") and res.output.count("\n") == 1, res.output
    assert Ledger.open(url).sessions() == []


def test_import_of_an_existing_session_is_refused(ledger, good_export):
    ledger.import_(good_export)
    before = fingerprint(ledger, "cat")
    with pytest.raises(DuplicateSessionError):
        ledger.import_(good_export)
    assert fingerprint(ledger, "cat") == before


@pytest.mark.parametrize("source", ["missing", "directory", "not utf-8", "bytes not utf-8", "too long a line"])
def test_unreadable_import_sources(tmp_path, monkeypatch, source):
    led = Ledger.open("memory://")
    if source == "missing":
        arg = tmp_path / "nope.jsonl"
    elif source == "directory":
        arg = tmp_path
    elif source == "not utf-8":
        arg = tmp_path / "latin1.jsonl"
        arg.write_bytes(b"\xe9t\xe9\n")
    elif source == "bytes not utf-8":
        arg = b"\xff\xfe\x00"
    else:
        import engine._store.transfer

        monkeypatch.setattr(engine._store.transfer, "MAX_LINE_BYTES", 1000)
        arg = ["x" * 2000]
    with pytest.raises(ImportFormatError):
        led.import_(arg)
    assert led.sessions() == []


# -- broken and foreign databases ------------------------------------------------------------------


def file_state(path: Path) -> tuple[bytes, bytes]:
    """The database file and its write-ahead log (SQLite may create an empty -wal and a -shm
    index just by opening a file; neither holds data)."""
    wal = Path(str(path) + "-wal")
    return path.read_bytes(), wal.read_bytes() if wal.exists() else b""


def _random_bytes(path):
    path.write_bytes(os.urandom(8192))


def _text_file(path):
    path.write_text("hello, I am a text file\n" * 100)


def _truncated_ledger(path):
    with Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter()) as led:
        s = led.create_session("x")
        for i in range(200):
            s.observe(f"event {i} " * 20)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def _zeroed_header(path):
    with Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter()) as led:
        led.create_session("x").observe("y")
    data = bytearray(path.read_bytes())
    data[:100] = b"\x00" * 100
    path.write_bytes(bytes(data))


def _other_app(path):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users (name) VALUES ('alice')")
    con.commit()
    con.close()


def _other_eventsourcing_app(path):
    from eventsourcing.application import Application
    from eventsourcing.domain import Aggregate

    class Dog(Aggregate):
        pass

    app = Application(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)})
    app.save(Dog())
    app.close()


def _other_stored_events_table(path):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE stored_events (id INTEGER, payload TEXT)")
    con.commit()
    con.close()


FOREIGN = {
    "random bytes": (_random_bytes, NotALedgerError),
    "a text file": (_text_file, NotALedgerError),
    "a truncated ledger": (_truncated_ledger, StorageError),
    "a zeroed header": (_zeroed_header, NotALedgerError),
    "another application's SQLite database": (_other_app, NotALedgerError),
    "another eventsourcing application": (_other_eventsourcing_app, NotALedgerError),
    "a different stored_events table": (_other_stored_events_table, NotALedgerError),
}


@pytest.mark.parametrize("case", list(FOREIGN), ids=list(FOREIGN))
def test_corrupt_and_foreign_databases_are_refused_untouched(tmp_path, case):
    make, expected = FOREIGN[case]
    path = tmp_path / "db.sqlite"
    make(path)
    before = file_state(path)
    with pytest.raises(expected) as err:
        led = Ledger.open(f"sqlite:///{path}")
        try:  # a truncated file may open; then reading it must fail cleanly
            s = led.session("x")
            s.verify()
            s.export()
        finally:
            led.close()
    assert "\n" not in err.value.message
    assert file_state(path) == before
    res = CliRunner().invoke(main, ["--db", f"sqlite:///{path}", "sessions"])
    assert res.exit_code in (2, 3) and res.output.startswith("ctxledger: error:")
    assert file_state(path) == before


def test_a_database_of_another_application_on_postgres_is_refused():
    url = postgres_url()
    try:
        import psycopg

        schema = url.rsplit("schema=", 1)[1]
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as con:
            con.execute(f'CREATE TABLE "{schema}".ctxledger_events (originator_id uuid, originator_version bigint, '
                        "topic text, state bytea, notification_id bigserial, PRIMARY KEY (originator_id, originator_version))")
            con.execute(f'INSERT INTO "{schema}".ctxledger_events (originator_id, originator_version, topic, state) '
                        "VALUES (gen_random_uuid(), 1, 'myapp:Thing', 'x')")
        with pytest.raises(NotALedgerError):
            Ledger.open(url)
        with psycopg.connect(POSTGRES_DSN) as con:
            assert con.execute(f'SELECT count(*) FROM "{schema}".ctxledger_events').fetchone()[0] == 1
    finally:
        drop_schema(url)


# -- PostgreSQL that cannot be reached ---------------------------------------------------------------


class FakePostgres:
    """A server that speaks just enough of the PostgreSQL protocol to ask for a password and turn
    it down, as a real server with password authentication does (the test server trusts everyone)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        try:
            while True:
                (length,) = struct.unpack("!I", self._read(conn, 4))
                body = self._read(conn, length - 4)
                code = struct.unpack("!I", body[:4])[0]
                if code in (80877103, 80877104):  # SSL / GSS encryption request: not here
                    conn.sendall(b"N")
                    continue
                conn.sendall(b"R" + struct.pack("!II", 8, 3))  # AuthenticationCleartextPassword
                self._read(conn, 1)
                (plen,) = struct.unpack("!I", self._read(conn, 4))
                self._read(conn, plen - 4)
                fields = b"SFATAL\x00VFATAL\x00C28P01\x00Mpassword authentication failed for user \"agent\"\x00\x00"
                conn.sendall(b"E" + struct.pack("!I", len(fields) + 4) + fields)
                return
        except (OSError, struct.error):
            pass
        finally:
            conn.close()

    @staticmethod
    def _read(conn, n):
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise OSError("closed")
            data += chunk
        return data

    def close(self):
        self.sock.close()


def test_a_wrong_postgres_password_is_a_clear_error():
    server = FakePostgres()
    try:
        secret = "hunter2-wrong"
        with pytest.raises(StoreUnavailableError) as err:
            Ledger.open(f"postgresql://agent:{secret}@127.0.0.1:{server.port}/ledger")
        assert "password authentication failed" in err.value.message
        assert secret not in str(err.value) and "\n" not in err.value.message
        res = CliRunner().invoke(main, ["--db", f"postgresql://agent:{secret}@127.0.0.1:{server.port}/ledger", "sessions"])
        assert res.exit_code == 3 and "password authentication failed" in res.output and secret not in res.output
    finally:
        server.close()


@pytest.mark.skipif(not POSTGRES_DSN, reason="CTXLEDGER_TEST_POSTGRES is not set")
@pytest.mark.parametrize(
    "tweak, words",
    [
        (lambda u: u.replace("/test", "/no_such_database_xyz"), "does not exist"),
        (lambda u: u.replace("postgres@", "no_such_role_xyz@"), "does not exist"),
        (lambda u: u.replace(":5432", ":1"), "unavailable"),
    ],
    ids=["unknown database", "unknown role", "nothing listening"],
)
def test_unreachable_postgres_is_a_clear_error(tweak, words):
    url = tweak(POSTGRES_DSN)
    with pytest.raises(StoreUnavailableError) as err:
        Ledger.open(url)
    assert words in err.value.message and "\n" not in err.value.message


@pytest.mark.skipif(not POSTGRES_DSN, reason="CTXLEDGER_TEST_POSTGRES is not set")
def test_a_missing_postgres_schema_is_a_clear_error():
    with pytest.raises(StorageError) as err:
        Ledger.open(POSTGRES_DSN + "?schema=no_such_schema_xyz")
    assert "no_such_schema_xyz" in err.value.message and "\n" not in err.value.message


class Proxy:
    """A TCP proxy in front of the test server, so the 'server' can vanish and come back."""

    def __init__(self, port: int = 0):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(32)
        self.port = self.sock.getsockname()[1]
        self.open: list[socket.socket] = []
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", 5432))
            self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in the other thread
        except OSError:
            pass
        self.sock.close()
        for s in self.open:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass


@pytest.mark.skipif(not POSTGRES_DSN, reason="CTXLEDGER_TEST_POSTGRES is not set")
def test_a_server_that_goes_away_mid_session():
    """The connection dies under a live session: the next command fails with a clean
    StoreUnavailableError and writes nothing; when the server is back the same Session object
    carries on with no gap in its log."""
    url = postgres_url()
    proxy = Proxy()
    try:
        schema = url.rsplit("schema=", 1)[1]
        via = f"postgresql://postgres@127.0.0.1:{proxy.port}/test?schema={schema}&connect_timeout=1"
        led = Ledger.open(via, token_counter=EstimateCounter())
        s = led.create_session("agent")
        s.observe("before the outage")
        proxy.stop()
        with pytest.raises(StoreUnavailableError) as err:
            s.observe("during the outage")
        assert "\n" not in err.value.message
        proxy = Proxy(port=proxy.port)  # the server is back
        s.observe("after the outage")
        assert s.position == 3
        direct = Ledger.open(url, token_counter=EstimateCounter())
        texts = [e.text for e in direct.session("agent").events() if hasattr(e, "text")]
        assert texts == ["before the outage", "after the outage"]
        assert direct.session("agent").verify().ok
        direct.close()
        led.close()
    finally:
        proxy.stop()
        drop_schema(url)


@pytest.mark.skipif(not POSTGRES_DSN, reason="CTXLEDGER_TEST_POSTGRES is not set")
def test_connections_killed_by_the_server_are_survived():
    """pg_terminate_backend on every connection of the ledger (a failover, an idle timeout): the
    next commands reconnect; nothing is lost or doubled."""
    url = postgres_url()
    try:
        import psycopg

        led = Ledger.open(url, token_counter=EstimateCounter())
        s = led.create_session("agent")
        s.observe("one")
        # exactly this ledger's pooled connections (other people's tests may share the server)
        pids = [conn.info.backend_pid for conn in list(led.store.app.recorder.datastore.pool._pool)]
        assert pids
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as con:
            killed = con.execute(
                "SELECT count(*) FROM unnest(%s::int[]) AS pid WHERE pg_terminate_backend(pid)", (pids,)
            ).fetchone()[0]
        assert killed == len(pids)
        for text in ("two", "three"):
            try:
                s.observe(text)
            except StoreUnavailableError:
                s.observe(text)
        again = Ledger.open(url, token_counter=EstimateCounter()).session("agent")
        assert [e.text for e in again.events() if hasattr(e, "text")] == ["one", "two", "three"]
        assert again.verify().ok
        led.close()
    finally:
        drop_schema(url)


def test_two_writers_refusal_is_a_concurrency_error_and_leaves_one_event(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    a = Ledger.open(url, token_counter=EstimateCounter())
    b = Ledger.open(url, token_counter=EstimateCounter())
    sa = a.create_session("s")
    sb = b.session("s")
    sa.observe("from a")
    with pytest.raises(ConcurrencyError):
        sb.observe("from b")
    assert sb.position == 2 and sb.spans()[0].text == "from a"  # reloaded
    sb.observe("from b, retried")
    assert [e.text for e in a.session("s").events() if hasattr(e, "text")] == ["from a", "from b, retried"]
    a.close()
    b.close()
