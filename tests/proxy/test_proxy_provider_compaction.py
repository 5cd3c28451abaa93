"""Anthropic's server-side context management through the proxy (issue 23), with the official
``anthropic`` SDK's beta messages against the fake upstream: a ``compaction`` block is a derived span
``by="anthropic:compact_20260112"`` of what it replaced (streamed or not), the later request that
drops everything before it is no client prune, cleared tool uses are the provider's prunes, and
thinking blocks are recorded."""

from __future__ import annotations

import contextlib

import anthropic
import pytest

from engine import Ledger
from engine.proxy import ProxyConfig, create_app
from engine.proxy.testing import FakeUpstream, Reply, ToolCall, serve

COMPACT = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50}}]}
BETAS = ["compact-2026-01-12"]


@pytest.fixture
def fake():
    f = FakeUpstream()
    with serve(f.app) as origin:
        f.origin = origin
        yield f


@contextlib.contextmanager
def running(fake, tmp_path):
    db = f"sqlite:///{tmp_path / 'anthropic.db'}"
    app = create_app(ProxyConfig(upstream=fake.origin, session="claude"), lambda: Ledger.open(db))
    with serve(app) as url:
        yield anthropic.Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0), app.state.proxy, db


def _blocks(message) -> list[dict]:
    return [b.model_dump(exclude_none=True, warnings=False) for b in message.content]


@pytest.mark.parametrize("stream", [False, True])
def test_a_compaction_block_is_a_derived_span_and_dropping_what_it_replaced_is_no_prune(fake, tmp_path, stream):
    with running(fake, tmp_path) as (client, proxy, db):
        history: list[dict] = []
        compacted = None
        for turn in ("Run migration 0042 on billing-api", "Restart the workers of billing-api", "Check the health endpoint"):
            history.append({"role": "user", "content": turn})
            kwargs = dict(model="claude-fake", max_tokens=100, system="You deploy.", messages=history,
                          betas=BETAS, context_management=COMPACT)
            if stream:
                with client.beta.messages.stream(**kwargs) as st:
                    reply = st.get_final_message()
            else:
                reply = client.beta.messages.create(**kwargs)
            blocks = _blocks(reply)
            history.append({"role": "assistant", "content": blocks})
            if blocks[0]["type"] == "compaction":
                compacted = blocks[0]["content"]
                history = history[-1:]  # the API ignores what came before the block: the client drops it
        assert compacted is not None
        history.append({"role": "user", "content": "Anything else?"})
        client.beta.messages.create(model="claude-fake", max_tokens=100, system="You deploy.", messages=history, betas=BETAS)
        assert proxy.health.report()["counts"]["compactions_done"] >= 1
    with Ledger.open(db) as ledger:
        s = ledger.session("claude")
        events = list(s.events())
        [rewrite, *_] = [e for e in events if type(e).__name__ == "Rewritten"]
        assert rewrite.by == "anthropic:compact_20260112" and rewrite.text == compacted
        assert not rewrite.meta.get("opaque")
        replaced = [s.original(i).text for i in rewrite.inputs]
        assert "Run migration 0042 on billing-api" in replaced and "You deploy." not in replaced
        assert not any(type(e).__name__ == "Pruned" and e.by == "client" for e in events)
        assert [x.text for x in s.spans()][-2:] == ["Anything else?", "You said: Anything else?"]
        assert s.spans()[0].text == "You deploy."


def test_cleared_tool_uses_are_the_providers_prunes_of_the_oldest_results(fake, tmp_path):
    def loop(api, body):
        n = sum(1 for m in body["messages"] for b in (m["content"] if isinstance(m["content"], list) else [])
                if isinstance(b, dict) and b.get("type") == "tool_result")
        return Reply(text="Done.") if n >= 4 else Reply(tool_calls=[ToolCall("read", {"n": n})])

    fake.responder = loop
    edits = {"edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 2}}]}
    with running(fake, tmp_path) as (client, _, db):
        history: list[dict] = [{"role": "user", "content": "Read four files."}]
        while True:
            reply = client.beta.messages.create(model="m", max_tokens=50, messages=history, context_management=edits,
                                                betas=["context-management-2025-06-27"])
            history.append({"role": "assistant", "content": _blocks(reply)})
            calls = [b for b in reply.content if b.type == "tool_use"]
            if not calls:
                break
            history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0].id,
                                                         "content": f"contents of file {calls[0].input['n']}"}]})
    with Ledger.open(db) as ledger:
        s = ledger.session("claude")
        pruned = [e for e in s.events() if type(e).__name__ == "Pruned"]
        assert pruned and all(e.by == "anthropic:clear_tool_uses_20250919" for e in pruned)
        texts = [s.original(e.span_id).text for e in pruned]
        assert texts == ["contents of file 0", "contents of file 1"]  # the oldest, each once
        assert [x.text for x in s.spans() if x.kind == "tool_result"] == ["contents of file 2", "contents of file 3"]


def test_thinking_blocks_are_recorded_and_dropping_them_later_changes_nothing(fake, tmp_path):
    with running(fake, tmp_path) as (client, _, db):
        thought = {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "The user wants a plan.", "signature": "sig-1"},
            {"type": "text", "text": "Here is the plan."}]}
        history = [{"role": "user", "content": "Plan the rollout."}, thought, {"role": "user", "content": "Go."}]
        client.messages.create(model="m", max_tokens=20, messages=history)
        without = {"role": "assistant", "content": [{"type": "text", "text": "Here is the plan."}]}
        client.messages.create(model="m", max_tokens=20,
                               messages=[history[0], without, history[2], {"role": "assistant", "content": "You said: Go."},
                                         {"role": "user", "content": "Next."}])
    with Ledger.open(db) as ledger:
        s = ledger.session("claude")
        [thinking] = [x for x in s.spans() if x.kind == "thinking"]
        assert thinking.role == "assistant" and thinking.text == "The user wants a plan."
        assert not any(type(e).__name__ == "Pruned" for e in s.events())
