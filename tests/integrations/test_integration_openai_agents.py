"""The OpenAI Agents SDK adapter, against the real SDK: ``Runner.run`` with the SDK's own
``ScriptedModel`` (no network), on memory, a reopened SQLite file and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

agents = pytest.importorskip("agents", reason="the openai-agents extra is not installed")

from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled  # noqa: E402
from agents.memory import Session as SDKSession  # noqa: E402
from agents.memory import is_openai_responses_compaction_aware_session  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402
from conftest import drop_schema, postgres_url  # noqa: E402

from engine import Compactor, EstimateCounter, InvalidInputError, Ledger, Observed, Pruned, RewriteOldest, Rewritten  # noqa: E402
from engine.integrations.openai_agents import LedgerSession  # noqa: E402

set_tracing_disabled(True)

LONG = "row " * 400  # a tool output of ~400 estimated tokens


@function_tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: shipped from Rotterdam on 2026-11-28, carrier DHL. " + LONG


@function_tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


def run(coro):
    return asyncio.run(coro)


def agent_with(model: ScriptedModel) -> Agent:
    return Agent(name="support", instructions="Answer briefly.", model=model, tools=[lookup_order, add])


def script() -> list:
    """Three turns: a tool call, an answer; two parallel tool calls, an answer; a plain answer."""
    return [
        [function_call("lookup_order", {"order_id": "A17"}, call_id="call_a")],
        [assistant_message("Order A17 shipped from Rotterdam.", item_id="msg_1")],
        [
            function_call("add", {"a": 2, "b": 3}, call_id="call_b"),
            function_call("lookup_order", {"order_id": "B9"}, call_id="call_c"),
        ],
        [assistant_message("2 + 3 = 5, and B9 shipped too.", item_id="msg_2")],
        [assistant_message("You're welcome.", item_id="msg_3")],
    ]


TURNS = ["Where is order A17?", "What is 2+3, and where is B9?", "Thanks!"]


def ledger() -> Ledger:
    return Ledger.open("memory://", token_counter=EstimateCounter())


def assert_pairs_valid(items: list[dict]) -> None:
    """What the Responses API demands: every call answered after it, every output after its call."""
    calls: dict[str, int] = {}
    outputs: dict[str, int] = {}
    for i, it in enumerate(items):
        if it.get("type") == "function_call":
            calls[it["call_id"]] = i
        elif it.get("type") == "function_call_output":
            outputs[it["call_id"]] = i
    assert set(calls) == set(outputs), (calls, outputs)
    assert all(calls[c] < outputs[c] for c in calls)
    # and, for Chat Completions-style models, the outputs of a run of calls follow it at once
    i = 0
    while i < len(items):
        run = []
        while i < len(items) and items[i].get("type") == "function_call":
            run.append(items[i]["call_id"])
            i += 1
        answers = []
        while run and i < len(items) and items[i].get("type") == "function_call_output":
            answers.append(items[i]["call_id"])
            i += 1
        assert sorted(answers) == sorted(run), (run, answers)
        i += 0 if run else 1


# -- the story -------------------------------------------------------------------------------------------


def test_story_a_support_agent_keeps_every_item_and_the_model_sees_the_same_history_as_with_sqlite(tmp_path):
    """A developer swaps the SDK's SQLiteSession for LedgerSession: the three turns run the same,
    the model gets the same input on every call, and get_items gives back the items exactly."""
    theirs_model, ours_model = ScriptedModel(script()), ScriptedModel(script())
    theirs = SQLiteSession("support-1", str(tmp_path / "sdk.db"))
    led = ledger()
    ours = LedgerSession("support-1", ledger=led)
    assert isinstance(ours, SDKSession)
    for text in TURNS:
        a = run(Runner.run(agent_with(theirs_model), text, session=theirs))
        b = run(Runner.run(agent_with(ours_model), text, session=ours))
        assert a.final_output == b.final_output
    assert [c.input for c in ours_model.calls] == [c.input for c in theirs_model.calls]
    mine, sdk = run(ours.get_items()), run(theirs.get_items())
    assert json.dumps(mine) == json.dumps(sdk)  # equal, keys in the same order
    assert len(mine) == 12
    # each item is one observed span with the right role and kind, the tool pairing contract on top
    spans = ours.ledger_session.spans()
    assert [(s.role, s.kind) for s in spans[:4]] == [
        ("user", "message"), ("assistant", "tool_call"), ("tool", "tool_result"), ("assistant", "message")
    ]
    assert spans[1].meta["tool_call_id"] == "call_a" and spans[1].meta["name"] == "lookup_order"
    assert spans[1].meta["arguments"] == '{"order_id":"A17"}'
    assert spans[2].meta["tool_call_id"] == "call_a" and spans[2].text.startswith("order A17: shipped")
    assert all(s.observed for s in spans)
    assert ours.ledger_session.render("openai")[2] == {"role": "tool", "tool_call_id": "call_a", "content": spans[2].text}


def test_get_items_returns_copies_and_limit_is_the_newest_n():
    s = LedgerSession("c", ledger=ledger())
    run(s.add_items([{"role": "user", "content": f"m{i}"} for i in range(5)]))
    items = run(s.get_items())
    items[0]["content"] = "changed"
    assert run(s.get_items())[0]["content"] == "m0"
    assert [i["content"] for i in run(s.get_items(limit=2))] == ["m3", "m4"]
    assert run(s.get_items(limit=0)) == []
    with pytest.raises(InvalidInputError):
        run(s.get_items(limit=-1))


# -- compaction between turns ----------------------------------------------------------------------------


def test_compaction_between_turns_is_what_the_next_model_call_sees():
    led = ledger()
    compactor = Compactor(budget=900, keep_last_turns=1)
    session = LedgerSession("compacting", ledger=led, compactor=compactor)
    assert is_openai_responses_compaction_aware_session(session)
    model = ScriptedModel(script())
    for text in TURNS[:2]:
        run(Runner.run(agent_with(model), text, session=session))
    # the Runner called run_compaction after the settled turns; the compactor acted, by events
    s = session.ledger_session
    acts = [ev for ev in s.events() if getattr(ev, "by", "").startswith("compactor:")]
    assert acts, "the compactor should have pruned or rewritten something"
    assert session.last_compaction is not None
    before_turn3 = run(session.get_items())
    run(Runner.run(agent_with(model), TURNS[2], session=session))
    seen = model.last_call.input
    assert seen[: len(before_turn3)] == before_turn3  # the model saw the compacted live buffer
    texts = json.dumps(seen)
    assert "restore o" in texts or "[derived d" in texts  # a placeholder or a marked summary
    assert_pairs_valid(seen)
    # nothing was lost: the log still holds every original tool output
    outputs = [ev for ev in s.events() if isinstance(ev, Observed) and ev.kind == "tool_result"]
    assert len(outputs) == 3 and all("Rotterdam" in ev.text or ev.text == "5" for ev in outputs)


def test_a_rewriting_compactor_summarizes_old_turns_and_the_model_sees_the_marked_summary():
    led = ledger()
    compactor = Compactor(budget=700, keep_last_turns=1, strategies=[RewriteOldest(summary_tokens=40)])
    session = LedgerSession("rewriting", ledger=led, compactor=compactor)
    model = ScriptedModel(script())
    for text in TURNS:
        run(Runner.run(agent_with(model), text, session=session))
    s = session.ledger_session
    rewrites = [ev for ev in s.events() if isinstance(ev, Rewritten)]
    assert rewrites and rewrites[0].by == "compactor:rewrite-oldest"
    d = rewrites[0].span_id
    seen = model.last_call.input
    assert seen[0]["content"].startswith(f"[derived {d} · summary of o1")
    assert_pairs_valid(seen)
    # the summary was written from the originals, which the log still holds
    assert s.originals(d)[0].text == TURNS[0]
    assert all(sp.generation <= 1 for sp in s.spans())


def test_the_model_compacts_through_the_context_tools_and_the_next_run_sees_it():
    """The model-driven way: the agent gets the context tools, the model prunes the old lookup by
    id (it sees ids with render_ids=True), and the next run's input shows the placeholder."""
    led = ledger()
    session = LedgerSession("self-compacting", ledger=led, render_ids=True)
    model = ScriptedModel([
        [function_call("lookup_order", {"order_id": "A17"}, call_id="call_a")],
        [assistant_message("Order A17 shipped from Rotterdam.")],
        [function_call("context_prune", {"span_ids": ["o3"], "reason": "the A17 lookup is answered"}, call_id="call_p")],
        [assistant_message("Noted; I dropped the old lookup.")],
        [assistant_message("Anything else?")],
    ])
    agent = Agent(name="support", instructions="Answer briefly.", model=model,
                  tools=[lookup_order, *session.context_tools(budget=2_000, by="model:scripted")])
    run(Runner.run(agent, "Where is order A17?", session=session))
    run(Runner.run(agent, "Please tidy your context.", session=session))
    s = session.ledger_session
    prunes = [ev for ev in s.events() if isinstance(ev, Pruned)]
    assert {ev.span_id for ev in prunes} == {"o2", "o3"}  # a call and its result leave together
    assert all(ev.by == "model:scripted" for ev in prunes)
    answer = next(i for i in model.calls[3].input if i.get("type") == "function_call_output" and i["call_id"] == "call_p")
    assert answer["output"].startswith("pruned o2, o3")  # the tool's answer reached the model
    run(Runner.run(agent, "Thanks.", session=session))
    seen = model.last_call.input
    assert not any(i.get("call_id") == "call_a" for i in seen)
    assert seen[0]["content"] == "[o1] Where is order A17?"
    assert s.original("o3").text.startswith("order A17: shipped")


def test_a_derived_span_comes_back_as_a_marked_message_and_pairs_stay_valid():
    s = LedgerSession("marked", ledger=ledger())
    run(s.add_items([
        {"role": "user", "content": "Check A17 and B9."},
        {"type": "function_call", "call_id": "c1", "name": "lookup_order", "arguments": '{"order_id":"A17"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "A17 shipped"},
        {"type": "function_call", "call_id": "c2", "name": "lookup_order", "arguments": '{"order_id":"B9"}'},
        {"type": "function_call_output", "call_id": "c2", "output": "B9 delayed"},
    ]))
    ls = s.ledger_session
    d = ls.rewrite(["o1", "o2", "o3"], "The user asked about A17 and B9; A17 shipped.")
    ls.prune("o5")  # B9's output: its call stays, with a placeholder result
    items = run(s.get_items())
    assert items[0]["role"] == "user" and items[0]["content"].startswith(f"[derived {d.id} ")
    assert "not an observation" in items[0]["content"]
    assert items[1]["type"] == "function_call" and items[1]["call_id"] == "c2"
    assert items[2] == {"type": "function_call_output", "call_id": "c2", "output": items[2]["output"]}
    assert "restore o5" in items[2]["output"]
    assert_pairs_valid(items)
    ls.restore("o5")
    ls.prune("o4")  # now the output's call is gone: the output is a plain message, never an orphan
    items = run(s.get_items())
    assert items[-1]["role"] == "user" and "B9 delayed" in items[-1]["content"]
    assert "o4" in items[-1]["content"]
    assert_pairs_valid(items)


def test_a_call_that_cannot_take_a_text_placeholder_becomes_a_plain_message_when_its_output_is_pruned():
    call = {"type": "computer_call", "id": "cu_1", "call_id": "cc_1", "status": "completed",
            "action": {"type": "click", "x": 1, "y": 2}, "pending_safety_checks": []}
    output = {"type": "computer_call_output", "call_id": "cc_1",
              "output": {"type": "computer_screenshot", "image_url": "data:image/png;base64,AAAA"}}
    s = LedgerSession("computer", ledger=ledger())
    spans = s.observe_items([{"role": "user", "content": "click it"}, call, output])
    assert [(sp.kind, sp.meta["tool_call_id"]) for sp in spans[1:]] == [("tool_call", "cc_1"), ("tool_result", "cc_1")]
    assert s.items()[1:] == [call, output]
    s.ledger_session.prune(spans[2].id)
    shown = s.items()[1]
    assert shown["role"] == "assistant" and "cc_1" in shown["content"] and f"restore {spans[2].id}" in shown["content"]


def test_a_reasoning_item_without_the_item_it_led_to_is_shown_as_a_message():
    """The Responses API refuses a reasoning item that is not followed by its output item."""
    reasoning = {"type": "reasoning", "id": "rs_9", "summary": [{"type": "summary_text", "text": "Need the logs."}]}
    s = LedgerSession("reasoning", ledger=ledger())
    spans = s.observe_items([
        {"role": "user", "content": "why?"},
        reasoning,
        {"type": "function_call", "call_id": "c9", "name": "logs", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c9", "output": "503"},
    ])
    assert s.items()[1] == reasoning
    s.ledger_session.prune(spans[2].id)
    items = s.items()
    assert items[1] == {"role": "assistant", "content": f"[reasoning {spans[1].id}; the item it led to is not in the context]\nNeed the logs."}
    s.ledger_session.restore(spans[2].id)
    assert s.items()[1] == reasoning


def test_another_tools_record_of_reasoning_is_not_sent_back_as_text():
    s = LedgerSession("foreign", ledger=ledger())
    s.observe_items([{"role": "user", "content": "hi"}])
    s.ledger_session.observe("I should greet back.", role="assistant", kind="thinking")  # e.g. an importer
    s.observe_items([{"role": "assistant", "content": "hello"}])
    assert s.items() == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert s.items(limit=1) == [{"role": "assistant", "content": "hello"}]
    assert run(s.pop_item()) == {"role": "assistant", "content": "hello"}
    assert run(s.pop_item()) == {"role": "user", "content": "hi"}  # the thinking span is left alone
    assert run(s.pop_item()) is None
    assert [sp.id for sp in s.ledger_session.spans()] == ["o2"]


# -- resume ------------------------------------------------------------------------------------------------


def resume_story(url: str) -> None:
    model = ScriptedModel(script())
    first = LedgerSession("resumable", url=url)
    run(Runner.run(agent_with(model), TURNS[0], session=first))
    before = run(first.get_items())
    first.close()  # the process ends
    second = LedgerSession("resumable", url=url)  # a new process reopens the same ledger
    try:
        assert run(second.get_items()) == before
        run(Runner.run(agent_with(model), TURNS[1], session=second))
        assert model.last_call.input[: len(before)] == before
        assert model.last_call.input[len(before)]["content"] == TURNS[1]
        assert len(run(second.get_items())) == len(before) + 6
        assert second.ledger_session.verify().ok
    finally:
        second.close()


def test_a_run_resumes_from_a_reopened_sqlite_ledger(tmp_path):
    resume_story(f"sqlite:///{tmp_path / 'agents.db'}")


@pytest.mark.postgres
def test_a_run_resumes_from_postgresql():
    url = postgres_url()
    try:
        resume_story(url)
    finally:
        drop_schema(url)


# -- pop and clear: prunes, never deletes ----------------------------------------------------------------


def test_pop_item_prunes_the_newest_live_item_and_the_log_keeps_it():
    s = LedgerSession("pop", ledger=ledger())
    run(s.add_items([{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]))
    assert run(s.pop_item()) == {"role": "user", "content": "two"}
    assert [i["content"] for i in run(s.get_items())] == ["one"]
    ls = s.ledger_session
    last = list(ls.events())[-1]
    assert isinstance(last, Pruned) and last.span_id == "o2" and last.by == "openai-agents"
    assert ls.original("o2").text == "two"
    ls.restore("o2")
    assert [i["content"] for i in run(s.get_items())] == ["one", "two"]
    assert run(s.pop_item())["content"] == "two"
    assert run(s.pop_item())["content"] == "one"
    assert run(s.pop_item()) is None


def test_clear_session_prunes_every_live_span_and_deletes_nothing():
    s = LedgerSession("clear", ledger=ledger())
    run(s.add_items([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]))
    position = s.ledger_session.position
    run(s.clear_session())
    assert run(s.get_items()) == []
    ls = s.ledger_session
    assert ls.position == position + 2
    assert [ls.original(i).text for i in ("o1", "o2")] == ["a", "b"]
    assert [i["content"] for i in ls.at(position).render("openai")] == ["a", "b"]


# -- item shapes ---------------------------------------------------------------------------------------------


def test_unknown_and_unusual_items_are_kept_and_given_back_unchanged():
    items = [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Think."}]},
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "x" * 300_000},
        {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
        {"type": "brand_new_item", "payload": {"nested": [1, 2.5, None, True]}},
        {"role": "developer", "content": "Be terse."},
        {"role": "user", "content": [{"type": "input_text", "text": "look"}, {"type": "input_image", "image_url": "data:,"}]},
        {"role": "user", "content": ""},
        {"type": "function_call_output", "call_id": "lonely", "output": [{"type": "input_text", "text": "hi"}]},
        {"type": "custom_tool_call", "call_id": "cc", "name": "grep", "input": "foo"},
        {"type": "custom_tool_call_output", "call_id": "cc", "output": "bar"},
        {"role": "user", "content": "big attachment", "x-blob": "z" * 300_000},
    ]
    s = LedgerSession("shapes", ledger=ledger())
    run(s.add_items(items))
    spans = s.ledger_session.spans()
    assert [sp.kind for sp in spans[:4]] == ["thinking", "thinking", "other", "other"]
    assert spans[3].role == "assistant" and spans[3].meta["item"] == items[3]  # the raw item in meta
    assert spans[4].role == "system"
    back = run(s.get_items())
    # the lonely output has no call in the session: it comes back as a plain message, by design
    assert back[7] == {"role": "user", "content": back[7]["content"]}
    assert "lonely" in back[7]["content"] and back[7]["content"].endswith("hi")
    assert [b for i, b in enumerate(back) if i != 7] == [x for i, x in enumerate(items) if i != 7]
    assert json.dumps(back[3]) == json.dumps(items[3])


@pytest.mark.parametrize(
    "bad, says",
    [
        ("hello", "not a Responses input item"),
        (None, "not a Responses input item"),
        ({"content": "no role"}, "neither 'type' nor 'role'"),
        ({"role": "robot", "content": "x"}, "role must be one of"),
        ({"role": "user"}, "no 'content'"),
        ({"type": "function_call", "name": "f", "arguments": "{}"}, "call_id"),
        ({"type": "function_call", "call_id": "c", "arguments": "{}"}, "'name'"),
        ({"type": "function_call_output", "output": "x"}, "call_id"),
        ({"type": 7}, "'type' must be"),
        ({"role": "user", "content": "\ud800"}, "Unicode"),
        ({"type": "thing", "x": object()}, "JSON"),
        ({"type": "thing", "x": 2**70}, r"item 1: .*(64-bit|cannot be stored)"),
    ],
)
def test_a_malformed_item_raises_a_typed_error_and_writes_nothing(bad, says):
    s = LedgerSession("bad", ledger=ledger())
    run(s.add_items([{"role": "user", "content": "before"}]))
    position = s.ledger_session.position
    with pytest.raises(InvalidInputError, match=says):
        run(s.add_items([{"role": "user", "content": "fine"}, bad]))  # the good first item is not written
    assert s.ledger_session.position == position
    assert [i["content"] for i in run(s.get_items())] == ["before"]
    with pytest.raises(InvalidInputError):
        run(s.add_items("not a list"))
    assert s.ledger_session.position == position


def test_render_ids_tags_what_the_model_reads_and_nothing_else():
    s = LedgerSession("ids", ledger=ledger(), render_ids=True)
    run(s.add_items([
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "5"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ]))
    items = run(s.get_items())
    assert items[0]["content"] == "[o1] hi"
    assert items[1]["arguments"] == "{}"
    assert items[2]["output"] == "[o3] 5"
    assert items[3]["content"][0]["text"] == "[o4] done"


def test_constructor_checks_and_session_created_once(tmp_path):
    led = ledger()
    with pytest.raises(InvalidInputError):
        LedgerSession("x", ledger=led, url="memory://")
    with pytest.raises(InvalidInputError):
        LedgerSession("x", ledger=led, compactor="guarded")
    with pytest.raises(InvalidInputError):
        LedgerSession("", ledger=led)
    a = LedgerSession("same", ledger=led)
    run(a.add_items([{"role": "user", "content": "hello"}]))
    b = LedgerSession("same", ledger=led)
    assert run(b.get_items()) == [{"role": "user", "content": "hello"}]
    assert [i.name for i in led.sessions()].count("same") == 1


# -- invariants -----------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
message_items = st.builds(
    lambda role, content, extra: {**extra, "role": role, "content": content},
    st.sampled_from(["user", "assistant", "system", "developer"]),
    st.text(min_size=0, max_size=40)
    | st.lists(st.fixed_dictionaries({"type": st.just("input_text"), "text": st.text(max_size=20)}), max_size=3),
    st.dictionaries(st.sampled_from(["id", "status", "x-extra"]), json_values, max_size=2),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(message_items, min_size=1, max_size=6))
def test_any_message_items_round_trip_exactly(items):
    s = LedgerSession("rt", ledger=ledger())
    run(s.add_items(items))
    assert json.dumps(run(s.get_items())) == json.dumps(items)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=5), st.data())
def test_pairs_stay_valid_whatever_is_pruned(groups, data):
    """Turns of parallel calls and their outputs; prune any subset of spans: the items given back
    never hold an unanswered call or an output without its call."""
    items: list[dict] = []
    n = 0
    for g in groups:
        items.append({"role": "user", "content": f"turn {n}"})
        ids = [f"c{n}_{k}" for k in range(g)]
        items += [{"type": "function_call", "call_id": c, "name": "add", "arguments": "{}"} for c in ids]
        items += [{"type": "function_call_output", "call_id": c, "output": f"out {c}"} for c in ids]
        n += 1
    s = LedgerSession("pairs", ledger=ledger())
    spans = s.observe_items(items)
    doomed = data.draw(st.sets(st.sampled_from([sp.id for sp in spans])))
    for span_id in sorted(doomed):
        s.ledger_session.prune(span_id)
    back = s.items()
    assert_pairs_valid(back)
    assert len(back) >= len(spans) - len(doomed)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("message"), st.sampled_from(["user", "assistant"])),
        st.tuples(st.just("calls"), st.integers(1, 3)),
        st.tuples(st.just("result"), st.integers(0, 9)),
        st.tuples(st.just("prune"), st.integers(0, 50)),
        st.tuples(st.just("restore"), st.integers(0, 50)),
        st.tuples(st.just("rewrite"), st.integers(0, 50)),
        st.tuples(st.just("read"), st.just(0)),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=80, deadline=None)
@given(ops)
def test_the_kept_view_always_equals_a_fresh_one(steps):
    """get_items keeps its view between calls and pairs only what was appended: after any sequence of
    appends, prunes, restores and rewrites it equals the view a fresh LedgerSession computes from the
    log, placeholder texts included."""
    led = ledger()
    s = LedgerSession("kept", ledger=led)
    calls: list[str] = []
    pruned: list[str] = []
    for op, arg in steps:
        ls = s.ledger_session
        if op == "message":
            s.observe_items([{"role": arg, "content": f"m{ls.position}"}])
        elif op == "calls":
            new = [f"c{ls.position}_{k}" for k in range(arg)]
            calls += new
            s.observe_items([{"type": "function_call", "call_id": c, "name": "f", "arguments": "{}"} for c in new])
        elif op == "result" and calls:
            c = calls[arg % len(calls)]
            s.observe_items([{"type": "function_call_output", "call_id": c, "output": f"r{c}"}])
        elif op == "prune" and ls.spans():
            live = ls.spans()
            span_id = live[arg % len(live)].id
            ls.prune(span_id)
            pruned.append(span_id)
        elif op == "rewrite":
            observed = [sp.id for sp in ls.spans() if sp.observed]
            if len(observed) >= 2:
                k = arg % (len(observed) - 1)
                ls.rewrite(observed[k : k + 2], f"summary at {ls.position}")
        elif op == "restore" and pruned:
            span_id = pruned.pop(arg % len(pruned))
            ls.restore(span_id)
        mine = s.items()
        fresh = LedgerSession("kept", ledger=led).items()
        assert mine == fresh
        assert_pairs_valid(mine)


# -- packaging -------------------------------------------------------------------------------------------------


def test_importing_engine_imports_no_framework():
    code = "import sys, engine; engine.Ledger; import engine.integrations; print(sorted(m for m in ('agents', 'langchain', 'langchain_core', 'langgraph') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_missing_sdk_is_a_one_line_error_naming_the_extra():
    code = (
        "import sys; sys.modules['agents'] = None\n"
        "try:\n    import engine.integrations.openai_agents\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines() == ["the OpenAI Agents SDK (openai-agents) is not installed: pip install 'ctxledger[openai-agents]'"]


def test_openai_responses_compaction_session_over_ledger_session_is_a_recorded_rewrite(tmp_path):
    """The SDK's ``OpenAIResponsesCompactionSession`` with a ``LedgerSession`` underneath, its
    ``responses.compact`` calls answered by the fake Responses endpoint: the originals stay in the
    log, the compaction is one derived span ``by="openai:compact"`` (opaque), the user messages it
    kept are the same spans, and the next run's model sees the encrypted item given back as is."""
    from agents.memory import OpenAIResponsesCompactionSession
    from openai import AsyncOpenAI

    from engine.proxy.testing import FakeUpstream, serve

    ledger = Ledger.open(f"sqlite:///{tmp_path / 'agents.db'}", token_counter=EstimateCounter())
    underlying = LedgerSession("support-compacted", ledger=ledger)
    fake = FakeUpstream()

    async def scenario(origin: str) -> list[str]:
        # one event loop for the whole story, and the client closed in it: a client left open is
        # closed by the garbage collector later, inside some other test's loop
        async with AsyncOpenAI(base_url=f"{origin}/v1", api_key="sk-fake", max_retries=0) as client:
            session = OpenAIResponsesCompactionSession(
                "support-compacted", underlying, client=client,
                model="gpt-4.1", should_trigger_compaction=lambda context: False,
            )
            model = ScriptedModel(script())
            for turn in ("Where is order A17?", "Add 2 and 3, and where is B9?"):
                await Runner.run(agent_with(model), turn, session=session)
            before = [x.text for x in underlying.ledger_session.spans()]
            await session.run_compaction({"force": True, "compaction_mode": "input"})
            after_model = ScriptedModel([[assistant_message("All shipped.", item_id="msg_9")]])
            await Runner.run(agent_with(after_model), "Anything else?", session=session)
        return before

    with serve(fake.app) as origin:
        before = run(scenario(origin))
    s = underlying.ledger_session
    [rewrite] = [e for e in s.events() if isinstance(e, Rewritten)]
    assert rewrite.by == "openai:compact" and rewrite.meta["opaque"] is True
    assert not any(isinstance(e, Pruned) for e in s.events())  # no clear_session: a rewrite
    kept = [x.text for x in s.spans() if x.observed]
    assert kept[:2] == ["Where is order A17?", "Add 2 and 3, and where is B9?"]
    replaced = {s.original(i).text for i in rewrite.inputs}
    assert replaced == set(before) - {"Where is order A17?", "Add 2 and 3, and where is B9?"}
    items = run(underlying.get_items())
    compaction = [i for i in items if i.get("type") == "compaction"]
    assert compaction and compaction[0]["encrypted_content"] == rewrite.meta["item"]["encrypted_content"]
    assert [x.text for x in s.spans()][-2:] == ["Anything else?", "All shipped."]
    ledger.close()
