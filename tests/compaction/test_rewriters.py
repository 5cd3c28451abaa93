"""Rewriters: the deterministic extractive one, and the OpenAI and Anthropic adapters driven through
the real SDKs against a fake HTTP server on 127.0.0.1 (success, 5xx with retries, timeouts, malformed
responses). A failure is a RewriterError and leaves the log unchanged."""

from __future__ import annotations

import sys
import uuid

import pytest
from fake_model_server import FakeServer, openai_ok

from engine import (
    AnthropicRewriter,
    Compactor,
    ExtractiveRewriter,
    InvalidInputError,
    OpenAIRewriter,
    RewriteOldest,
    Rewriter,
    RewriterError,
)
from engine.events import Rederived

# -- the fake server (FakeServer and the `server` fixture: tests/fake_model_server.py, tests/conftest.py)


def anthropic_ok(text):
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


PROVIDERS = {
    "openai": {
        "make": lambda port, **kw: OpenAIRewriter("local-model", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", **kw),
        "ok": openai_ok,
        "path": "/v1/chat/completions",
        "malformed": [{"unexpected": True}, {**openai_ok("x"), "choices": []}, b"this is not json"],
        "prompt": lambda body: body["messages"][1]["content"],
    },
    "anthropic": {
        "make": lambda port, **kw: AnthropicRewriter("claude-test", base_url=f"http://127.0.0.1:{port}", api_key="k", **kw),
        "ok": anthropic_ok,
        "path": "/v1/messages",
        "malformed": [{"unexpected": True}, {**anthropic_ok("x"), "content": []}, b"this is not json"],
        "prompt": lambda body: body["messages"][0]["content"],
    },
}


def session_with_summary(ledger):
    s = ledger.create_session("rw-" + uuid.uuid4().hex[:8])
    s.observe("GET /health -> 503 from billing-api at 14:02", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
    s.observe("auth-api timed out at 14:07", role="user")
    d = s.rewrite(["o1", "o2"], "two outages")
    return s, d


def log_of(s):
    return [(ev.originator_version, type(ev).__name__) for ev in s.events()]


# -- model adapters ------------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_adapter_success_rederives_from_the_originals(provider, server, mem_ledger):
    p = PROVIDERS[provider]
    s, d = session_with_summary(mem_ledger)
    server.script.append((200, p["ok"]("billing-api 503 at 14:02; auth-api timeout at 14:07"), 0))
    rewriter = p["make"](server.port)
    assert isinstance(rewriter, Rewriter)
    span = s.rederive(d.id, rewriter=rewriter)
    assert span.text == "billing-api 503 at 14:02; auth-api timeout at 14:07"
    ev = s.event(s.position)
    assert isinstance(ev, Rederived) and ev.by == rewriter.name
    (req,) = server.requests
    assert req["path"] == p["path"]
    prompt = p["prompt"](req["body"])
    assert "GET /health -> 503 from billing-api at 14:02" in prompt and "auth-api timed out" in prompt
    assert "two outages" not in prompt  # the derived text is never fed back


@pytest.mark.parametrize("provider", PROVIDERS)
def test_adapter_retries_server_errors_then_succeeds(provider, server, mem_ledger):
    p = PROVIDERS[provider]
    s, d = session_with_summary(mem_ledger)
    server.script += [(500, {"error": {"message": "boom"}}, 0), (503, {"error": {"message": "busy"}}, 0), (200, p["ok"]("ok text"), 0)]
    assert s.rederive(d.id, rewriter=p["make"](server.port, max_retries=2)).text == "ok text"
    assert len(server.requests) == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_adapter_gives_up_after_retries_and_writes_nothing(provider, server, ledger):
    p = PROVIDERS[provider]
    s, d = session_with_summary(ledger)
    before = log_of(s)
    server.script += [(500, {"error": {"message": "boom"}}, 0)] * 3
    with pytest.raises(RewriterError, match="InternalServerError") as info:
        s.rederive(d.id, rewriter=p["make"](server.port, max_retries=2))
    assert "nothing was written" in info.value.message
    assert len(server.requests) == 3
    assert log_of(s) == before and s.span(d.id).text == "two outages"
    assert log_of(ledger.session(s.name)) == before


@pytest.mark.parametrize("provider", PROVIDERS)
def test_adapter_timeout_is_a_rewriter_error(provider, server, mem_ledger):
    p = PROVIDERS[provider]
    s, d = session_with_summary(mem_ledger)
    before = log_of(s)
    server.script.append((200, p["ok"]("too late"), 1.5))
    with pytest.raises(RewriterError, match="Timeout"):
        s.rederive(d.id, rewriter=p["make"](server.port, timeout=0.2, max_retries=0))
    assert log_of(s) == before and s.span(d.id).text == "two outages"


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("which", [0, 1, 2])
def test_adapter_malformed_response_is_a_rewriter_error(provider, which, server, mem_ledger):
    p = PROVIDERS[provider]
    s, d = session_with_summary(mem_ledger)
    before = log_of(s)
    server.script.append((200, p["malformed"][which], 0))
    with pytest.raises(RewriterError):
        s.rederive(d.id, rewriter=p["make"](server.port, max_retries=0))
    assert log_of(s) == before


@pytest.mark.parametrize("provider", PROVIDERS)
def test_adapter_client_error_is_not_retried(provider, server, mem_ledger):
    p = PROVIDERS[provider]
    s, d = session_with_summary(mem_ledger)
    server.script.append((400, {"error": {"message": "bad model"}}, 0))
    with pytest.raises(RewriterError, match="BadRequestError"):
        s.rederive(d.id, rewriter=p["make"](server.port, max_retries=2))
    assert len(server.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_adapter_unreachable_server_is_a_rewriter_error(provider, mem_ledger):
    s, d = session_with_summary(mem_ledger)
    before = log_of(s)
    with pytest.raises(RewriterError, match="Connection"):
        s.rederive(d.id, rewriter=PROVIDERS[provider]["make"](1, max_retries=0, timeout=2))
    assert log_of(s) == before


@pytest.mark.parametrize("provider", PROVIDERS)
def test_compactor_with_a_failing_model_writes_nothing(provider, server, mem_ledger):
    p = PROVIDERS[provider]
    s = mem_ledger.create_session("cw-" + uuid.uuid4().hex[:8])
    for i in range(40):
        s.observe(f"event {i}: status 503 at 14:{i:02d} " + "detail " * 40, role="user")
    before = log_of(s)
    server.script += [(500, {"error": {"message": "boom"}}, 0)] * 2
    c = Compactor(budget=2_000, keep_last_turns=2, strategies=[RewriteOldest(p["make"](server.port, max_retries=1), summary_tokens=100)])
    with pytest.raises(RewriterError):
        c.step(s)
    assert log_of(s) == before
    server.script.append((200, p["ok"]("events 0-9: status 503"), 0))
    result = c.step(s)
    assert result.actions[0].command == "rewrite"
    assert s.span(result.actions[0].result).text == "events 0-9: status 503"


def test_missing_sdk_is_a_rewriter_error_naming_the_extra(monkeypatch, mem_ledger):
    s, d = session_with_summary(mem_ledger)
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(RewriterError, match=r"ctxledger\[openai\]"):
        s.rederive(d.id, rewriter=OpenAIRewriter("m", base_url="http://127.0.0.1:1/v1"))
    assert s.span(d.id).text == "two outages"


def test_bad_adapter_settings_are_typed_errors():
    with pytest.raises(InvalidInputError):
        OpenAIRewriter("")
    with pytest.raises(InvalidInputError):
        AnthropicRewriter("m", timeout=0)
    with pytest.raises(InvalidInputError):
        OpenAIRewriter("m", max_retries=-1)
    with pytest.raises(InvalidInputError):
        OpenAIRewriter("m", max_tokens_param="tokens")


# -- extractive ------------------------------------------------------------------------------------------


def _spans(mem_ledger, texts):
    s = mem_ledger.create_session("ex-" + uuid.uuid4().hex[:8])
    return [s.observe(t) for t in texts]


def test_extractive_keeps_specific_sentences_verbatim_and_in_order(mem_ledger):
    spans = _spans(
        mem_ledger,
        [
            "Okay. Let me look into that for you. The billing-api returned HTTP 503 at 14:02.",
            "Thanks, that is helpful. auth-api timed out after 30s at 14:07 (trace 9f3a).",
            "Sounds good, carry on.",
        ],
    )
    out = ExtractiveRewriter(max_tokens=60).rewrite(spans)
    lines = out.splitlines()
    assert lines[0].startswith("Extract of 3 observations")
    assert lines[1:] == [
        "- o1: The billing-api returned HTTP 503 at 14:02.",
        "- o2: auth-api timed out after 30s at 14:07 (trace 9f3a).",
    ]


def test_extractive_is_deterministic_and_within_budget(mem_ledger):
    texts = [f"Step {i}: deploy job-{i} finished with exit code {i % 3} at 10:{i:02d}. Nothing else." for i in range(60)]
    spans = _spans(mem_ledger, texts)
    r = ExtractiveRewriter(max_tokens=120)
    a, b = r.rewrite(spans), r.rewrite(spans)
    assert a == b
    assert r.counter.count(a) <= 120 + len(a.splitlines())  # newline joins aside
    for line in a.splitlines()[1:]:
        sid, sentence = line[2:].split(": ", 1)
        assert sentence in texts[int(sid[1:]) - 1]


def test_extractive_bad_input_is_a_typed_error(mem_ledger):
    with pytest.raises(InvalidInputError):
        ExtractiveRewriter(max_tokens=3)
    with pytest.raises(InvalidInputError):
        ExtractiveRewriter().rewrite([])
    with pytest.raises(InvalidInputError):
        ExtractiveRewriter().rewrite(["not a span"])
