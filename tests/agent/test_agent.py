"""engine.agent: the loop that lets a model edit its own context, driven through the official
OpenAI and Anthropic SDKs against a scripted model on 127.0.0.1.

Every request the loop sends is checked against the provider's message rules; every context_* call
is recorded as a tool_call/tool_result pair, and the edit it caused points at the call."""

from __future__ import annotations

import json
import re
import sys
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from fake_model_server import FakeModelServer, anthropic_reply, last_tool_results, openai_reply
from provider_rules import check_anthropic, check_openai

from engine import EstimateCounter, InvalidInputError, Ledger, RewriterError
from engine.agent import NUDGE_META, Agent, AnthropicChat, OpenAIChat, Reply, ToolCall, chat_model
from engine.events import Observed, Pruned, RewriteRefused, Rewritten

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
WEATHER_ANTHROPIC = {
    "name": "get_weather",
    "description": "Weather in a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


pytestmark = pytest.mark.usefixtures("no_proxy")  # tests/conftest.py


@pytest.fixture
def ledger():
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    yield led
    led.close()


def busy_session(ledger, n: int = 6):
    """A system prompt, a request and ``n`` bulky tool exchanges: well over a 2,000-token budget."""
    s = ledger.create_session("agent-" + uuid.uuid4().hex[:8])
    s.observe("You are an SRE agent for the checkout platform.", role="system")
    s.observe("Checkout is flaky; look at the services behind it.", role="user")
    for i in range(n):
        cid = f"call_{i}"
        s.observe(f"get_logs(service='svc-{i}')", role="assistant", kind="tool_call",
                  meta={"tool_call_id": cid, "name": "get_logs", "arguments": {"service": f"svc-{i}"}})
        body = "\n".join(f"INFO svc-{i} handled GET /v1/items with status 200 in {j} ms" for j in range(40))
        s.observe(f"ERROR svc-{i} returned HTTP 503 at 14:0{i}\n{body}", role="tool", kind="tool_result",
                  meta={"tool_call_id": cid})
    return s


def ids_in(text: str) -> list[str]:
    return re.findall(r"\[(o\d+)\]", text)


def log_of(s):
    return [(ev.originator_version, type(ev).__name__) for ev in s.events()]


# -- the narrative: OpenAI -------------------------------------------------------------------------------


def test_openai_model_prunes_its_own_context_and_uses_a_registered_function(ledger):
    """A model over its budget lists its context, prunes an old tool exchange, calls the caller's own
    tool (a Python function), and answers; everything it saw and did is in the log."""
    s = busy_session(ledger)
    seen: list[dict] = []

    def handler(path, body):
        assert path == "/v1/chat/completions"
        check_openai(body["messages"])
        seen.append(body)
        turn = len(seen)
        if turn == 1:
            return 200, openai_reply(None, [("c-list", "context_list", {"min_tokens": 100})])
        if turn == 2:
            listing = last_tool_results(body)[0]
            assert "live" in listing and "/ 2,000 tokens" in listing
            oldest = re.search(r"^(o\d+) tool tool_result", listing, re.MULTILINE).group(1)
            assert oldest == "o4"
            return 200, openai_reply("Pruning the oldest logs.", [
                ("c-prune", "context_prune", {"span_ids": [oldest], "reason": "svc-0 logs are done with"}),
                ("c-weather", "get_weather", {"city": "Oslo"}),
            ])
        return 200, openai_reply("svc-0 is pruned; Oslo is sunny. Done.")

    with FakeModelServer(handler) as srv:
        model = OpenAIChat("local-model", base_url=srv.openai_url, api_key="k", max_retries=0)
        agent = Agent(s, model, tools=[WEATHER], functions={"get_weather": lambda city: {"city": city, "sky": "sunny"}},
                      budget=2_000)
        before = s.tokens
        result = agent.run("What is going on with checkout?")
    assert not srv.errors
    assert result.stopped == "answered" and result.steps == 3 and result.nudges == 1
    assert result.text == "svc-0 is pruned; Oslo is sunny. Done."
    # the first request: span tags in the content, the context tools beside the caller's tool
    first = seen[0]
    names = [t["function"]["name"] for t in first["tools"]]
    assert "get_weather" in names and {"context_list", "context_prune", "context_summarize", "context_rederive"} <= set(names)
    contents = "\n".join(m.get("content") or "" for m in first["messages"])
    assert "[o1]" in contents and "[o3]" in contents
    nudge = first["messages"][-1]["content"]
    assert "Context budget" in nudge and "2,000" in nudge and "high-water" in nudge
    # what the model did is in the log: calls, results, the prune pointing at its call
    obs = [ev for ev in s.events() if isinstance(ev, Observed)]
    nudges = [ev for ev in obs if ev.meta.get("ctxledger") == NUDGE_META]
    assert len(nudges) == 1 and nudges[0].by == "ctxledger.agent"
    calls = {ev.meta["tool_call_id"]: ev for ev in obs if ev.kind == "tool_call" and ev.by == "model:openai:local-model"}
    assert set(calls) == {"c-list", "c-prune", "c-weather"}
    results = {ev.meta["tool_call_id"]: ev for ev in obs if ev.kind == "tool_result" and ev.meta.get("tool_call_id", "").startswith("c-")}
    assert set(results) == {"c-list", "c-prune", "c-weather"}
    assert '"sky": "sunny"' in results["c-weather"].text
    assert "pruned o3, o4" in results["c-prune"].text
    pruned = [ev for ev in s.events() if isinstance(ev, Pruned)]
    assert {ev.span_id for ev in pruned} == {"o3", "o4"}  # the call and its output leave together
    assert all(ev.by == "model:openai:local-model" for ev in pruned)
    assert all(f"[via {calls['c-prune'].span_id}]" in ev.reason and "svc-0 logs" in ev.reason for ev in pruned)
    assert s.tokens < before + 400
    # the model's own calls render as valid pairs too
    check_openai(s.render("openai"))


def test_anthropic_model_is_refused_a_summary_of_a_summary_and_rederives(ledger):
    """The model tries to fold its earlier summary into a new one: the ledger refuses (recorded, and
    the model reads why); it then summarizes the observations alone."""
    s = busy_session(ledger)
    d1 = s.rewrite(["o3", "o4"], "svc-0 returned HTTP 503 at 14:00.", by="earlier")
    seen: list[dict] = []

    def handler(path, body):
        assert path == "/v1/messages"
        check_anthropic({"system": body.get("system", ""), "messages": body["messages"]})
        seen.append(body)
        turn = len(seen)
        if turn == 1:
            return 200, anthropic_reply("Folding my notes together.", [
                ("toolu_1", "context_summarize", {"span_ids": [d1.id, "o5", "o6"],
                                                  "summary": "svc-0 and svc-1 returned HTTP 503.", "reason": "space"}),
            ])
        if turn == 2:
            (refusal,) = last_tool_results(body)
            assert "refused and recorded" in refusal and "context_rederive" in refusal and "context_prune" in refusal
            return 200, anthropic_reply(None, [
                ("toolu_2", "context_summarize", {"span_ids": ["o5", "o6"], "summary": "svc-1 returned HTTP 503 at 14:01.",
                                                  "reason": "svc-1 logs in one line"}),
            ])
        return 200, anthropic_reply("Done.")

    with FakeModelServer(handler) as srv:
        model = AnthropicChat("claude-test", base_url=srv.anthropic_url, api_key="k", max_retries=0)
        agent = Agent(s, model, budget=2_000)
        result = agent.run()
    assert not srv.errors
    assert result.stopped == "answered" and [c.is_error for c in result.context_calls] == [True, False]
    assert seen[0]["system"].startswith("[o1]")
    assert {t["name"] for t in seen[0]["tools"]} >= {"context_summarize", "context_recall"}
    refused = [ev for ev in s.events() if isinstance(ev, RewriteRefused)]
    assert len(refused) == 1 and refused[0].offending == (d1.id,) and refused[0].by == "model:anthropic:claude-test"
    (rewritten,) = [ev for ev in s.events() if isinstance(ev, Rewritten) and ev.by.startswith("model:")]
    assert rewritten.inputs == ("o5", "o6") and rewritten.generation == 1
    call = result.context_calls[1]
    assert rewritten.meta.get("tool_call") == call.call_span  # the edit points at the call
    err = s.span(result.context_calls[0].result_span)
    assert err.meta.get("is_error") is True and err.kind == "tool_result"
    assert max(sp.generation for sp in s.spans()) == 1
    check_anthropic(s.render("anthropic"))


def test_grounding_gate_refuses_an_invented_time_and_the_model_reads_why(ledger):
    s = busy_session(ledger, 3)

    def handler(path, body):
        turn = len(srv.requests)
        if turn == 1:
            return 200, openai_reply(None, [("g1", "context_summarize", {
                "span_ids": ["o3", "o4"], "summary": "svc-0 recovered at 14:30.", "reason": "short"})])
        (msg,) = last_tool_results(body)
        assert "14:30" in msg and "error" in msg
        return 200, openai_reply("ok")

    with FakeModelServer(handler) as srv:
        agent = Agent(s, OpenAIChat("m", base_url=srv.openai_url, api_key="k", max_retries=0), budget=100_000)
        result = agent.run()
    assert not srv.errors
    assert result.nudges == 0  # under the high-water mark: no nudge
    assert result.context_calls[0].is_error
    (refused,) = [ev for ev in s.events() if isinstance(ev, RewriteRefused)]
    assert refused.findings and refused.findings[0]["value"] == "14:30"
    assert "o4" in s.state.live  # nothing was summarized


# -- the caller's tools ---------------------------------------------------------------------------------------


def test_unregistered_tool_calls_are_handed_back_and_submitted(ledger):
    s = busy_session(ledger, 1)

    def handler(path, body):
        turn = len(srv.requests)
        if turn == 1:
            return 200, openai_reply(None, [("w1", "get_weather", {"city": "Bergen"})])
        assert [r.split("] ", 1)[-1] for r in last_tool_results(body)] == ["rain"]
        return 200, openai_reply("Bring an umbrella.")

    with FakeModelServer(handler) as srv:
        agent = Agent(s, OpenAIChat("m", base_url=srv.openai_url, api_key="k", max_retries=0), tools=[WEATHER])
        first = agent.run("Weather in Bergen?")
        assert first.stopped == "tool_calls"
        assert [(c.id, c.name, c.args()) for c in first.pending] == [("w1", "get_weather", {"city": "Bergen"})]
        before = log_of(s)
        with pytest.raises(InvalidInputError, match="w1"):
            agent.run()
        assert log_of(s) == before
        with pytest.raises(InvalidInputError, match="nope"):
            agent.submit("nope", "x")
        agent.submit("w1", "rain")
        second = agent.run()
    assert second.stopped == "answered" and second.text == "Bring an umbrella."
    assert [c.id for c in second.pending] == []


def test_a_failing_function_and_bad_arguments_become_error_results(ledger):
    s = busy_session(ledger, 1)

    def boom(city):
        raise RuntimeError("weather service down")

    def handler(path, body):
        turn = len(srv.requests)
        if turn == 1:
            return 200, openai_reply(None, [("w1", "get_weather", {"city": "Oslo"}),
                                            ("p1", "context_prune", "{not json"),
                                            ("p2", "context_teleport", {})])
        results = last_tool_results(body)
        assert "weather service down" in results[0]
        assert "not valid JSON" in results[1]
        assert "no tool named 'context_teleport'" in results[2]
        return 200, openai_reply("sorry")

    with FakeModelServer(handler) as srv:
        agent = Agent(s, OpenAIChat("m", base_url=srv.openai_url, api_key="k", max_retries=0),
                      tools=[WEATHER], functions={"get_weather": boom})
        result = agent.run()
    assert not srv.errors
    assert result.stopped == "answered"
    errors = [sp for sp in s.spans() if sp.kind == "tool_result" and sp.meta.get("is_error")]
    assert {sp.meta["tool_call_id"] for sp in errors} == {"w1", "p1", "p2"}
    assert not any(isinstance(ev, Pruned) for ev in s.events())


def test_max_steps_stops_a_model_that_never_answers(ledger):
    s = busy_session(ledger, 1)
    n = 0

    def handler(path, body):
        nonlocal n
        n += 1
        return 200, openai_reply(None, [(f"l{n}", "context_list", {})])

    with FakeModelServer(handler) as srv:
        agent = Agent(s, OpenAIChat("m", base_url=srv.openai_url, api_key="k", max_retries=0), max_steps=3)
        result = agent.run()
    assert result.stopped == "max_steps" and result.steps == 3 and len(srv.requests) == 3


def test_harness_edits_are_announced_to_the_model(ledger):
    s = busy_session(ledger, 2)

    def handler(path, body):
        return 200, openai_reply("noted")

    with FakeModelServer(handler) as srv:
        agent = Agent(s, OpenAIChat("m", base_url=srv.openai_url, api_key="k", max_retries=0))
        agent.run()
        s.prune("o3", by="harness", reason="manual")
        agent.run("next")
    first, second = (r["body"]["messages"] for r in srv.requests)
    assert "since you last saw it" not in first[0]["content"]
    assert "since you last saw it" in second[0]["content"] and "o3" in second[0]["content"]


# -- failures: typed errors, nothing written for the step -------------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_server_errors_after_retries_are_a_rewriter_error_and_record_nothing(provider, ledger):
    s = busy_session(ledger, 1)
    with FakeModelServer(lambda path, body: (500, {"error": {"message": "boom"}})) as srv:
        model = (OpenAIChat("m", base_url=srv.openai_url, api_key="k", max_retries=1) if provider == "openai"
                 else AnthropicChat("m", base_url=srv.anthropic_url, api_key="k", max_retries=1))
        agent = Agent(s, model)
        before = log_of(s)
        with pytest.raises(RewriterError, match="InternalServerError") as info:
            agent.run()
    assert "nothing was recorded" in info.value.message
    assert len(srv.requests) == 2
    assert log_of(s) == before


@pytest.mark.parametrize("reply", [{"unexpected": True}, b"not json", {**openai_reply("x"), "choices": []}])
def test_malformed_responses_are_a_rewriter_error(reply, ledger):
    s = busy_session(ledger, 1)
    with FakeModelServer(lambda path, body: (200, reply)) as srv:
        agent = Agent(s, OpenAIChat("m", base_url=srv.openai_url, api_key="k", max_retries=0))
        before = log_of(s)
        with pytest.raises(RewriterError):
            agent.run()
    assert log_of(s) == before


def test_missing_sdk_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(RewriterError, match=r"pip install 'ctxledger\[openai\]'"):
        OpenAIChat("m")
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(RewriterError, match=r"pip install 'ctxledger\[anthropic\]'"):
        chat_model("anthropic:claude-test")


def test_bad_settings_are_typed_errors(ledger):
    s = busy_session(ledger, 1)
    model = OpenAIChat("m", base_url="http://127.0.0.1:1/v1", api_key="k")
    before = log_of(s)
    for kw in (
        {"budget": 0},
        {"budget": True},
        {"high_water": 1.5},
        {"high_water": 0.4, "low_water": 0.6},
        {"max_steps": 0},
        {"tools": [{"type": "function", "function": {"name": "context_mine"}}]},
        {"tools": [{"type": "function"}]},
        {"functions": {"not_a_tool": print}},
    ):
        with pytest.raises(InvalidInputError):
            Agent(s, model, **kw)
    with pytest.raises(InvalidInputError):
        Agent(s, object())
    for spec in ("gpt-4.1", "mistral:large", "openai:"):
        with pytest.raises(InvalidInputError):
            chat_model(spec)
    with pytest.raises(InvalidInputError):
        OpenAIChat("")
    with pytest.raises(InvalidInputError):
        OpenAIChat("m", max_tokens_param="tokens")
    assert log_of(s) == before


def test_any_object_with_respond_is_a_model(ledger):
    """A scripted model in process: the protocol is name, format and respond(rendered, tools)."""
    s = busy_session(ledger, 2)

    class Scripted:
        name = "scripted"
        format = "anthropic"

        def __init__(self):
            self.replies = [Reply(tool_calls=(ToolCall("t1", "context_prune", {"span_ids": ["o3"], "reason": "old"}),)),
                            Reply(text="done")]

        def respond(self, rendered, tools):
            check_anthropic(rendered)
            return self.replies.pop(0)

    result = Agent(s, Scripted(), budget=1_000).run()
    assert result.stopped == "answered" and not result.context_calls[0].is_error
    assert "o3" not in s.state.live and "o4" not in s.state.live


# -- the documented example ---------------------------------------------------------------------------------


def test_the_real_model_example_in_docs_runs_against_a_scripted_server(tmp_path, monkeypatch, capsys):
    """docs/agent.md's first ``python no-run`` block (it needs a key and a network), run as written
    with the SDK pointed at a scripted server through OPENAI_BASE_URL."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "agent.md").read_text(encoding="utf-8")
    code = page.split("```python no-run\n", 1)[1].split("```", 1)[0]

    def handler(path, body):
        check_openai(body["messages"])
        if len(srv.requests) == 1:
            assert body["model"] == "gpt-4.1" and "get_logs" in [t["function"]["name"] for t in body["tools"]]
            return 200, openai_reply(None, [("c1", "get_logs", {"service": "billing-api"})])
        assert "billing-api returned HTTP 503 at 14:02" in last_tool_results(body)[0]
        return 200, openai_reply("billing-api returned HTTP 503 at 14:02.")

    with FakeModelServer(handler) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.openai_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        monkeypatch.chdir(tmp_path)
        namespace: dict = {}
        exec(compile(code, "docs/agent.md", "exec"), namespace)
        namespace["ledger"].close()
    assert not srv.errors
    assert capsys.readouterr().out == "answered billing-api returned HTTP 503 at 14:02.\n"
    with Ledger.open(f"sqlite:///{tmp_path / 'agent.db'}") as led:
        s = led.session("checkout-incident")
        kinds = [(ev.kind, ev.by) for ev in s.events() if isinstance(ev, Observed)]
    assert ("tool_call", "model:openai:gpt-4.1") in kinds and ("tool_result", "") in kinds


def test_huge_tool_arguments_are_kept_in_the_span_text(ledger):
    s = busy_session(ledger, 1)
    blob = "x" * 200_000

    class Scripted:
        name = "scripted"
        format = "openai"

        def __init__(self):
            self.replies = [Reply(tool_calls=(ToolCall("u1", "get_weather", {"city": blob}),)), Reply(text="ok")]

        def respond(self, rendered, tools):
            check_openai(rendered)
            return self.replies.pop(0)

    seen = []
    result = Agent(s, Scripted(), tools=[WEATHER], functions={"get_weather": lambda city: seen.append(len(city)) or "fine"}).run()
    assert result.stopped == "answered" and seen == [200_000]
    call = next(sp for sp in s.spans() if sp.kind == "tool_call" and sp.meta["tool_call_id"] == "u1")
    assert blob in call.text and "see the span text" in call.meta["arguments"]["ctxledger"]


# -- property: whatever the model calls, the log stays valid -------------------------------------------------

TOOL_NAMES = ["context_list", "context_prune", "context_summarize", "context_rederive", "context_restore",
              "context_recall", "context_search", "get_weather", "context_nope"]


@st.composite
def scripts(draw):
    """A model's replies: each a few tool calls with arguments naming spans that may or may not exist."""
    turns = []
    for t in range(draw(st.integers(1, 5))):
        calls = []
        for k in range(draw(st.integers(1, 3))):
            name = draw(st.sampled_from(TOOL_NAMES))
            ids = draw(st.lists(st.sampled_from(["o1", "o2", "o3", "o4", "o5", "o6", "o9", "d1", "d2", "o40"]),
                                min_size=1, max_size=3))
            args = {
                "context_prune": {"span_ids": ids, "reason": "r"},
                "context_summarize": {"span_ids": ids, "summary": draw(st.sampled_from(
                    ["svc-0 returned HTTP 503 at 14:00.", "svc-1 recovered at 15:55.", "routine output"])), "reason": "r"},
                "context_rederive": {"span_id": ids[0], "summary": "routine output", "reason": "r"},
                "context_restore": {"span_ids": ids},
                "context_recall": {"span_id": ids[0]},
                "context_search": {"query": "503"},
                "get_weather": {"city": "Oslo"},
            }.get(name, {})
            if draw(st.booleans()) and name != "get_weather":
                args = json.dumps(args) if draw(st.booleans()) else "{broken"
            calls.append(ToolCall(f"h{t}_{k}", name, args))
        turns.append(Reply(tool_calls=tuple(calls)))
    return turns + [Reply(text="done")]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=scripts(), fmt=st.sampled_from(["openai", "anthropic"]))
def test_any_sequence_of_tool_calls_keeps_the_rules_and_the_pairs(script, fmt):
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    s = busy_session(led, 4)
    s.rewrite(["o5", "o6"], "svc-1 returned HTTP 503 at 14:01.")

    class Scripted:
        name = "prop"
        format = fmt

        def __init__(self):
            self.replies = list(script)

        def respond(self, rendered, tools):
            (check_openai if fmt == "openai" else check_anthropic)(rendered)
            return self.replies.pop(0)

    result = Agent(s, Scripted(), tools=[WEATHER if fmt == "openai" else WEATHER_ANTHROPIC],
                   functions={"get_weather": lambda city: "sunny"}, budget=1_000).run()
    assert result.stopped == "answered"
    assert all(sp.generation <= 1 for sp in s.spans())
    check_openai(s.render("openai"))
    check_anthropic(s.render("anthropic"))
    # every call the model made was answered exactly once in the log
    obs = [ev for ev in s.events() if isinstance(ev, Observed)]
    made = [ev.meta["tool_call_id"] for ev in obs if ev.kind == "tool_call" and ev.by == "model:prop"]
    answered = [ev.meta["tool_call_id"] for ev in obs if ev.kind == "tool_result" and ev.meta["tool_call_id"] in made]
    assert sorted(made) == sorted(answered) == sorted(c.id for r in script for c in r.tool_calls)
    led.close()
