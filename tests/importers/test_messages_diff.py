"""The ``messages`` diff: successive full message lists -> observations, client prunes, client summaries."""

from __future__ import annotations

import copy
import json

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import ImportFormatError, Ledger
from engine.importers import messages as messages_mod
from engine.importers.messages import MessageRecorder, canonical_message, system_message


def _session(strict: bool = True, name: str = "s"):
    ledger = Ledger.open("memory://")
    return ledger, ledger.create_session(name, strict=strict)


def _canonical_hashes(msgs, api, system=None):
    out = []
    if system is not None:
        out.append(system_message(system).hash)
    for m in msgs:
        c = canonical_message(m, api)
        if c is not None:
            out.append(c.hash)
    return out


def _buffer_messages(session):
    """The live buffer grouped back into messages: [(msg hash, [texts])]; a changed system prompt
    (observed late, marked ``leading_system``) stands first, where the client has it."""
    groups: list[tuple[str, list[str]]] = []
    spans = session.spans()
    spans = [x for x in spans if x.meta.get("leading_system")] + [x for x in spans if not x.meta.get("leading_system")]
    for span in spans:
        msg = span.meta.get("msg")
        assert isinstance(msg, str), f"{span.id} has no message hash"
        if span.meta.get("part", 0) == 0:
            groups.append((msg, [span.text]))
        else:
            assert groups and groups[-1][0] == msg
            groups[-1][1].append(span.text)
    return groups


def _check(session, recorder, msgs, api, system=None):
    want = _canonical_hashes(msgs, api, system)
    assert recorder.hashes == want
    assert MessageRecorder(session).hashes == want  # rebuilt from the log alone
    parts = [canonical_message(m, api) for m in msgs]
    expected = ([system_message(system)] if system is not None else []) + [p for p in parts if p is not None]
    got = _buffer_messages(session)
    assert [g[0] for g in got] == want
    for (h, texts), m in zip(got, expected):
        assert texts == [p.text for p in m.parts]


# -- the narrative: a client that compacts its own history --------------------------------------


def test_client_summary_becomes_a_derived_span_and_the_audit_judges_it():
    ledger, s = _session()
    rec = MessageRecorder(s)
    msgs = [
        {"role": "system", "content": "You are a deploy assistant."},
        {"role": "user", "content": "Run the billing-api migration."},
    ]
    r = rec.record_request(msgs, api="openai", meta={"model": "m1"})
    assert r.observed == ["o1", "o2"] and s.span("o2").meta["request"] == {"model": "m1"}
    reply = {
        "model": "m1",
        "usage": {"prompt_tokens": 12, "completion_tokens": 3},
        "choices": [{"finish_reason": "tool_calls", "message": {"role": "assistant", "content": None,
                     "tool_calls": [{"id": "call_1", "type": "function",
                                     "function": {"name": "migrate", "arguments": '{"db": "billing"}'}}]}}],
    }
    r = rec.record_reply(reply, api="openai")
    call = s.span(r.observed[0])
    assert (call.kind, call.meta["tool_call_id"], call.meta["name"], call.meta["arguments"]) == (
        "tool_call", "call_1", "migrate", {"db": "billing"})
    assert call.meta["reply"]["usage"]["completion_tokens"] == 3
    # The SDK echoes the call back with other whitespace in the arguments: still the same message.
    msgs += [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "migrate", "arguments": '{"db":"billing"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "migration 0042 applied to billing"},
        {"role": "user", "content": "Good. Now restart the workers."},
    ]
    r = rec.record_request(msgs, api="openai")
    assert len(r.observed) == 2 and not r.pruned
    assert s.span(r.observed[0]).kind == "tool_result"
    # The client compacts: the three middle messages become one summary that invents a time.
    msgs = [msgs[0], {"role": "user", "content": "Summary: the migration 0042 completed at 14:02."}, msgs[-1]]
    r = rec.record_request(msgs, api="openai")
    assert len(r.derived) == 1 and not r.observed
    d = s.span(r.derived[0])
    assert d.derived and set(d.sources) == {"o2", "o3", "o4"}
    report = s.audit()
    assert not report.ok
    assert any("14:02" in f.message for f in report.findings)
    _check(s, rec, msgs, "openai")


def test_summary_of_a_summary_is_a_violation_in_a_permissive_session():
    _, s = _session(strict=False)
    rec = MessageRecorder(s)
    msgs = [{"role": "user", "content": f"step {i}"} for i in range(5)]
    rec.record_request(msgs, api="openai")
    msgs = [{"role": "user", "content": "summary one"}, *msgs[3:]]
    first = rec.record_request(msgs, api="openai").derived[0]
    msgs = [{"role": "user", "content": "summary two"}, msgs[-1]]
    r = rec.record_request(msgs, api="openai")
    assert r.violations == r.derived and s.span(r.derived[0]).generation == 2
    assert first in [i for e in s.events() if type(e).__name__ == "Rewritten" for i in e.inputs]
    assert any(f.kind == "generation-exceeded" for f in s.audit().findings)
    _check(s, rec, msgs, "openai")


def test_summary_of_a_summary_in_a_strict_session_is_refused_recorded_and_observed():
    _, s = _session(strict=True)
    rec = MessageRecorder(s)
    msgs = [{"role": "user", "content": f"step {i}"} for i in range(5)]
    rec.record_request(msgs, api="openai")
    msgs = [{"role": "user", "content": "summary one"}, *msgs[3:]]
    rec.record_request(msgs, api="openai")
    msgs = [{"role": "user", "content": "summary two"}, msgs[-1]]
    r = rec.record_request(msgs, api="openai")
    assert r.refused and not r.derived
    assert any(type(e).__name__ == "RewriteRefused" for e in s.events())
    assert s.span(r.observed[0]).meta["summary_refused"] is True
    _check(s, rec, msgs, "openai")
    assert all(sp.generation <= 1 for sp in s.spans())


def test_single_replaced_message_is_a_prune_and_an_observation_and_later_ones_are_resent():
    _, s = _session()
    rec = MessageRecorder(s)
    msgs = [{"role": "user", "content": f"m{i}"} for i in range(4)]
    rec.record_request(msgs, api="openai")
    msgs[1] = {"role": "user", "content": "m1 (edited)"}
    r = rec.record_request(msgs, api="openai")
    assert not r.derived and len(r.pruned) == 3 and r.reobserved == 2
    _check(s, rec, msgs, "openai")


def test_a_changed_system_prompt_is_observed_without_resending_the_conversation():
    _, s = _session()
    rec = MessageRecorder(s)
    msgs = [{"role": "system", "content": "Today is Monday."}, *({"role": "user", "content": f"m{i}"} for i in range(30))]
    rec.record_request(msgs, api="openai")
    msgs[0] = {"role": "system", "content": "Today is Tuesday."}
    msgs.append({"role": "user", "content": "next"})
    r = rec.record_request(msgs, api="openai")
    assert r.pruned == ["o1"] and len(r.observed) == 2 and r.reobserved == 0
    assert s.span(r.observed[0]).meta["leading_system"] is True
    _check(s, rec, msgs, "openai")


def test_anthropic_blocks_system_tool_pairs_and_cache_control_noise():
    _, s = _session()
    rec = MessageRecorder(s)
    system = [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    msgs = [{"role": "user", "content": [{"type": "text", "text": "list files"}]}]
    rec.record_request(msgs, api="anthropic", system=system)
    reply = {"type": "message", "role": "assistant", "model": "claude-x", "stop_reason": "tool_use",
             "usage": {"input_tokens": 9, "output_tokens": 4},
             "content": [{"type": "thinking", "thinking": "hmm", "signature": "sig"},
                         {"type": "text", "text": "Listing."},
                         {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "."}}]}
    r = rec.record_reply(reply, api="anthropic")
    assert [s.span(i).kind for i in r.observed] == ["thinking", "message", "tool_call"]  # thinking recorded, not in the hash
    echoed = {"role": "assistant", "content": copy.deepcopy(reply["content"])}
    echoed["content"][-1]["cache_control"] = {"type": "ephemeral"}
    msgs += [echoed, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "a.py b.py"}]},
        {"type": "text", "text": "which is bigger?"}]}]
    r = rec.record_request(msgs, api="anthropic", system=system)
    assert [(s.span(i).role, s.span(i).kind) for i in r.observed] == [("tool", "tool_result"), ("user", "message")]
    assert s.span(r.observed[0]).meta["tool_call_id"] == "toolu_1"
    _check(s, rec, msgs, "anthropic", system)
    rendered = s.render("anthropic")
    assert rendered["system"] == "You are terse."


def test_raw_messages_are_parsed_once_and_appends_cost_only_the_new_messages(monkeypatch):
    _, s = _session()
    rec = MessageRecorder(s)
    msgs = [{"role": "user", "content": f"turn {i}"} for i in range(50)]
    raw = [msgspec.Raw(json.dumps(m).encode()) for m in msgs]
    rec.record_request(raw, api="openai")
    parsed = []
    real = messages_mod.canonical_message
    monkeypatch.setattr(messages_mod, "canonical_message", lambda m, api, i=None: parsed.append(i) or real(m, api, i))
    raw.append(msgspec.Raw(b'{"role": "user", "content": "turn 50"}'))
    r = rec.record_request(raw, api="openai")
    assert parsed == [50] and r.observed == ["o51"]


def test_recorder_continues_after_a_restart():
    ledger, s = _session()
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    MessageRecorder(s).record_request(msgs, api="openai")
    again = MessageRecorder(ledger.session("s"))
    r = again.record_request([*msgs, {"role": "assistant", "content": "d"}], api="openai")
    assert r.observed == ["o4"] and not r.pruned


@pytest.mark.parametrize(
    "bad",
    [
        [{"role": "wizard", "content": "x"}],
        [{"role": "user", "content": 5}],
        [{"role": "tool", "content": "orphan without id"}],
        [{"role": "assistant", "tool_calls": [{"id": "", "function": {"name": "f"}}]}],
        ["not an object"],
        {"role": "user", "content": "a dict, not a list"},
        [{"role": "user", "content": "ok"}, {"role": "user", "content": "\ud800"}],
    ],
)
def test_bad_messages_raise_a_typed_error_and_write_nothing(bad):
    _, s = _session()
    rec = MessageRecorder(s)
    rec.record_request([{"role": "user", "content": "before"}], api="openai")
    before = s.position
    with pytest.raises(ImportFormatError):
        rec.record_request(bad, api="openai")
    assert s.position == before and rec.hashes == MessageRecorder(s).hashes


def test_unknown_api_is_a_typed_error():
    _, s = _session()
    with pytest.raises(ImportFormatError):
        MessageRecorder(s).record_request([], api="gemini")
    assert s.position == 1


# -- the invariant, on random histories -----------------------------------------------------------

WORDS = st.sampled_from(["ok", "run tests", "deploy", "status?", "done", "retry", "logs"])
OPS = st.lists(
    st.tuples(
        st.sampled_from(["user", "reply_text", "reply_call", "result", "drop", "summarize", "edit", "insert",
                         "echo_noise", "system_change"]),
        st.integers(0, 1000),
        st.integers(0, 1000),
        WORDS,
    ),
    min_size=1,
    max_size=25,
)


def _openai_call(cid: str, word: str) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": cid, "type": "function", "function": {"name": "sh", "arguments": json.dumps({"cmd": word})}}]}


def _anthropic_call(cid: str, word: str) -> dict:
    return {"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": "sh", "input": {"cmd": word}}]}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, strict=st.booleans(), api=st.sampled_from(["openai", "anthropic"]), raw=st.booleans())
def test_random_histories_round_trip(ops, strict, api, raw):
    """After every request the live buffer (and a recorder rebuilt from the log) equals the request's
    messages, whatever the client appended, dropped, edited, inserted or summarized."""
    ledger, s = _session(strict=strict)
    rec = MessageRecorder(s)
    system = "You are an agent." if api == "anthropic" else None
    msgs: list[dict] = [{"role": "system", "content": "You are an agent."}] if api == "openai" else []
    calls = 0
    open_calls: list[str] = []
    for op, a, b, word in ops:
        if op == "user":
            msgs.append({"role": "user", "content": word})
        elif op in ("reply_text", "reply_call"):
            if op == "reply_call":
                calls += 1
                cid = f"call_{calls}"
                open_calls.append(cid)
                reply_msg = _openai_call(cid, word) if api == "openai" else _anthropic_call(cid, word)
            else:
                reply_msg = {"role": "assistant", "content": f"reply: {word}"}
            reply = ({"choices": [{"message": reply_msg}]} if api == "openai"
                     else {"type": "message", "role": "assistant", "content": reply_msg["content"]
                           if isinstance(reply_msg["content"], list) else [{"type": "text", "text": reply_msg["content"]}]})
            rec.record_reply(reply, api=api)
            msgs.append(reply_msg)
            continue  # the reply is recorded; the client sends it back with the next request
        elif op == "result" and open_calls:
            cid = open_calls.pop(0)
            msgs.append({"role": "tool", "tool_call_id": cid, "content": f"out {word}"} if api == "openai" else
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": f"out {word}"}]})
        elif op == "drop" and msgs:
            i = a % len(msgs)
            del msgs[i : i + 1 + b % 3]
        elif op == "summarize" and len(msgs) >= 2:
            i = a % (len(msgs) - 1)
            j = min(len(msgs), i + 2 + b % 4)
            msgs[i:j] = [{"role": "user", "content": f"Summary of {j - i} messages: {word}"}]
        elif op == "edit" and msgs:
            i = a % len(msgs)
            msgs[i] = {"role": "user", "content": f"edited {word} {b}"}
        elif op == "insert" and msgs:
            msgs.insert(a % len(msgs), {"role": "user", "content": f"inserted {word}"})
        elif op == "system_change":
            if api == "anthropic":
                system = f"You are an agent. Today is day {b}."
            elif msgs and msgs[0]["role"] == "system":
                msgs[0] = {"role": "system", "content": f"You are an agent. Today is day {b}."}
        elif op == "echo_noise" and msgs and api == "anthropic":
            last = copy.deepcopy(msgs[-1])
            if isinstance(last["content"], str):
                last["content"] = [{"type": "text", "text": last["content"]}]
            last["content"][-1]["cache_control"] = {"type": "ephemeral"}
            msgs[-1] = last
        sent = [msgspec.Raw(json.dumps(m).encode()) for m in msgs] if raw else copy.deepcopy(msgs)
        rec.record_request(sent, api=api, system=system)
        _check(s, rec, msgs, api, system)
    assert s.verify()
    if not strict:
        assert not any(type(e).__name__ == "RewriteRefused" for e in s.events())
