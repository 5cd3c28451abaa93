"""The OpenAI Responses API through the proxy (issue 23), with the official ``openai`` SDK against the
fake upstream: ``responses.create`` (streamed and not), ``previous_response_id`` chains, ``store=False``
clients that resend everything, ``responses.compact`` and ``context_management`` compaction (an
opaque derived span ``by="openai:compact"``)."""

from __future__ import annotations

import contextlib

import openai
import pytest

from engine import Ledger
from engine.proxy import ProxyConfig, create_app
from engine.proxy.testing import FakeUpstream, Reply, ToolCall, serve

KEY = "sk-responses-test-key"


@pytest.fixture
def fake():
    f = FakeUpstream()
    with serve(f.app) as origin:
        f.origin = origin
        yield f


@contextlib.contextmanager
def running(fake, tmp_path, **config):
    db = f"sqlite:///{tmp_path / 'responses.db'}"
    app = create_app(ProxyConfig(upstream=fake.origin, **config), lambda: Ledger.open(db))
    with serve(app) as url:
        yield openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0), app.state.proxy, db


def _session(db: str):
    ledger = Ledger.open(db)
    [info] = ledger.sessions()
    return ledger, ledger.session(info.name)


def _items(output) -> list[dict]:
    return [o.model_dump(exclude_none=True, warnings=False) for o in output]


def test_create_streamed_and_chained_by_previous_response_id_land_in_one_session(fake, tmp_path):
    with running(fake, tmp_path) as (client, proxy, db):
        r1 = client.responses.create(model="gpt-fake", instructions="You deploy services.", input="Deploy billing-api")
        assert r1.output_text == "You said: Deploy billing-api"
        r2 = client.responses.create(model="gpt-fake", input="Restart the workers", previous_response_id=r1.id)
        with client.responses.stream(model="gpt-fake", input="Check health", previous_response_id=r2.id) as stream:
            deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
            final = stream.get_final_response()
        assert "".join(deltas) == final.output_text == "You said: Check health"
        assert proxy.health.report()["counts"]["store_errors"] == 0
    ledger, s = _session(db)
    assert s.name.startswith("proxy:deploy-billing-api:")  # no header: the chain followed the response ids
    assert [(x.role, x.text) for x in s.spans()] == [
        ("system", "You deploy services."), ("user", "Deploy billing-api"), ("assistant", "You said: Deploy billing-api"),
        ("user", "Restart the workers"), ("assistant", "You said: Restart the workers"),
        ("user", "Check health"), ("assistant", "You said: Check health"),
    ]
    spans = s.spans()
    assert spans[3].meta["request"]["previous_response_id"] == r1.id and spans[2].meta["reply"]["reply_id"] == r1.id
    assert spans[5].meta["request"]["stream"] is True and spans[6].meta["reply"]["status"] == 200
    assert not any(type(e).__name__ == "Pruned" for e in s.events())
    ledger.close()


def test_a_store_false_tool_loop_resends_everything_and_only_the_new_items_are_recorded(fake, tmp_path):
    def tools(api, body):
        last = body["messages"][-1]["content"] if body["messages"] else ""
        return Reply(text="Two files.") if "a.py" in last else Reply(tool_calls=[ToolCall("ls", {"path": "."})])

    fake.responder = tools
    with running(fake, tmp_path, session="agent") as (client, _, db):
        history: list[dict] = [{"role": "user", "content": "What files are here?"}]
        r = client.responses.create(model="m", input=history, store=False, reasoning={"summary": "auto"})
        history += _items(r.output)
        call = next(o for o in r.output if o.type == "function_call")
        history.append({"type": "function_call_output", "call_id": call.call_id, "output": "a.py b.py"})
        history.append({"role": "user", "content": "a.py and b.py, then?"})
        r = client.responses.create(model="m", input=history, store=False)
        assert r.output_text == "Two files."
    ledger, s = _session(db)
    kinds = [(x.role, x.kind) for x in s.spans()]
    assert kinds == [("user", "message"), ("assistant", "thinking"), ("assistant", "tool_call"), ("tool", "tool_result"),
                     ("user", "message"), ("assistant", "message")]
    tool_call = s.spans()[2]
    assert tool_call.meta["tool_call_id"] == call.call_id and tool_call.meta["arguments"] == {"path": "."}
    assert s.spans()[3].meta["tool_call_id"] == call.call_id
    assert not any(type(e).__name__ == "Pruned" for e in s.events())  # the resent items matched
    ledger.close()


def test_responses_compact_is_an_opaque_derived_span_of_what_it_replaced(fake, tmp_path):
    with running(fake, tmp_path, session="agent") as (client, proxy, db):
        history: list[dict] = []
        for turn in ("Run migration 0042", "Restart the workers", "Check the health endpoint"):
            history.append({"role": "user", "content": turn})
            history += _items(client.responses.create(model="m", input=history, store=False).output)
        compacted = client.responses.compact(model="m", input=history)
        assert compacted.output[-1].type == "compaction"
        history = [*_items(compacted.output), {"role": "user", "content": "Anything left?"}]
        client.responses.create(model="m", input=history, store=False)
        counts = proxy.health.report()["counts"]
        assert counts["compactions_done"] == 1 and counts["compactions_attempted"] == 1
    ledger, s = _session(db)
    [rewrite] = [e for e in s.events() if type(e).__name__ == "Rewritten"]
    assert rewrite.by == "openai:compact" and rewrite.meta["opaque"] is True
    assert rewrite.meta["encrypted_content"] == compacted.output[-1].encrypted_content
    replaced = {s.original(i).text for i in rewrite.inputs}
    assert replaced == {"You said: Run migration 0042", "You said: Restart the workers", "You said: Check the health endpoint"}
    # the user messages the compaction kept stay observed and live; after it only the new turn came in
    assert [x.text for x in s.spans() if x.observed][:3] == ["Run migration 0042", "Restart the workers", "Check the health endpoint"]
    assert [x.text for x in s.spans()][-2:] == ["Anything left?", "You said: Anything left?"]
    assert not any(type(e).__name__ == "Pruned" for e in s.events())
    ledger.close()


def test_context_management_compaction_in_create_replaces_the_whole_input(fake, tmp_path):
    with running(fake, tmp_path, session="agent") as (client, _, db):
        history: list[dict] = [{"role": "user", "content": "word " * 200}]
        history += _items(client.responses.create(model="m", input=history, store=False).output)
        history.append({"role": "user", "content": "Go on"})
        r = client.responses.create(model="m", input=history, store=False,
                                    context_management=[{"type": "compaction", "compact_threshold": 100}])
        assert r.output[0].type == "compaction"
    ledger, s = _session(db)
    [rewrite] = [e for e in s.events() if type(e).__name__ == "Rewritten"]
    assert rewrite.by == "openai:compact" and rewrite.meta["opaque"] is True and len(rewrite.inputs) == 3
    assert s.spans()[-1].text == "You said: Go on"
    ledger.close()
