"""End to end against a real backend: Arize Phoenix from PyPI, run locally, queried back over its REST
API. Phoenix is large (its own virtualenv is ~850 MB, ~16 s to start here), so it is not part of the
``all`` extra: the test runs when ``$CTXLEDGER_TEST_PHOENIX`` names a ``phoenix`` executable or one is
on PATH, and skips with that reason otherwise. To run it:

    python3 -m venv /tmp/phoenix-venv && /tmp/phoenix-venv/bin/pip install arize-phoenix
    CTXLEDGER_TEST_PHOENIX=/tmp/phoenix-venv/bin/phoenix .venv/bin/python -m pytest tests/otel/test_otel_phoenix.py
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed: pip install 'ctxledger[otel]'")

import httpx
from click.testing import CliRunner

from engine import EstimateCounter, Ledger
from engine.cli import main
from engine.proxy.testing import free_port
from test_otel import proxied_conversation

PHOENIX = os.environ.get("CTXLEDGER_TEST_PHOENIX") or shutil.which("phoenix")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not PHOENIX, reason="Arize Phoenix is not installed: set CTXLEDGER_TEST_PHOENIX to its "
                                          "`phoenix` executable (pip install arize-phoenix, in a virtualenv of its own)"),
]


@contextlib.contextmanager
def phoenix(tmp_path):
    port, grpc = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))}
    env.update(PHOENIX_WORKING_DIR=str(tmp_path / "phoenix"), PHOENIX_PORT=str(port), PHOENIX_GRPC_PORT=str(grpc),
               PHOENIX_HOST="127.0.0.1", PHOENIX_TELEMETRY_ENABLED="false", DO_NOT_TRACK="1")
    log = open(tmp_path / "phoenix.log", "w")
    proc = subprocess.Popen([PHOENIX, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None:
                pytest.fail(f"phoenix exited: {(tmp_path / 'phoenix.log').read_text()[-2000:]}")
            time.sleep(0.5)
        else:
            pytest.fail("phoenix did not answer /healthz in 120 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def spans_of(url: str, expected: int) -> list[dict]:
    """Phoenix ingests in the background: poll until the spans are queryable."""
    deadline = time.monotonic() + 30
    spans: list[dict] = []
    while time.monotonic() < deadline:
        answer = httpx.get(f"{url}/v1/projects/ctxledger/spans", params={"limit": 1000}, timeout=10)
        if answer.status_code == 200:
            spans = answer.json()["data"]
            if len(spans) >= expected:
                return spans
        time.sleep(0.5)
    return spans


def test_phoenix_shows_the_calls_compactions_and_evaluations_grouped_by_session_once(tmp_path):
    db = f"sqlite:///{tmp_path / 'phoenix.db'}"
    with Ledger.open(db, token_counter=EstimateCounter()) as ledger:
        s = proxied_conversation(ledger, "phoenix-demo")
        a = s.observe("deploy of billing-api started at 14:02", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
        b = s.observe("deploy finished, 48 of 48 checks green", role="tool", kind="tool_result", meta={"tool_call_id": "c2"})
        s.rewrite([a.id, b.id], "billing-api deployed at 15:30; 52 of 52 checks green")
    with phoenix(tmp_path) as url:
        first = CliRunner().invoke(main, ["--db", db, "otel", "export", "phoenix-demo", "--endpoint", url, "--json"])
        assert first.exit_code == 0, first.output
        sent = json.loads(first.output)["sessions"][0]["spans"]
        spans = spans_of(url, sent)
        assert len(spans) == sent
        again = CliRunner().invoke(main, ["--db", db, "otel", "export", "phoenix-demo", "--endpoint", url])
        assert again.exit_code == 0
        time.sleep(3)  # time for a duplicate to land, if Phoenix kept duplicates
        assert len(spans_of(url, sent)) == sent  # same ids: stored once
        sessions = httpx.get(f"{url}/v1/projects/ctxledger/sessions", timeout=10).json()["data"]
    kinds = sorted(sp["span_kind"] for sp in spans)
    assert kinds.count("LLM") == 3 and kinds.count("EVALUATOR") == 2
    by_id = {sp["context"]["span_id"]: sp for sp in spans}
    rewrites = [sp for sp in spans if sp["name"].startswith("ctxledger.rewrite")]
    assert len(rewrites) == 2
    for rw in rewrites:
        assert rw["attributes"]["ctxledger.refused"] is False
        assert rw["parent_id"] in by_id
    compacted = [sp for sp in spans if sp["span_kind"] == "LLM" and sp["attributes"].get("gen_ai.conversation.compacted")]
    assert [sp["attributes"]["gen_ai.response.id"] for sp in compacted] == ["chatcmpl-3"]
    verdicts = [e for sp in spans if sp["span_kind"] == "EVALUATOR" for e in sp["events"]
                if e["name"] == "gen_ai.evaluation.result"]
    assert any("ungrounded" in str(e["attributes"]) for e in verdicts)
    (session,) = [x for x in sessions if x["session_id"] == "phoenix-demo"]
    assert len(session["traces"]) == len({sp["context"]["trace_id"] for sp in spans})
