"""Live export: the proxy hands each recorded call to ``engine.otel.live``, which sends the spans over
OTLP/HTTP from a BatchSpanProcessor; what arrives is what ``ctxledger otel export`` sends for the same
session (same ids), but the audit's evaluation spans."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed: pip install 'ctxledger[otel]'")
pytest.importorskip("starlette", reason="the proxy extra is not installed")

import httpx
import openai

from engine import EstimateCounter, Ledger
from engine.otel import export_sessions, live, otlp_exporter
from engine.otel.testing import OTLPReceiver
from engine.proxy import ProxyConfig, create_app
from engine.proxy.testing import FakeUpstream, free_port, serve

KEY = "sk-test-never-stored"


@pytest.fixture
def upstream():
    fake = FakeUpstream()
    with serve(fake.app) as origin:
        yield origin


@pytest.fixture(autouse=True)
def no_live_left_on():
    yield
    live.shutdown()


def _conversation(url: str, session: str) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0,
                           default_headers={"X-Ctxledger-Session": session})
    history = [{"role": "system", "content": "You are a release agent."},
               {"role": "user", "content": "Deploy billing-api 2.4.1 to staging."}]
    for ask in ("Run the smoke tests.", "Check the error rate."):
        answer = client.chat.completions.create(model="gpt-fake", messages=history)
        history += [{"role": "assistant", "content": answer.choices[0].message.content}, {"role": "user", "content": ask}]
    chunks = list(client.chat.completions.create(model="gpt-fake", messages=history, stream=True))
    history.append({"role": "assistant", "content": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)})
    # the client compacts: its own summary replaces four messages
    history = history[:1] + [{"role": "user", "content": "Summary: 2.4.1 on staging, smoke tests and error rate checked."}] \
        + [{"role": "user", "content": "Promote to production."}]
    client.chat.completions.create(model="gpt-fake", messages=history)
    with contextlib.suppress(openai.APIStatusError):
        client.chat.completions.create(model="gpt-fake", messages=history + [{"role": "user", "content": "again"}],
                                       extra_headers={"X-Fake-Status": "503"})


def test_the_proxy_exports_each_call_live_with_the_ids_a_later_export_sends(upstream, tmp_path):
    db = f"sqlite:///{tmp_path / 'live.db'}"
    with OTLPReceiver() as receiver:
        live.enable(receiver.endpoint)
        app = create_app(ProxyConfig(upstream=upstream), lambda: Ledger.open(db, token_counter=EstimateCounter()))
        with serve(app) as url:
            _conversation(url, "release-1")
        live.shutdown()  # flushes the batch processor
        sent_live = receiver.spans()
    with Ledger.open(db) as ledger, OTLPReceiver() as again:
        session = ledger.session("release-1")
        export_sessions([session], otlp_exporter(again.endpoint), audit=False)
        exported = again.spans()
    calls = [s for s in sent_live if s.name.startswith("chat ")]
    assert len(calls) == 5  # four answered calls and the one the upstream refused
    assert sum(1 for s in sent_live if s.name.startswith("ctxledger.rewrite ")) == 1
    failed = [s for s in calls if any(kv.key == "error.type" and kv.value.string_value == "503" for kv in s.attributes)]
    assert len(failed) == 1
    compacted = [s for s in calls if any(kv.key == "gen_ai.conversation.compacted" and kv.value.bool_value for kv in s.attributes)]
    assert len(compacted) == 2  # the two calls sent after the client's summary (one of them refused)
    assert sorted((s.trace_id, s.span_id, s.name) for s in sent_live) == sorted((s.trace_id, s.span_id, s.name) for s in exported)


def test_a_failing_session_never_reaches_the_caller():
    class Broken:
        id = "x"
        name = "broken"
        position = 3

        def event(self, position):
            raise OSError("disk gone")

    receiver_free = LiveExporterProbe()
    exporter = live.LiveExporter(receiver_free)
    assert exporter.recorded(Broken()) == 0
    assert exporter.failures == 1 and receiver_free.ended == []


class LiveExporterProbe:
    """A span processor that keeps what it was handed."""

    def __init__(self):
        self.ended = []

    def on_end(self, span):
        self.ended.append(span)

    def force_flush(self, timeout_millis=0):
        return True

    def shutdown(self):
        pass


def test_live_export_is_a_no_op_until_enabled_and_a_call_goes_out_when_it_ends():
    with Ledger.open("memory://") as ledger:
        s = ledger.create_session("quiet")
        s.observe("hi", role="user")
        assert not live.enabled()
        live.recorded(s)  # a no-op: nothing to export to
        probe = LiveExporterProbe()
        live.enable(processor=probe)
        s.observe("hello", role="assistant")  # no part count: the call may go on
        live.recorded(s)
        assert probe.ended == []
        s.observe("next question", role="user")  # it ended with the message before
        live.recorded(s)
        assert [sp.name for sp in probe.ended] == ["chat"]
        s.observe("answer", role="assistant", meta={"msg": "m2", "part": 0, "parts": 1})  # one part: it ended
        live.recorded(s)
        assert [sp.name for sp in probe.ended] == ["chat", "chat"]


def _blocker(tmp_path):
    blocker = tmp_path / "block" / "sitecustomize.py"
    blocker.parent.mkdir()
    blocker.write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'opentelemetry' or name.startswith('opentelemetry.'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, _Block())\n"
    )
    return str(blocker.parent)


def test_proxy_otel_without_the_extra_exits_2_naming_it(tmp_path, upstream):
    env = {**os.environ, "PYTHONPATH": _blocker(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", "from engine.cli import main; main()", "--db", f"sqlite:///{tmp_path / 'p.db'}",
         "proxy", "--upstream", upstream, "--listen", f"127.0.0.1:{free_port()}", "--otel"],
        capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    assert "pip install 'ctxledger[otel]'" in proc.stderr


def test_ctxledger_proxy_with_the_otlp_environment_exports_live_and_flushes_on_exit(tmp_path, upstream):
    port = free_port()
    with OTLPReceiver() as receiver:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.endpoint
        proc = subprocess.Popen(
            [sys.executable, "-c", "from engine.cli import main; main()", "--db", f"sqlite:///{tmp_path / 'p.db'}",
             "proxy", "--upstream", upstream, "--listen", f"127.0.0.1:{port}", "--quiet"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"http://127.0.0.1:{port}/ctxledger/health", timeout=1).status_code == 200:
                        break
                time.sleep(0.1)
            client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, max_retries=0)
            client.chat.completions.create(model="gpt-fake", messages=[{"role": "user", "content": "ping"}],
                                           extra_headers={"X-Ctxledger-Session": "cli-live"})
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
        spans = receiver.spans()
    assert f"live OpenTelemetry export to {receiver.endpoint}/v1/traces" in err
    assert [s.name for s in spans] == ["chat gpt-fake"]


def test_the_openai_agents_session_hands_each_add_items_to_live_export():
    pytest.importorskip("agents", reason="the openai-agents extra is not installed")
    import asyncio

    from engine.integrations.openai_agents import LedgerSession

    probe = LiveExporterProbe()
    live.enable(processor=probe)
    with Ledger.open("memory://", token_counter=EstimateCounter()) as ledger:
        session = LedgerSession("agents-live", ledger=ledger)

        async def turns():
            await session.add_items([{"role": "user", "content": "What is in the repo?"}])
            await session.add_items([{"role": "assistant", "content": "Two files."}])
            await session.add_items([{"role": "user", "content": "Which?"}])  # the call above ended

        asyncio.run(turns())
    calls = [s for s in probe.ended if s.attributes.get("openinference.span.kind") == "LLM"]
    assert len(calls) == 1 and calls[0].attributes["gen_ai.conversation.id"] == "agents-live"
    assert calls[0].attributes["ctxledger.turn.end"] == calls[0].attributes["ctxledger.position"]
