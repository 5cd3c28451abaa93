"""Fuzzing the decoders and the import path with hypothesis: whatever bytes or lines come in, the
answer is a decoded event, a typed ctxledger error, or a clean import — never a dependency's
exception, and never a partial write."""

from __future__ import annotations

import base64
import json
import sqlite3

import msgspec
import pytest
from eventsourcing.cryptography import AESCipher
from eventsourcing.persistence import StoredEvent
from eventsourcing.utils import Environment
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine import CorruptLogError, DuplicateSessionError, EstimateCounter, ImportFormatError, InvalidInputError, Ledger
from engine.checkpoint import read_checkpoints
from engine._store.codec import TOPICS, EventMapper, decode_payload, encode_payload
from engine.events import Event, Observed, now

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
TOPIC_LIST = sorted(TOPICS.values())

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def export_lines():
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    s = led.create_session("fuzz")
    a = s.observe("GET /health -> 503", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
    b = s.observe("payments-api 502 at 09:40")
    d = s.rewrite([a.id, b.id], "two failures")
    s.prune(s.observe("noise").id)
    s.rederive(d.id, text="503 from billing, 502 from payments")
    s.mark("end")
    lines = s.export()
    led.close()
    return lines


@FAST
@given(topic=st.sampled_from(TOPIC_LIST) | st.text(max_size=30), data=st.binary(max_size=300))
def test_payload_decoder_on_arbitrary_bytes(topic, data):
    try:
        decode_payload(topic, data, None, 1)
    except CorruptLogError as e:
        assert e.message and "\n" not in e.message


@FAST
@given(topic=st.sampled_from(TOPIC_LIST), body=st.dictionaries(st.sampled_from(
    ["at", "prev", "text", "span_id", "name", "inputs", "meta", "tokens", "originator_version", "label", "generation",
     "content_position", "sources", "source_positions", "by", "reason", "strict", "role", "kind", "junk"]), json_values, max_size=8))
def test_payload_decoder_on_structured_garbage(topic, body):
    """Well-formed msgpack maps with the right field names and the wrong values."""
    try:
        data = msgspec.msgpack.encode(body)
    except (OverflowError, msgspec.EncodeError):
        assume(False)
    try:
        ev = decode_payload(topic, data, None, 1)
    except CorruptLogError:
        return
    assert encode_payload(ev)  # whatever decoded re-encodes


@FAST
@given(state=st.binary(max_size=200), topic=st.sampled_from(TOPIC_LIST), version=st.integers(1, 2**31))
def test_mapper_with_and_without_a_cipher_on_arbitrary_rows(state, topic, version):
    key = base64.b64encode(b"0" * 32).decode()
    for cipher in (None, AESCipher(Environment(env={"CIPHER_KEY": key}))):
        mapper = EventMapper(transcoder=None, cipher=cipher)
        row = StoredEvent(originator_id="6f9619ff-8b86-d011-b42d-00cf4fc964ff", originator_version=version, topic=topic, state=state)
        try:
            mapper.to_domain_event(row)
        except CorruptLogError as e:
            assert "\n" not in e.message


@FAST
@given(topic=st.sampled_from(TOPIC_LIST), depth=st.integers(1, 3000), field=st.sampled_from(["meta", "junk", "text"]),
       opener=st.sampled_from([b"\x91", b"\x81\xa1k", b"\xdc\x00\x01"]))
def test_payload_decoder_on_nesting_of_any_depth(topic, depth, field, opener):
    """msgpack nested up to 3,000 deep inside an event, built as bytes (no encoder would): the
    decoder answers with an event that readers can decode, or a CorruptLogError; never a
    RecursionError, whatever the stack it runs on."""
    from engine._store.codec import READABLE_DEPTH, readable

    good = encode_payload(Observed(originator_version=1, at=now(), span_id="o1", text="x"))
    key = msgspec.msgpack.encode(field)
    body = opener * depth + b"\x01"
    data = bytes([good[0] + 1]) + good[1:] + key + body  # one more field in the event's fixmap
    try:
        ev = decode_payload(topic, data, None, 1)
    except CorruptLogError as e:
        assert "\n" not in e.message
        return
    assert isinstance(readable(data, ev), bool)
    if field == "meta" and topic.endswith("Observed") and readable(data, ev):
        assert depth + 1 <= READABLE_DEPTH


@FAST
@given(lines=st.lists(st.text(max_size=200) | json_values.map(json.dumps), max_size=6))
def test_import_of_arbitrary_lines(lines):
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    try:
        led.import_([line.replace("\n", " ") + "\n" for line in lines])
    except ImportFormatError as e:
        assert "\n" not in e.message
    assert led.sessions() == []
    led.close()


MUTATIONS = ["delete-char", "insert-char", "replace-value", "drop-line", "dup-line", "swap-lines", "truncate", "add-key"]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_import_of_mutated_exports(export_lines, data):
    """Small edits to a valid export: either the file still means exactly the same history, or
    it is refused with ImportFormatError and nothing is written."""
    lines = list(export_lines)
    mutation = data.draw(st.sampled_from(MUTATIONS))
    i = data.draw(st.integers(0, len(lines) - 1))
    if mutation in ("delete-char", "insert-char", "truncate"):
        line = lines[i]
        k = data.draw(st.integers(0, len(line) - 1))
        if mutation == "delete-char":
            lines[i] = line[:k] + line[k + 1 :]
        elif mutation == "insert-char":
            lines[i] = line[:k] + data.draw(st.characters(exclude_categories=["Cs"])) + line[k:]
        else:
            lines[i] = line[:k]
    elif mutation == "replace-value":
        obj = json.loads(lines[i])
        path = data.draw(st.sampled_from(["position", "type", "hash", "session", "session_id"] + [f"event.{k}" for k in obj["event"]]))
        value = data.draw(json_values)
        if path.startswith("event."):
            obj["event"][path[6:]] = value
        else:
            obj[path] = value
        lines[i] = json.dumps(obj)
    elif mutation == "add-key":
        obj = json.loads(lines[i])
        obj["event"][data.draw(st.text(min_size=1, max_size=8))] = data.draw(json_values)
        lines[i] = json.dumps(obj)
    elif mutation == "drop-line":
        del lines[i]
    elif mutation == "dup-line":
        lines.insert(i, lines[i])
    else:
        j = data.draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    try:
        s = led.import_([line.replace("\n", " ") + "\n" for line in lines])
    except ImportFormatError as e:
        assert "\n" not in e.message
        assert led.sessions() == []
    else:
        # accepted: then it is the very same history (whitespace or key order changed), or a prefix
        # of it (lines cut off the end: only a signed checkpoint can tell, see test_checkpoint)
        got = s.export()
        assert got == list(export_lines)[: len(got)]
        if len(got) < len(export_lines):  # only when lines really went missing (dropped, emptied)
            assert sum(1 for line in lines if line.strip()) < len(export_lines)
        assert s.verify().ok
    led.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=st.integers(2, 7), state=st.binary(max_size=120), topic=st.sampled_from(TOPIC_LIST))
def test_verify_on_arbitrary_stored_bytes(tmp_path_factory, position, state, topic):
    """Whatever an attacker writes into a row, verify answers with a result naming a position
    at or before the row (it may name the one before: its successor no longer vouches for it)."""
    path = tmp_path_factory.mktemp("v") / "l.db"
    url = f"sqlite:///{path}"
    led = Ledger.open(url, token_counter=EstimateCounter())
    s = led.create_session("v")
    for i in range(6):
        s.observe(f"event {i}")
    original = sqlite3.connect(path).execute(
        "SELECT topic, state FROM stored_events WHERE originator_id=? AND originator_version=?", (s.id.hex, position)).fetchone()
    assume((topic, state) != tuple(original))
    con = sqlite3.connect(path)
    con.execute("UPDATE stored_events SET topic=?, state=? WHERE originator_id=? AND originator_version=?", (topic, state, s.id.hex, position))
    con.commit()
    con.close()
    r = led.verify("v")
    if r.ok:  # only possible if the bytes decode to exactly the same event
        assert decode_payload(topic, state, None, position) == decode_payload(*original, None, position)
    else:
        assert r.first_bad_position in (position - 1, position)
    led.close()


@FAST
@given(data=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_checkpoint_reader_on_arbitrary_bytes(data):
    try:
        read_checkpoints(data)
    except InvalidInputError as e:
        assert "\n" not in e.message


def test_a_fuzzed_duplicate_import_is_refused_as_such(export_lines):
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    led.import_(export_lines)
    with pytest.raises(DuplicateSessionError):
        led.import_(export_lines)
    assert isinstance(led.session("fuzz").event(1), Event)
    led.close()
