"""The model's context tools (engine/tools.py): the contract, each tool, the rules, bad input."""

from __future__ import annotations

import json

import pytest

from engine import EstimateCounter, Ledger, RewriteRefused
from engine.tools import TOOL_NAMES, ContextTools, ToolResult
from tests.provider_rules import check_anthropic, check_openai

SYSTEM = "You are the on-call agent for billing. Keep answers short."


def _agent_session(ledger, name="agent"):
    """A small agent transcript: a system prompt, a question, a tool exchange, an answer."""
    s = ledger.create_session(name)
    s.observe(SYSTEM, role="system")  # o1
    s.observe("Why is checkout failing for customer 4411?", role="user")  # o2
    s.observe("Checking the billing API health.", role="assistant", kind="tool_call",
              meta={"tool_call_id": "call_1", "name": "http_get", "arguments": {"url": "/health"}})  # o3
    s.observe("GET /health -> 503 Service Unavailable from billing-api (pod billing-7f9c)", role="tool",
              kind="tool_result", meta={"tool_call_id": "call_1"})  # o4
    s.observe("billing-api is returning 503; pod billing-7f9c is unhealthy.", role="assistant")  # o5
    s.observe("Restart it and tell me when checkout works again.", role="user")  # o6
    return s


@pytest.fixture
def session(mem_ledger):
    return _agent_session(mem_ledger)


@pytest.fixture
def tools(session):
    return ContextTools(session, budget=10_000, by="model:test")


def test_contract_names_and_results(tools):
    assert TOOL_NAMES == (
        "context_list", "context_search", "context_recall", "context_restore",
        "context_prune", "context_summarize", "context_rederive",
    )
    r = tools.call("context_list", {})
    assert isinstance(r, ToolResult) and r.is_error is False
    assert isinstance(r.text, str) and isinstance(r.data, dict)


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_schemas_are_provider_native(tools, fmt):
    schemas = tools.schemas(fmt)
    assert len(schemas) == len(TOOL_NAMES)
    for schema in schemas:
        if fmt == "openai":
            assert schema["type"] == "function"
            fn = schema["function"]
            name, description, params = fn["name"], fn["description"], fn["parameters"]
        else:
            assert set(schema) == {"name", "description", "input_schema"}
            name, description, params = schema["name"], schema["description"], schema["input_schema"]
        assert name in TOOL_NAMES
        assert len(description) > 40  # written for a model: says what the tool does
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert "$ref" not in json.dumps(params) and "anyOf" not in json.dumps(params)
        for prop in params["properties"].values():
            assert "type" in prop or "enum" in prop
    by_name = {(s["function"] if fmt == "openai" else s)["name"]: s for s in schemas}
    prune = by_name["context_prune"]
    params = prune["function"]["parameters"] if fmt == "openai" else prune["input_schema"]
    assert params["required"] == ["span_ids", "reason"]
    json.dumps(schemas)  # serializable as sent to the provider


def test_schemas_unknown_format(tools):
    from engine import InvalidInputError

    with pytest.raises(InvalidInputError):
        tools.schemas("gemini")


def test_list_shows_spans_and_budget(tools):
    r = tools.call("context_list", {})
    first = r.text.splitlines()[0]
    assert first.startswith("live ") and "/ 10,000 tokens" in first
    assert "o1 system message observed g0" in r.text and "cannot be pruned" in r.text
    ids = [row["id"] for row in r.data["spans"]]
    assert ids == ["o1", "o2", "o3", "o4", "o5", "o6"]
    assert r.data["live_tokens"] == tools.session.tokens and r.data["budget"] == 10_000
    r = tools.call("context_list", {"limit": 2})
    assert len(r.data["spans"]) == 2 and "4 more" in r.text
    r = tools.call("context_list", {"provenance": "derived"})
    assert r.data["spans"] == []
    big = tools.call("context_list", {"min_tokens": 12})
    assert all(row["tokens"] >= 12 for row in big.data["spans"]) and big.data["spans"]


def test_arguments_may_be_a_json_string(tools):
    r = tools.call("context_prune", '{"span_ids": ["o2"], "reason": "answered"}')
    assert not r.is_error and r.data["pruned"] == ["o2"]


def test_prune_takes_the_tool_pair_together_and_says_how_to_undo(tools):
    s = tools.session
    before = s.tokens
    r = tools.call("context_prune", {"span_ids": ["o4"], "reason": "health check output is stale"})
    assert not r.is_error
    assert r.data["pruned"] == ["o3", "o4"]
    assert "o3" not in s.state.live and "o4" not in s.state.live
    assert f"{before:,} → {s.tokens:,}" in r.text
    assert 'context_restore {"span_ids": ["o3", "o4"]}' in r.text
    last_two = list(s.events(s.position - 1))
    assert [type(e).__name__ for e in last_two] == ["Pruned", "Pruned"]
    assert all(e.by == "model:test" and e.reason == "health check output is stale" for e in last_two)
    check_openai(s.render("openai"))
    check_anthropic(s.render("anthropic"))


def test_restore_brings_the_pair_back(tools):
    s = tools.session
    tools.call("context_prune", {"span_ids": ["o3"], "reason": "noise"})
    r = tools.call("context_restore", {"span_ids": ["o4"]})
    assert not r.is_error and sorted(r.data["restored"]) == ["o3", "o4"]
    assert {"o3", "o4"} <= set(s.state.live)
    # naming both halves is not an error
    tools.call("context_prune", {"span_ids": ["o3"], "reason": "noise"})
    r = tools.call("context_restore", {"span_ids": ["o3", "o4"]})
    assert not r.is_error and sorted(r.data["restored"]) == ["o3", "o4"]


def test_system_prompt_is_not_the_models_to_prune(tools):
    s = tools.session
    pos = s.position
    r = tools.call("context_prune", {"span_ids": ["o1"], "reason": "make room"})
    assert r.is_error and "system prompt" in r.text and r.data["error"] == "InvalidInputError"
    assert s.position == pos and "o1" in s.state.live
    r = tools.call("context_summarize", {"span_ids": ["o1", "o2"], "summary": "An agent.", "reason": "room"})
    assert r.is_error and "system prompt" in r.text and s.position == pos
    s.prune("o1", by="harness")  # the harness still can, through the API
    assert "o1" not in s.state.live


def test_summarize_then_summary_of_summary_is_refused_and_recorded(tools):
    s = tools.session
    r = tools.call("context_summarize", {
        "span_ids": ["o2", "o3", "o4", "o5"],
        "summary": "Checkout failing for customer 4411: billing-api returns 503, pod billing-7f9c unhealthy.",
        "reason": "fold the diagnosis",
    })
    assert not r.is_error, r.text
    d = r.data["derived"]
    assert d == "d1" and s.state.live[d].generation == 1 and s.state.live[d].sources == ("o2", "o3", "o4", "o5")
    assert "Undo: context_restore" in r.text
    pos, refusals = s.position, s.state.refusals
    r = tools.call("context_summarize", {"span_ids": ["d1", "o6"], "summary": "Restart billing.", "reason": "shorter"})
    assert r.is_error and r.data["error"] == "RewritePolicyError"
    assert "context_prune" in r.text and "context_rederive" in r.text and "d1" in r.text
    assert s.position == pos + 1 and s.state.refusals == refusals + 1
    refused = s.event(s.position)
    assert isinstance(refused, RewriteRefused) and refused.offending == ("d1",) and refused.by == "model:test"
    assert max(sp.generation for sp in s.spans()) == 1


def test_grounding_gate_refuses_invented_specifics_and_records_it(tools):
    s = tools.session
    pos = s.position
    r = tools.call("context_summarize", {
        "span_ids": ["o2", "o5"],
        "summary": "Customer 4411 checkout failed; billing-api recovered at 14:02.",
        "reason": "fold",
    })
    assert r.is_error and r.data["error"] == "GroundingError"
    assert "14:02" in r.text and any(f["value"] == "14:02" for f in r.data["findings"])
    assert s.position == pos + 1 and isinstance(s.event(s.position), RewriteRefused)
    assert {"o2", "o5"} <= set(s.state.live)


def test_gate_off_lets_the_harness_decide(session):
    tools = ContextTools(session, gate=False)
    r = tools.call("context_summarize", {"span_ids": ["o2"], "summary": "Customer 4411 since 14:02.", "reason": "x"})
    assert not r.is_error


def test_recall_reads_the_log_without_touching_the_buffer(tools):
    s = tools.session
    tools.call("context_prune", {"span_ids": ["o4"], "reason": "stale"})
    pos, live = s.position, dict(s.state.live)
    r = tools.call("context_recall", {"span_id": "o4"})
    assert not r.is_error and "pod billing-7f9c" in r.text and "unchanged" in r.text
    assert s.position == pos and s.state.live == live
    tools.call("context_summarize", {"span_ids": ["o5", "o6"], "summary": "billing-api is 503; restart it.", "reason": "fold"})
    r = tools.call("context_recall", {"span_id": "d1"})
    assert r.data["spans"] == ["o5", "o6"] and "Restart it and tell me" in r.text


def test_recall_pages_long_texts(mem_ledger):
    s = mem_ledger.create_session("long")
    s.observe(" ".join(f"line{i} of the deploy log" for i in range(2000)), role="tool", kind="tool_result",
              meta={"tool_call_id": "x"})
    tools = ContextTools(s, recall_tokens=500)
    first = tools.call("context_recall", {"span_id": "o1"})
    assert first.data["pages"] > 1 and "page 2 follows" in first.text
    assert len(first.data["text"]) <= 500 * 4 and s.counter.count(first.data["text"]) <= 500
    pages = [tools.call("context_recall", {"span_id": "o1", "page": p}).data["text"] for p in range(1, first.data["pages"] + 1)]
    assert "".join(pages) == s.span("o1").text
    r = tools.call("context_recall", {"span_id": "o1", "page": first.data["pages"] + 1})
    assert r.is_error and "does not exist" in r.text


def test_rederive_from_originals(tools):
    s = tools.session
    tools.call("context_summarize", {"span_ids": ["o5", "o6"], "summary": "billing-api is 503; restart it.", "reason": "fold"})
    r = tools.call("context_rederive", {"span_id": "d1", "summary": "Pod billing-7f9c is unhealthy; restart it.", "reason": "keep the pod"})
    assert not r.is_error, r.text
    assert s.state.live["d1"].text == "Pod billing-7f9c is unhealthy; restart it." and s.state.live["d1"].generation == 1
    r = tools.call("context_rederive", {"span_id": "o2", "summary": "x", "reason": "x"})
    assert r.is_error and "context_summarize" in r.text
    pos = s.position
    r = tools.call("context_rederive", {"span_id": "d1", "summary": "Pod billing-7f9c died at 09:13.", "reason": "x"})
    assert r.is_error and r.data["error"] == "GroundingError" and s.position == pos + 1


def test_restore_a_live_summary_expands_it(tools):
    s = tools.session
    tools.call("context_summarize", {"span_ids": ["o5", "o6"], "summary": "billing-api is 503; restart it.", "reason": "fold"})
    r = tools.call("context_restore", {"span_ids": ["d1"]})
    assert not r.is_error and r.data["expanded"] == ["d1"]
    assert {"o5", "o6"} <= set(s.state.live) and "d1" not in s.state.live
    r = tools.call("context_restore", {"span_ids": ["o5"]})
    assert r.is_error and "already in your context" in r.text


def test_restore_of_a_summarized_span_names_the_summary(tools):
    tools.call("context_summarize", {"span_ids": ["o5", "o6"], "summary": "billing-api is 503; restart it.", "reason": "fold"})
    pos = tools.session.position
    r = tools.call("context_restore", {"span_ids": ["o5"]})
    assert r.is_error and "summarized in d1" in r.text and tools.session.position == pos


def test_edits_point_at_the_recorded_call(tools):
    s = tools.session
    call = s.observe("prune the health check", role="assistant", kind="tool_call",
                     meta={"tool_call_id": "m1", "name": "context_prune", "arguments": {"span_ids": ["o4"], "reason": "stale"}})
    r = tools.call("context_prune", {"span_ids": ["o4"], "reason": "stale"}, call=call)
    assert not r.is_error
    pruned = s.event(s.position)
    assert pruned.by == "model:test" and pruned.reason == f"stale [via {call.id}]"
    assert pruned.meta == {"tool_call": call.id, "tool_call_position": call.position}
    # a refusal points at its call too
    call2 = s.observe("summarize a summary", role="assistant", kind="tool_call",
                      meta={"tool_call_id": "m2", "name": "context_summarize", "arguments": {}})
    tools.call("context_summarize", {"span_ids": ["o5", "o6"], "summary": "billing-api is 503; restart it.", "reason": "fold"})
    r = tools.call("context_summarize", {"span_ids": ["d1"], "summary": "x", "reason": "again"}, call=call2)
    refused = s.event(s.position)
    assert r.is_error and isinstance(refused, RewriteRefused) and refused.meta["tool_call"] == call2.id


def test_edit_meta_is_kept_in_the_events_and_checked(session):
    s = session
    s.prune("o2", by="harness", meta={"ticket": "OPS-1"})
    assert s.event(s.position).meta == {"ticket": "OPS-1"}
    s.restore("o2", meta={"why": "needed"})
    assert s.event(s.position).meta == {"why": "needed"}
    d = s.rewrite(["o5", "o6"], "billing-api is 503; restart it.", meta={"tool_call": "o9"})
    s.rederive(d.id, text="billing-api is 503.", meta={"tool_call": "o10"})
    assert s.span(d.id).meta == {"tool_call": "o10"}
    s.expand(d.id, meta={"tool_call": "o11"})
    assert s.event(s.position).meta == {"tool_call": "o11"}
    from engine import InvalidInputError

    pos = s.position
    with pytest.raises(InvalidInputError):
        s.prune("o2", meta="not a dict")
    with pytest.raises(InvalidInputError):
        s.restore("o2", meta={1: "x"})
    assert s.position == pos
    assert s.rebuild().live == s.state.live


def test_render_with_ids_and_the_harness_notice(tools):
    s = tools.session
    out = tools.render("openai")
    check_openai(out)
    assert out[0]["content"].startswith("[o1] ") and "[ledger]" not in json.dumps(out)
    tools.call("context_prune", {"span_ids": ["o2"], "reason": "answered"})  # the model's own edit
    assert "[ledger]" not in json.dumps(tools.render("openai"))
    s.prune("o5", by="compactor:prune-oldest", reason="over budget")  # the harness edits
    out = tools.render("anthropic")
    check_anthropic(out)
    notice = [line for line in out["system"].splitlines() if line.startswith("[ledger]")]
    assert len(notice) == 1 and "pruned o5" in notice[0] and "compactor:prune-oldest" in notice[0]
    assert "[ledger]" not in json.dumps(tools.render("anthropic"))  # said once
    s.prune("o6", by="someone")
    text = tools.render("text")
    assert text.splitlines()[0].startswith("[ledger]") and "pruned o6" in text.splitlines()[0]


# -- bad input: an error result, the log unchanged ------------------------------------------------

BAD_CALLS = [
    ("context_explode", {}, "no tool named"),
    ("context_prune", "{not json", "not valid JSON"),
    ("context_prune", "[1, 2]", "invalid arguments"),
    ("context_prune", {"span_ids": ["o2"]}, "missing required field `reason`"),
    ("context_prune", {"span_ids": ["o2"], "reason": "x", "force": True}, "unknown field `force`"),
    ("context_prune", {"span_ids": "o2", "reason": "x"}, "Expected `array`"),
    ("context_prune", {"span_ids": [], "reason": "x"}, "length >= 1"),
    ("context_prune", {"span_ids": ["o99"], "reason": "x"}, "does not exist"),
    ("context_prune", {"span_ids": ["banana"], "reason": "x"}, "not a span id"),
    ("context_prune", {"span_ids": ["o2", "o99"], "reason": "x"}, "o99 does not exist"),
    ("context_prune", {"span_ids": ["o1"], "reason": "x"}, "system prompt"),
    ("context_prune", {"span_ids": ["o2"], "reason": ""}, "length >= 1"),
    ("context_list", {"limit": "5"}, "Expected `int`"),
    ("context_list", {"limit": 0}, ">= 1"),
    ("context_list", {"provenance": "made-up"}, "Invalid enum value"),
    ("context_recall", {}, "missing required field `span_id`"),
    ("context_recall", {"span_id": 17}, "Expected `str`"),
    ("context_search", {"query": "?!"}, "no words"),
    ("context_summarize", {"span_ids": ["o2"], "summary": "", "reason": "x"}, "length >= 1"),
    ("context_summarize", {"span_ids": ["o2"], "summary": "   \n ", "reason": "x"}, "empty"),
    ("context_summarize", {"span_ids": ["o2"], "summary": "x" * 40_000, "reason": "x"}, "length <= 32000"),
    ("context_rederive", {"span_id": "d7", "summary": "x", "reason": "x"}, "does not exist"),
    ("context_restore", {"span_ids": ["o2"]}, "already in your context"),
]


@pytest.mark.parametrize("name,arguments,message", BAD_CALLS, ids=[f"{n}-{m}" for n, _, m in BAD_CALLS])
def test_bad_input_is_an_error_result_and_leaves_the_log_unchanged(tools, name, arguments, message):
    s = tools.session
    pos, live = s.position, dict(s.state.live)
    r = tools.call(name, arguments)
    assert r.is_error, r.text
    assert message in r.text, r.text
    assert r.data["error"] in ("InvalidInputError", "UnknownSpanError", "SpanNotLiveError", "SpanStateError")
    assert s.position == pos and s.state.live == live


def test_ids_not_live_are_refused_with_a_way_forward(tools):
    s = tools.session
    tools.call("context_prune", {"span_ids": ["o2"], "reason": "x"})
    pos = s.position
    r = tools.call("context_prune", {"span_ids": ["o2"], "reason": "again"})
    assert r.is_error and "pruned at position" in r.text and "restore o2" in r.text and s.position == pos
    r = tools.call("context_summarize", {"span_ids": ["o2", "o5"], "summary": "x", "reason": "x"})
    assert r.is_error and r.data["error"] == "SpanNotLiveError" and s.position == pos


def test_constructor_checks_its_arguments(session):
    from engine import InvalidInputError

    for kwargs in ({"budget": 0}, {"budget": "big"}, {"gate": "yes"}, {"by": ""}, {"recall_tokens": 3}):
        with pytest.raises(InvalidInputError):
            ContextTools(session, **kwargs)
    with pytest.raises(InvalidInputError):
        ContextTools(session.view(1))


def test_sqlite_store_story(sqlite_url):
    """A model works on a SQLite-backed session across two processes' worth of objects."""
    ledger = Ledger.open(sqlite_url, token_counter=EstimateCounter())
    s = _agent_session(ledger)
    tools = ContextTools(s, budget=100, by="model:gpt-test", ledger=ledger)
    assert tools.call("context_prune", {"span_ids": ["o3"], "reason": "stale"}).data["pruned"] == ["o3", "o4"]
    hits = tools.call("context_search", {"query": "billing-7f9c"}).data["hits"]
    assert [h["span_id"] for h in hits] == ["o4"]
    ledger.close()
    again = Ledger.open(sqlite_url, token_counter=EstimateCounter())
    s2 = again.session("agent")
    assert "o3" not in s2.state.live and s2.event(s2.position).by == "model:gpt-test"
    again.close()
