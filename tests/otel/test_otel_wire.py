"""The wire: ``ctxledger otel export`` to a local OTLP/HTTP receiver on 127.0.0.1 that decodes the
protobuf with ``opentelemetry-proto``; the standard OTEL_EXPORTER_OTLP_* variables; bad input and an
endpoint that will not take the spans."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed: pip install 'ctxledger[otel]'")
pytest.importorskip("opentelemetry.proto", reason="opentelemetry-proto is not installed")

from click.testing import CliRunner

from engine import EstimateCounter, Ledger
from engine.cli import main
from engine.importers.messages import MessageRecorder
from engine.otel.ids import span_id, trace_id
from engine.otel.testing import OTLPReceiver


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "3")


@pytest.fixture
def db(tmp_path):
    url = f"sqlite:///{tmp_path / 'otel.db'}"
    with Ledger.open(url, token_counter=EstimateCounter()) as ledger:
        s = ledger.create_session("agent-7")
        rec = MessageRecorder(s)
        rec.record_request([{"role": "user", "content": "list the files"}], api="openai",
                           meta={"api": "openai", "model": "gpt-4o"})
        rec.record_reply({"id": "chatcmpl-9", "model": "gpt-4o", "usage": {"prompt_tokens": 12, "completion_tokens": 4},
                          "choices": [{"message": {"role": "assistant", "content": "a.py b.py"}, "finish_reason": "stop"}]},
                         api="openai", meta={"latency_ms": 30.0})
        a = s.observe("a.py: 120 lines", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
        b = s.observe("b.py: 80 lines", role="tool", kind="tool_result", meta={"tool_call_id": "c2"})
        s.rewrite([a.id, b.id], "a.py has 120 lines, b.py 80")
        ledger.create_session("other").observe("hello", role="user")
    return url


def run(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def attrs(span):
    out = {}
    for kv in span.attributes:
        v = kv.value
        which = v.WhichOneof("value")
        out[kv.key] = list(x.string_value for x in v.array_value.values) if which == "array_value" else getattr(v, which)
    return out


def test_export_sends_protobuf_spans_with_typed_attributes_resource_and_scope(db):
    with OTLPReceiver() as receiver:
        result = run("--db", db, "otel", "export", "agent-7", "--endpoint", receiver.endpoint, "--json")
        assert result.exit_code == 0, result.output
        spans = receiver.spans()
        resources, scopes = receiver.resources(), receiver.scopes()
        content_type = receiver.headers[0]["content-type"]
    summary = json.loads(result.output)
    assert summary["endpoint"] == receiver.endpoint + "/v1/traces"
    assert summary["sessions"][0]["spans"] == len(spans) and summary["sessions"][0]["calls"] == 1
    assert content_type == "application/x-protobuf"
    session = Ledger.open(db).session("agent-7")
    call = next(s for s in spans if s.name == "chat gpt-4o")
    assert call.trace_id == trace_id(session.id, 1).to_bytes(16, "big")
    assert call.span_id == span_id(session.id, "turn", 1).to_bytes(8, "big")
    a = attrs(call)
    assert a["gen_ai.usage.input_tokens"] == 12 and isinstance(a["gen_ai.usage.input_tokens"], int)
    assert a["gen_ai.response.finish_reasons"] == ["stop"]
    assert a["gen_ai.conversation.id"] == "agent-7"
    assert call.kind == 3  # SPAN_KIND_CLIENT
    rewrite = next(s for s in spans if s.name.startswith("ctxledger.rewrite"))
    ra = attrs(rewrite)
    assert ra["ctxledger.refused"] is False and ra["ctxledger.sources"] == "o3,o4"
    assert rewrite.parent_span_id == span_id(session.id, "turn", 4).to_bytes(8, "big")
    res = {kv.key: kv.value.string_value for kv in resources[0].attributes}
    assert res["service.name"] == "ctxledger" and res["openinference.project.name"] == "ctxledger"
    assert scopes[0].name == "ctxledger"


def test_exporting_twice_sends_the_same_ids_and_an_unnamed_session_is_not_sent(db):
    with OTLPReceiver() as receiver:
        assert run("--db", db, "otel", "export", "agent-7", "--endpoint", receiver.endpoint).exit_code == 0
        first = [(s.trace_id, s.span_id) for s in receiver.spans()]
        assert run("--db", db, "otel", "export", "agent-7", "--endpoint", receiver.endpoint).exit_code == 0
        both = [(s.trace_id, s.span_id) for s in receiver.spans()]
    assert both == first + first
    assert len(set(first)) == len(first)


def test_the_standard_environment_sets_endpoint_headers_compression_and_resource(db):
    with OTLPReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20k-123",
               "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_SERVICE_NAME": "my-agent",
               "OTEL_RESOURCE_ATTRIBUTES": "openinference.project.name=billing,deployment.environment=ci"}
        result = run("--db", db, "otel", "export", "agent-7", "other", env=env)
        assert result.exit_code == 0, result.output
        headers = receiver.headers
        res = {kv.key: kv.value.string_value for kv in receiver.resources()[0].attributes}
        names = {attrs(s)["gen_ai.conversation.id"] for s in receiver.spans()}
    assert headers[0]["authorization"] == "Bearer k-123"
    assert headers[0]["content-encoding"] == "gzip"
    assert res["service.name"] == "my-agent" and res["openinference.project.name"] == "billing"
    assert res["deployment.environment"] == "ci"
    assert names == {"agent-7", "other"}
    assert "agent-7: " in result.output and "other: " in result.output


def test_bad_input_is_refused_before_anything_is_sent_and_the_log_is_unchanged(db):
    with Ledger.open(db) as ledger:
        before = {i.name: i.position for i in ledger.sessions()}
    with OTLPReceiver() as receiver:
        unknown = run("--db", db, "otel", "export", "agent-7", "nope", "--endpoint", receiver.endpoint)
        bad_url = run("--db", db, "otel", "export", "agent-7", "--endpoint", "ftp://127.0.0.1/x")
        no_session = run("--db", db, "otel", "export", "--endpoint", receiver.endpoint)
        sent = receiver.spans()
    assert unknown.exit_code == 2 and "nope" in unknown.output and "Traceback" not in unknown.output
    assert bad_url.exit_code == 2 and "http(s) URL" in bad_url.output
    assert no_session.exit_code == 2
    assert sent == []
    with Ledger.open(db) as ledger:
        assert {i.name: i.position for i in ledger.sessions()} == before


@pytest.mark.parametrize("status", [500, 400])
def test_an_endpoint_that_refuses_the_spans_exits_3_with_one_line(db, status):
    with OTLPReceiver(fail_with=status) as receiver:
        result = run("--db", db, "otel", "export", "agent-7", "--endpoint", receiver.endpoint)
    assert result.exit_code == 3
    (line,) = result.output.strip().splitlines()  # one line: the exporter's own log folded into it
    assert line.startswith("ctxledger: error:") and "agent-7" in line and str(status) in line


def test_an_unreachable_endpoint_exits_3(db):
    with OTLPReceiver() as receiver:
        endpoint = receiver.endpoint  # a port that was just free; closed now
    result = run("--db", db, "otel", "export", "agent-7", "--endpoint", endpoint)
    assert result.exit_code == 3 and "did not accept" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_without_the_otel_extra_the_command_names_it_and_exits_2(db, tmp_path):
    blocker = tmp_path / "block" / "sitecustomize.py"
    blocker.parent.mkdir()
    blocker.write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'opentelemetry' or name.startswith('opentelemetry.'):\n"
        "            raise ImportError(f'No module named {name!r}')\n"
        "sys.meta_path.insert(0, _Block())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(blocker.parent)}
    proc = subprocess.run([sys.executable, "-c", "from engine.cli import main; main()", "--db", db, "otel", "export", "agent-7"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "ctxledger: error: OpenTelemetry export needs the otel extra: pip install 'ctxledger[otel]'"


def test_content_goes_on_the_wire_only_when_asked_for(db):
    def texts(receiver):
        return " ".join(kv.value.string_value for s in receiver.spans() for kv in s.attributes)

    with OTLPReceiver() as plain, OTLPReceiver() as flag, OTLPReceiver() as env:
        assert run("--db", db, "otel", "export", "agent-7", "--endpoint", plain.endpoint).exit_code == 0
        assert run("--db", db, "otel", "export", "agent-7", "--endpoint", flag.endpoint, "--content").exit_code == 0
        assert run("--db", db, "otel", "export", "agent-7", "--endpoint", env.endpoint,
                   env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}).exit_code == 0
        off = run("--db", db, "otel", "export", "agent-7", "--endpoint", plain.endpoint, "--no-content",
                  env={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"})
        assert off.exit_code == 0
        shown = {"plain": texts(plain), "flag": texts(flag), "env": texts(env)}
    assert "a.py b.py" not in shown["plain"] and "120 lines" not in shown["plain"]
    for key in ("flag", "env"):
        assert "a.py b.py" in shown[key] and "a.py has 120 lines, b.py 80" in shown[key]
