"""render(..., ids=True): every span carries a tag the model can cite, in all three formats,
without breaking the provider's tool pairing."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import EstimateCounter, InvalidInputError, Ledger
from engine.render import render
from engine.render import span_tag
from tests.provider_rules import check_anthropic, check_openai


def _session(ledger, name="r"):
    s = ledger.create_session(name)
    s.observe("You are a careful agent.", role="system")  # o1
    s.observe("Deploy v2 to staging.", role="user")  # o2
    s.observe("Running the deploy.", role="assistant", kind="tool_call",
              meta={"tool_call_id": "c1", "name": "deploy", "arguments": {"env": "staging"}})  # o3
    s.observe("deploy ok: v2 on staging", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})  # o4
    s.observe("Checking the logs.", role="assistant", kind="tool_call",
              meta={"tool_call_id": "c2", "name": "logs", "arguments": "{}"})  # o5
    s.observe("no errors in the last 5 minutes", role="tool", kind="tool_result", meta={"tool_call_id": "c2"})  # o6
    s.observe("Staging runs v2 without errors.", role="assistant")  # o7
    s.observe("Good. Now production.", role="user")  # o8
    return s


def _all_text(rendered) -> str:
    return json.dumps(rendered, ensure_ascii=False) if not isinstance(rendered, str) else rendered


@pytest.fixture
def s(mem_ledger):
    return _session(mem_ledger)


@pytest.mark.parametrize("fmt", ["text", "openai", "anthropic"])
def test_every_span_is_tagged(s, fmt):
    out = render(s.spans(), format=fmt, reader=s, ids=True)
    text = _all_text(out)
    for span in s.spans():
        assert f"[{span.id}] " in text
    if fmt == "openai":
        check_openai(out)
        assert out[0]["content"] == "[o1] You are a careful agent."
        tool_msgs = [m for m in out if m["role"] == "tool"]
        assert tool_msgs[0]["content"] == "[o4] deploy ok: v2 on staging"
    if fmt == "anthropic":
        check_anthropic(out)
        assert out["system"] == "[o1] You are a careful agent."


def test_derived_tag_names_its_sources_and_stays_marked(s):
    d = s.rewrite(["o2", "o3", "o4"], "Deployed v2 to staging.", by="model")
    assert span_tag(d) == "[d1 ← o2–o4 · derived summary, generation 1 — not an observation]"
    assert span_tag(d, mark_derived=False) == "[d1 ← o2–o4]"
    text = render(s.spans(), format="text", reader=s, ids=True)
    assert "[d1 ← o2–o4 · derived summary, generation 1 — not an observation]\nDeployed v2 to staging." in text
    bare = render(s.spans(), format="openai", reader=s, ids=True, mark_derived=False)
    assert any(m["content"] == "[d1 ← o2–o4] Deployed v2 to staging." for m in bare)
    for fmt, check in (("openai", check_openai), ("anthropic", check_anthropic)):
        check(render(s.spans(), format=fmt, reader=s, ids=True))


def test_tags_are_stable_across_edits(s):
    before = render(s.spans(), format="openai", reader=s, ids=True)
    s.prune("o2")
    s.rewrite(["o7", "o8"], "Staging is fine; production next.")
    after = render(s.spans(), format="openai", reader=s, ids=True)
    # the tool exchange renders exactly as before: its tags did not move
    assert [m for m in before if m["role"] == "tool"] == [m for m in after if m["role"] == "tool"]


def test_half_pruned_pairs_stay_valid_with_ids(s):
    s.prune("o4")  # the result of c1
    s.prune("o5")  # the call of c2: its result is orphaned
    out = render(s.spans(), format="openai", reader=s, ids=True)
    check_openai(out)
    placeholder = [m for m in out if m["role"] == "tool"][0]["content"]
    assert "restore o4" in placeholder  # a placeholder has no tag of its own: it names the span
    assert any(m["role"] == "user" and m["content"].startswith("[o6] [output of tool call c2") for m in out)
    check_anthropic(render(s.spans(), format="anthropic", reader=s, ids=True))


def test_ids_off_is_the_default_output(s):
    for fmt in ("text", "openai", "anthropic"):
        assert render(s.spans(), format=fmt, reader=s) == render(s.spans(), format=fmt, reader=s, ids=False)
        assert "[o2]" not in _all_text(render(s.spans(), format=fmt, reader=s))


def test_ids_must_be_a_bool(s):
    with pytest.raises(InvalidInputError):
        render(s.spans(), ids="yes")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(["o2", "o3", "o4", "o5", "o6", "o7", "o8"]), unique=True, max_size=7),
       st.booleans())
def test_any_pruning_renders_valid_tagged_messages(pruned, summarize):
    ledger = Ledger.open("memory://", token_counter=EstimateCounter())
    s = _session(ledger)
    for span_id in pruned:
        s.prune(span_id)
    if summarize:
        rest = [sp.id for sp in s.spans() if sp.role != "system"][:2]
        if rest:
            s.rewrite(rest, "Summary of the start.")
    check_openai(render(s.spans(), format="openai", reader=s, ids=True))
    check_anthropic(render(s.spans(), format="anthropic", reader=s, ids=True))
    text = render(s.spans(), format="text", reader=s, ids=True)
    for span in s.spans():
        assert span_tag(span) in text


def test_session_render_passes_ids_through(s):
    assert s.render("openai", ids=True) == render(s.spans(), format="openai", reader=s, ids=True)
    assert s.render("text", ids=True, at=2) == "[system]\n[o1] You are a careful agent."
