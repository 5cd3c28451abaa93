"""Rendering to the model: markers on derived spans, placeholders for pruned tool halves, and output
that is valid for the OpenAI and Anthropic APIs after any sequence of commands over tool traffic."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import EstimateCounter, InvalidInputError, Ledger
from engine.render import derived_marker, render, span_ranges
from provider_rules import check_anthropic, check_openai


def call(s, cid, name="get_logs", args=None, text=None):
    meta = {"tool_call_id": cid, "name": name}
    if args is not None:
        meta["arguments"] = args
    return s.observe(text or f"calling {name}", role="assistant", kind="tool_call", meta=meta)


def result(s, cid, text):
    return s.observe(text, role="tool", kind="tool_result", meta={"tool_call_id": cid})


@pytest.fixture
def s(mem_ledger):
    return mem_ledger.create_session("r-" + uuid.uuid4().hex[:8])


# -- plain rendering -----------------------------------------------------------------------------


def test_openai_shapes_messages_and_tool_calls(s):
    s.observe("You are an SRE agent.", role="system")
    s.observe("Why is billing down?", role="user")
    call(s, "c1", args={"service": "billing-api", "lines": 50})
    result(s, "c1", "GET /health -> 503 from billing-api")
    s.observe("billing-api returns 503.", role="assistant")
    msgs = s.render("openai")
    check_openai(msgs)
    assert msgs[0] == {"role": "system", "content": "You are an SRE agent."}
    assert msgs[2]["tool_calls"][0]["function"] == {
        "name": "get_logs",
        "arguments": json.dumps({"service": "billing-api", "lines": 50}, separators=(",", ":")),
    }
    assert msgs[3] == {"role": "tool", "tool_call_id": "c1", "content": "GET /health -> 503 from billing-api"}
    assert msgs[4] == {"role": "assistant", "content": "billing-api returns 503."}


def test_openai_arguments_given_as_json_string_are_kept(s):
    call(s, "c1", args='{"q": "x"}')
    result(s, "c1", "ok")
    assert s.render("openai")[0]["tool_calls"][0]["function"]["arguments"] == '{"q": "x"}'


def test_anthropic_system_is_top_level_and_tool_blocks_pair(s):
    s.observe("You are an SRE agent.", role="system")
    s.observe("Why is billing down?", role="user")
    call(s, "c1", args='{"service": "billing-api"}')
    call(s, "c2", name="get_metrics", args={"service": "billing-api"})
    result(s, "c2", "p99 4s")
    result(s, "c1", "503")
    s.observe("Also check auth.", role="user")
    out = s.render("anthropic")
    check_anthropic(out)
    assert out["system"] == "You are an SRE agent."
    assistant = out["messages"][1]
    assert [b["type"] for b in assistant["content"]] == ["text", "tool_use", "tool_use"]
    assert assistant["content"][1]["input"] == {"service": "billing-api"}
    user = out["messages"][2]["content"]
    assert [b["type"] for b in user] == ["tool_result", "tool_result", "text"]
    assert {b["tool_use_id"]: b["content"] for b in user[:2]} == {"c1": "503", "c2": "p99 4s"}
    assert user[2]["text"] == "Also check auth."


def test_consecutive_same_role_messages_merge_for_anthropic(s):
    s.observe("one", role="user")
    s.observe("two", role="user")
    s.observe("three", role="assistant")
    out = s.render("anthropic")
    assert [m["role"] for m in out["messages"]] == ["user", "assistant"]
    assert [b["text"] for b in out["messages"][0]["content"]] == ["one", "two"]


def test_anthropic_odd_tool_ids_are_mapped_consistently(s):
    call(s, "call.7:x")
    result(s, "call.7:x", "done")
    out = s.render("anthropic")
    check_anthropic(out)
    use_id = out["messages"][1]["content"][1]["id"]
    assert use_id != "call.7:x" and out["messages"][2]["content"][0]["tool_use_id"] == use_id


def test_text_format_names_roles_and_calls(s):
    s.observe("hello", role="user")
    call(s, "c1", args={"a": 1})
    result(s, "c1", "42")
    text = s.render("text")
    assert text == '[user]\nhello\n\n[assistant → tool call get_logs c1 {"a":1}]\ncalling get_logs\n\n[tool result c1]\n42'


def test_bad_format_is_a_typed_error_and_writes_nothing(s):
    s.observe("hello")
    before = s.position
    with pytest.raises(InvalidInputError):
        s.render("xml")
    with pytest.raises(InvalidInputError):
        render(s.spans(), format="text", mark_derived="yes")
    assert s.position == before


# -- derived spans are marked ------------------------------------------------------------------------


def test_derived_span_is_marked_with_its_sources(s):
    for i in range(1, 6):
        s.observe(f"event {i}", role="user")
    d = s.rewrite(["o2", "o3", "o4"], "events 2-4 happened")
    marker = derived_marker(d)
    assert marker == "[derived d1 · summary of o2–o4 · generation 1 — not an observation]"
    assert f"{marker}\nevents 2-4 happened" in s.render("text")
    openai = s.render("openai")
    assert openai[1]["content"] == f"{marker}\nevents 2-4 happened"
    anthropic = s.render("anthropic")
    assert anthropic["messages"][0]["content"][1]["text"].startswith("[derived d1 ")
    plain = s.render("openai", mark_derived=False)
    assert plain[1]["content"] == "events 2-4 happened"


def test_marker_of_scattered_sources_stays_short(s):
    for i in range(1, 21):
        s.observe(f"event {i}", role="user")
    d = s.rewrite([f"o{i}" for i in range(1, 21, 2)], "odd events")
    assert derived_marker(d) == "[derived d1 · summary of 10 spans within o1–o19 · generation 1 — not an observation]"


def test_span_ranges_compress():
    assert span_ranges(["o9", "o4", "o5", "o6", "o12"]) == "o4–o6, o9, o12"
    assert span_ranges(["o1"]) == "o1"


# -- tool pairing under pruning ----------------------------------------------------------------------


def test_pruned_result_becomes_a_placeholder_with_size_and_restore_hint(s):
    c = call(s, "c1")
    r = result(s, "c1", "x " * 400)
    s.prune(r.id)
    msgs = s.render("openai")
    check_openai(msgs)
    assert msgs[1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": f"[tool output pruned: {r.tokens:,} tokens; restore {r.id}]",
    }
    out = s.render("anthropic")
    check_anthropic(out)
    assert out["messages"][2]["content"][0]["content"] == f"[tool output pruned: {r.tokens:,} tokens; restore {r.id}]"
    s.restore(r.id)
    assert s.render("openai")[1]["content"] == r.text
    assert c.id == "o1"


def test_pruned_call_renders_result_as_plain_message(s):
    s.observe("start", role="user")
    c = call(s, "c1", name="get_logs")
    result(s, "c1", "503 at 14:02")
    s.prune(c.id)
    msgs = s.render("openai")
    check_openai(msgs)
    assert msgs[1]["role"] == "user"
    assert msgs[1]["content"] == f"[output of tool call c1 (get_logs); the call was pruned; restore {c.id}]\n503 at 14:02"
    check_anthropic(s.render("anthropic"))


def test_result_rewritten_into_summary_is_named(s):
    call(s, "c1")
    r = result(s, "c1", "503 at 14:02")
    s.observe("note", role="user")
    d = s.rewrite([r.id, "o3"], "503 at 14:02; note")
    msgs = s.render("openai")
    check_openai(msgs)
    assert msgs[1]["content"] == f"[tool output {r.id} is summarized in {d.id}]"


def test_pending_call_gets_an_answer_so_the_render_stays_valid(s):
    s.observe("go", role="user")
    call(s, "c1")
    msgs = s.render("openai")
    check_openai(msgs)
    assert msgs[-1] == {"role": "tool", "tool_call_id": "c1", "content": "[no tool output recorded]"}


def test_result_separated_from_its_call_is_moved_next_to_it(s):
    call(s, "c1")
    s.observe("meanwhile", role="user")
    result(s, "c1", "late result")
    msgs = s.render("openai")
    check_openai(msgs)
    assert [m["role"] for m in msgs] == ["assistant", "tool", "user"]
    check_anthropic(s.render("anthropic"))


def test_time_travel_render_uses_the_buffer_then(s):
    call(s, "c1")
    r = result(s, "c1", "the output")
    s.prune(r.id)
    at = s.position - 1
    assert s.render("openai", at=at)[1]["content"] == "the output"
    assert "pruned" in s.render("openai")[1]["content"]


def test_render_without_reader_still_valid(s):
    call(s, "c1")
    r = result(s, "c1", "out")
    s.prune(r.id)
    msgs = render(s.spans(), format="openai")
    check_openai(msgs)
    assert msgs[1]["content"] == "[tool output not in the buffer]"


def test_leading_assistant_gets_a_user_opening_for_anthropic(s):
    s.observe("first", role="user")
    s.observe("reply", role="assistant")
    s.prune("o1")
    out = s.render("anthropic")
    check_anthropic(out)
    assert out["messages"][0]["content"][0]["text"] == "[earlier turns were pruned]"


def test_mid_conversation_system_span_stays_in_place_for_anthropic(s):
    s.observe("sys", role="system")
    s.observe("hi", role="user")
    s.observe("budget warning", role="system")
    out = s.render("anthropic")
    assert out["system"] == "sys"
    assert out["messages"][0]["content"][1]["text"] == "[system]\nbudget warning"


def test_validators_catch_broken_outputs():
    with pytest.raises(AssertionError):
        check_openai([{"role": "tool", "tool_call_id": "c1", "content": "x"}])
    with pytest.raises(AssertionError):
        check_openai([
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "user", "content": "x"},
        ])
    with pytest.raises(AssertionError):
        check_anthropic({"system": "", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "text", "text": "x"},
                                         {"type": "tool_result", "tool_use_id": "c1", "content": "r"}]},
        ]})
    with pytest.raises(AssertionError):
        check_anthropic({"system": "", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}]},
            {"role": "user", "content": [{"type": "text", "text": "b"}]},
        ]})


# -- every sequence hypothesis can generate --------------------------------------------------------------

_LEDGER = Ledger.open("memory://", token_counter=EstimateCounter())

ops = st.lists(
    st.one_of(
        st.tuples(st.just("say"), st.sampled_from(["user", "assistant", "system"])),
        st.tuples(st.just("calls"), st.integers(1, 3), st.booleans(), st.integers(0, 3)),
        st.tuples(st.just("results"), st.integers(0, 3)),
        st.tuples(st.just("prune"), st.integers(0, 50)),
        st.tuples(st.just("rewrite"), st.integers(0, 50), st.integers(1, 4)),
        st.tuples(st.just("restore"), st.integers(0, 50)),
        st.tuples(st.just("expand"), st.integers(0, 50)),
    ),
    max_size=40,
)


def _run(s, program):
    pending: list[str] = []  # call ids without an observed result
    pruned: list[str] = []
    n_calls = 0
    for op in program:
        live = s.spans()
        if op[0] == "say":
            s.observe(f"a {op[1]} message", role=op[1])
        elif op[0] == "calls":
            _, k, odd_ids, style = op
            for _ in range(k):
                n_calls += 1
                cid = f"call.{n_calls}:x" if odd_ids else f"call_{n_calls}"
                args = [None, {"n": n_calls}, json.dumps({"n": n_calls}), "not json"][style]
                call(s, cid, args=args)
                pending.append(cid)
        elif op[0] == "results":
            for _ in range(min(op[1], len(pending))):
                cid = pending.pop(0 if op[1] % 2 else -1)  # in order or reversed (parallel calls)
                result(s, cid, f"output of {cid}")
        elif op[0] == "prune" and live:
            sp = live[op[1] % len(live)]
            s.prune(sp.id)
            pruned.append(sp.id)
        elif op[0] == "rewrite":
            observed = [sp for sp in live if sp.observed]
            if observed:
                start = op[1] % len(observed)
                chosen = observed[start : start + op[2]]
                s.rewrite([sp.id for sp in chosen], "summary of " + " ".join(sp.id for sp in chosen))
        elif op[0] == "restore" and pruned:
            sid = pruned.pop(op[1] % len(pruned))
            if sid not in s.state.live:
                s.restore(sid)
        elif op[0] == "expand":
            derived = [sp for sp in live if sp.derived and not any(x in s.state.live for x in sp.sources)]
            if derived:
                s.expand(derived[op[1] % len(derived)].id)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=ops, mark=st.booleans())
def test_every_render_is_valid_for_both_providers(program, mark):
    s = _LEDGER.create_session("h-" + uuid.uuid4().hex)
    _run(s, program)
    spans = s.spans()
    openai = s.render("openai", mark_derived=mark)
    check_openai(openai)
    anthropic = s.render("anthropic", mark_derived=mark)
    check_anthropic(anthropic)
    text = s.render("text", mark_derived=mark)
    # nothing live is lost, and every summary says what it is
    flat_openai = json.dumps(openai, ensure_ascii=False)
    flat_anthropic = json.dumps(anthropic, ensure_ascii=False)
    for sp in spans:
        for flat in (flat_openai, flat_anthropic, json.dumps(text, ensure_ascii=False)):
            assert json.dumps(sp.text, ensure_ascii=False)[1:-1] in flat
            if sp.derived:
                assert (derived_marker(sp) in flat) is mark
    # every live call whose result was pruned names the span to restore
    live_results = {sp.meta["tool_call_id"] for sp in spans if sp.kind == "tool_result"}
    for sp in spans:
        if sp.kind == "tool_call" and sp.meta["tool_call_id"] not in live_results:
            answer = next(m for m in openai if m.get("tool_call_id") == sp.meta["tool_call_id"])
            assert answer["content"].startswith(("[tool output pruned:", "[tool output o", "[no tool output recorded]"))
