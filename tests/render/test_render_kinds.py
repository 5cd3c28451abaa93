"""Thinking and unmodelled items: kept in the log and shown in text; the model's reasoning is never
sent back to a provider as text, and what remains is valid for both providers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from provider_rules import check_anthropic, check_openai

from engine import EstimateCounter, InvalidInputError, Ledger


def _session():
    return Ledger.open("memory://", token_counter=EstimateCounter()).create_session("k")


def test_thinking_is_shown_in_text_and_left_out_of_provider_messages():
    s = _session()
    s.observe("fix the flaky test", role="user")
    s.observe("The retry loop races the timer.", role="assistant", kind="thinking", meta={"signature": "sig"})
    s.observe("Fixed: the timer is awaited.", role="assistant")
    s.observe('{"type": "compaction_marker"}', role="user", kind="other", meta={"item": {"type": "compaction_marker"}})
    text = s.render("text")
    assert "[assistant thinking]\nThe retry loop races the timer." in text
    openai = s.render("openai")
    assert [m["content"] for m in openai] == ["fix the flaky test", "Fixed: the timer is awaited.", '{"type": "compaction_marker"}']
    anthropic = s.render("anthropic")
    assert "races the timer" not in str(anthropic)
    check_openai(openai)
    check_anthropic(anthropic)
    assert s.original("o2").kind == "thinking" and s.original("o2").meta == {"signature": "sig"}


def test_thinking_belongs_to_the_assistant_and_the_log_is_unchanged_when_refused():
    s = _session()
    s.observe("hello", role="user")
    for role in ("user", "tool", "system"):
        try:
            s.observe("pondering", role=role, kind="thinking")
        except InvalidInputError:
            pass
        else:
            raise AssertionError(f"thinking by {role} was accepted")
    assert s.position == 2


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(["user", "assistant", "thinking", "other"]), min_size=1, max_size=12))
def test_any_mix_of_kinds_renders_valid_provider_messages(kinds):
    s = _session()
    for i, k in enumerate(kinds):
        if k == "thinking":
            s.observe(f"reasoning {i}", role="assistant", kind="thinking")
        elif k == "other":
            s.observe(f"item {i}", role="user", kind="other")
        else:
            s.observe(f"{k} says {i}", role=k)
    openai = s.render("openai")
    assert not any("reasoning" in m["content"] for m in openai)
    if openai:
        check_openai(openai)
    if any(m["role"] == "user" for m in openai):
        check_anthropic(s.render("anthropic"))
