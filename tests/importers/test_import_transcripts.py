"""Importing Claude Code, Codex, OpenHands and messages transcripts: every observation in order,
compactions as derived spans by the tool, summaries of summaries as recorded violations, harness text
marked, sidechains and subagents as linked sessions, the real session, idempotent re-import."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine import Ledger
from engine.errors import DuplicateSessionError
from engine.importers import import_path
from engine.importers.base import Checkpoint, session_info
from engine.importers.claude_code import split_summary

DATA = Path(__file__).parents[1] / "data" / "transcripts"
CC = DATA / "claude_code" / "7c2d9e10-5b7a-4c1e-9f00-aa11bb22cc33.jsonl"
CC_NAME = "claude-code:7c2d9e10-5b7a-4c1e-9f00-aa11bb22cc33"
REAL = DATA / "real" / "ae4a77f8-aedd-4bc1-888f-c94edc91af04.jsonl"


@pytest.fixture
def ledger():
    return Ledger.open("memory://")


def rewrites(session):
    return [ev for ev in session.events() if ev.type == "Rewritten"]


def test_claude_code_every_line_type(ledger):
    result = import_path(ledger, CC)
    s = result.session
    assert s.name == CC_NAME and not s.strict
    r = result.reports[0]
    assert r.skipped == {"summary (session title)": 1, "file-history-snapshot": 1, "progress": 1,
                         "queue-operation:remove": 1, "system:turn_duration": 1, "system:api_error": 1}
    assert r.unknown == {"future-line-type": 1}
    assert Checkpoint.of(s).unknown == {"future-line-type": 1}  # the meta note
    observed = [ev for ev in s.events() if ev.type == "Observed"]
    first = observed[:9]
    assert [(e.role, e.kind) for e in first] == [
        ("user", "message"), ("user", "message"), ("assistant", "thinking"), ("assistant", "message"),
        ("assistant", "tool_call"), ("tool", "tool_result"), ("user", "message"), ("user", "message"),
        ("assistant", "tool_call")]
    assert first[0].meta["harness"] == "local-command-caveat"
    assert first[1].text.startswith("Checkout fails with HTTP 503") and "harness" not in first[1].meta
    assert first[2].meta["type"] == "thinking" and first[2].meta["message_id"] == first[3].meta["message_id"] == "msg_01"
    assert first[4].meta["tool_call_id"] == "toolu_01" and first[4].meta["arguments"]["command"].startswith("kubectl")
    assert first[5].meta["tool_call_id"] == "toolu_01" and "req-7781" in first[5].text
    assert first[6].text == "also check auth-service please" and first[6].meta["queued"] is True
    assert first[7].meta["harness"] == "task-notification"
    errors = [e for e in observed if e.meta.get("is_error")]
    assert len(errors) == 1 and errors[0].text == "exit code 1"
    assert all(e.meta.get("timestamp") and e.meta.get("line") for e in observed)


def test_claude_code_compactions(ledger):
    s = import_path(ledger, CC).session
    d1, d2, d3 = rewrites(s)
    assert (d1.by, d1.generation, d1.violation) == ("claude-code:compact:auto", 1, False)
    assert d1.text.startswith("Summary:\n1. The user reported") and "read the full transcript" not in d1.text
    assert d1.meta["harness_preface"].startswith("This session is being continued")
    assert d1.meta["preTokens"] == 167094 and d1.meta["trigger"] == "auto"
    # the second compaction read the first summary: a summary of a summary, recorded with its generation
    assert (d2.by, d2.generation, d2.violation) == ("claude-code:compact:manual", 2, True)
    assert "d1" in d2.inputs and d2.meta["compaction_transcript"] == f"{CC_NAME}/agent-acompact-5e1f00"
    # the partial compaction kept its preserved segment live
    assert d3.generation == 3
    live = s.spans()
    assert [sp.text for sp in live[1:]] == ["Thanks. Is checkout green now?", "Yes: no 503s since the rollout."]
    # the harness trailer after the first summary is an observed, marked span
    trailers = [ev for ev in s.events() if ev.type == "Observed" and ev.meta.get("harness") == "compact-trailer"]
    assert trailers and "Please continue the conversation" in trailers[0].text
    assert s.audit().of_kind("generation-exceeded")
    then = s.audit(at=d2.position)  # while the second summary was live
    assert not then.ok and any(f.value == "14:20" for f in then.findings)  # the invented deploy time


def test_split_summary_keeps_the_model_text_only():
    pre, body, trail = split_summary("This session is being continued from a previous conversation that ran out "
                                     "of context.\n\nSummary:\nA.\n\nPlease continue the conversation from where we "
                                     "left off without asking the user any further questions.")
    assert pre.startswith("This session") and body == "Summary:\nA." and trail.startswith("Please continue")
    assert split_summary("just text") == ("", "just text", "")


def test_sidechains_and_subagents_are_linked_sessions(ledger):
    result = import_path(ledger, CC)
    names = [s.name for s in result.sessions]
    assert names == [CC_NAME, f"{CC_NAME}/sidechain", f"{CC_NAME}/agent-a91b2c", f"{CC_NAME}/agent-acompact-5e1f00"]
    side = ledger.session(f"{CC_NAME}/sidechain")
    assert [sp.text for sp in side.spans()] == ["Search the repo for timeout_ms", "Found timeout_ms in /srv/auth/config.yaml only."]
    assert session_info(side)["parent"] == CC_NAME
    call = ledger.session(f"{CC_NAME}/agent-acompact-5e1f00")
    assert session_info(call)["parent"] == CC_NAME and session_info(call)["kind"] == "compaction-call"
    sub = ledger.session(f"{CC_NAME}/agent-a91b2c")
    assert [sp.kind for sp in sub.spans()] == ["message", "tool_call", "tool_result", "message"]


def test_reimport_is_idempotent_and_growth_is_taken(ledger, tmp_path):
    lines = CC.read_bytes().splitlines(keepends=True)
    f = tmp_path / CC.name
    shutil.copytree(CC.parent / CC.stem, tmp_path / CC.stem)  # its subagents, laid out as Claude Code writes them
    f.write_bytes(b"".join(lines[:20]))  # stops right after a compact boundary: waits for its summary
    first = import_path(ledger, f)
    s = first.session
    assert first.report.last_line == 19
    again = import_path(ledger, f)
    assert again.report.already_imported is False and ledger.session(s.name).position == s.position
    f.write_bytes(b"".join(lines))
    import_path(ledger, f)
    import_path(ledger, f)
    whole = import_path(Ledger.open("memory://"), CC).session
    grown = ledger.session(s.name)
    assert [(sp.id, sp.text, sp.generation, sp.sources) for sp in grown.spans()] == \
        [(sp.id, sp.text, sp.generation, sp.sources) for sp in whole.spans()]
    assert import_path(ledger, f).report.already_imported


def test_codex_local_and_remote_compaction(ledger):
    result = import_path(ledger, DATA / "codex", format="codex")
    local, remote = result.sessions
    assert local.name == "codex:0199a3c4-1111-7222-8333-444455556666"
    c1, c2 = rewrites(local)
    assert c1.by == "codex:compact:local" and c1.text.startswith("The export job was OOM-killed")
    assert c1.meta["harness_preface"].startswith("Another language model")
    assert (c2.generation, c2.violation) == (2, True)  # Codex's summarizer read the earlier summary
    kept = [sp.text for sp in local.spans() if sp.role == "user" and sp.observed]
    assert "The nightly export job fails with exit code 137. Find out why." in kept  # recent user messages stay
    (r,) = rewrites(remote)
    assert r.by == "codex:compact:remote" and r.meta["encrypted"] and r.meta["window_number"] == 2
    texts = [sp.text for sp in remote.spans()]
    assert "Go ahead." in texts and "You are Codex." in texts  # retained items stay observed
    assert not any("rg" in t and "/v1/orders" in t for t in texts[:4])  # the call was compacted away
    assert result.reports[0].unknown == {"response_item:web_search_call": 1}


@pytest.mark.parametrize("version", ["v0", "v1"])
def test_openhands_condensation(ledger, version):
    s = import_path(ledger, DATA / "openhands" / version).session
    rw = rewrites(s)
    assert rw and all(ev.by == "openhands:condenser" for ev in rw)
    assert "summary_offset" in rw[0].meta
    if version == "v0":
        assert [ev.generation for ev in rw] == [1, 2] and rw[1].violation
        assert [ev.span_id for ev in s.events() if ev.type == "Pruned"] == ["o2"]  # forgotten, no summary
    else:
        assert rw[0].sources == ("o3", "o4", "o5", "o6", "o7", "o8")
        assert import_path(ledger, DATA / "openhands" / version).report.already_imported


def test_messages_log_feeds_the_recorder(ledger):
    s = import_path(ledger, DATA / "messages" / "openai.jsonl").session
    d1, d2 = rewrites(s)
    assert d1.by == "client" and not d1.violation and d2.violation
    s2 = import_path(ledger, DATA / "messages" / "anthropic.jsonl", format="messages").session
    assert [sp.kind for sp in s2.spans()] == ["message", "message", "message", "tool_call", "tool_result", "message"]


def test_name_clash_with_different_content_is_refused(ledger, tmp_path):
    import_path(ledger, CC, name="shop")
    before = ledger.session("shop").position
    other = tmp_path / "other.jsonl"
    shutil.copy(DATA / "messages" / "openai.jsonl", other)
    with pytest.raises(DuplicateSessionError, match="holds a claude-code transcript"):
        import_path(ledger, other, format="messages", name="shop")
    changed = tmp_path / "changed.jsonl"
    changed.write_bytes(CC.read_bytes().replace(b"13:58", b"13:59"))
    with pytest.raises(DuplicateSessionError, match="different transcript"):
        import_path(ledger, changed, name="shop")
    ledger.create_session("mine")
    with pytest.raises(DuplicateSessionError, match="no imported transcript"):
        import_path(ledger, CC, name="mine")
    assert ledger.session("shop").position == before and ledger.session("mine").position == 1


def test_the_real_session(ledger):
    result = import_path(ledger, REAL)
    s = result.session
    assert s.name == "claude-code:ae4a77f8-aedd-4bc1-888f-c94edc91af04"
    (d,) = rewrites(s)
    assert d.by == "claude-code:compact:manual" and d.meta["preTokens"] == 142431
    assert d.meta["compaction_transcript"].endswith("/agent-acompact-946d2b")
    assert d.text.startswith("Analysis:") and "read the full transcript" not in d.text
    calls = [ev.meta["tool_call_id"] for ev in s.events() if ev.type == "Observed" and ev.kind == "tool_call"]
    results = [ev.meta["tool_call_id"] for ev in s.events() if ev.type == "Observed" and ev.kind == "tool_result"]
    assert set(results) <= set(calls) and len(calls) > 40
    harness = [ev.text for ev in s.events() if ev.type == "Observed" and ev.meta.get("harness")]
    assert any("<command-name>/compact</command-name>" in t for t in harness)
    assert s.verify().ok and s.rebuild().live.keys() == s.state.live.keys()
    assert "progress" not in result.reports[0].skipped  # the excerpt has no bookkeeping lines left
    with_ts = json.loads(REAL.read_text().splitlines()[0])
    assert with_ts["sessionId"] in s.name


def test_an_interrupted_import_resumes_exactly(ledger, monkeypatch):
    """Each write transaction carries the checkpoint: stop the writing pass halfway (Ctrl-C), import
    again, and the session equals a clean import (nothing doubled, nothing skipped)."""
    import engine.importers.runner as runner
    from engine.importers.claude_code import IMPORTER

    monkeypatch.setattr(runner, "CHUNK", 3)
    real_parse = IMPORTER.parse
    calls = {"n": 0}

    def interrupted(records, ctx):
        calls["n"] += ctx.source == CC
        for i, item in enumerate(real_parse(records, ctx)):
            if ctx.source == CC and calls["n"] == 2 and i == 12:  # the writing pass of the first run
                raise KeyboardInterrupt
            yield item

    monkeypatch.setattr(IMPORTER, "parse", interrupted)
    with pytest.raises(KeyboardInterrupt):
        import_path(ledger, CC, name="cut")
    part = ledger.session("cut")
    assert 1 < Checkpoint.of(part).line < 39 and part.position > 2
    monkeypatch.setattr(IMPORTER, "parse", real_parse)
    import_path(ledger, CC, name="cut")
    clean = import_path(Ledger.open("memory://"), CC).session
    key = lambda s: [(sp.id, sp.text, sp.generation, sp.sources) for sp in s.spans()]  # noqa: E731
    assert key(ledger.session("cut")) == key(clean)


def test_a_transcript_that_starts_after_a_compaction(ledger, tmp_path):
    lines = CC.read_bytes().splitlines(keepends=True)
    f = tmp_path / "continued.jsonl"
    f.write_bytes(b"".join(lines[19:]))  # begins with a compact boundary: nothing live to derive from
    s = import_path(ledger, f, name="continued").session
    first = next(ev for ev in s.events() if ev.type == "Observed")
    assert first.meta["summary_without_sources"] and first.text.startswith("Summary:\n1. The user reported")


def test_codex_local_compaction_with_a_replacement_history(ledger, tmp_path):
    rows = [
        {"timestamp": "t", "type": "session_meta", "payload": {"id": "rh"}},
        {"timestamp": "t", "type": "response_item", "payload": {"type": "message", "role": "user",
                                                                "content": [{"type": "input_text", "text": "Fix the flaky test."}]}},
        {"timestamp": "t", "type": "response_item", "payload": {"type": "function_call", "name": "shell",
                                                                "arguments": "{}", "call_id": "c1"}},
        {"timestamp": "t", "type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1",
                                                                "output": "test_x failed 3 of 10 runs"}},
        {"timestamp": "t", "type": "compacted", "payload": {"message": "test_x fails 3 of 10 runs.", "replacement_history": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the flaky test."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "test_x fails 3 of 10 runs."}]}]}},
    ]
    f = tmp_path / "rollout.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = import_path(ledger, f, format="codex").session
    (rw,) = [ev for ev in s.events() if ev.type == "Rewritten"]
    assert rw.by == "codex:compact:local" and rw.text == "test_x fails 3 of 10 runs." and rw.sources == ("o2", "o3")
    assert [sp.text for sp in s.spans()] == ["Fix the flaky test.", "test_x fails 3 of 10 runs."]


def test_the_providers_usage_counts_are_kept(ledger):
    s = import_path(ledger, CC).session
    thinking = next(ev for ev in s.events() if ev.type == "Observed" and ev.meta.get("type") == "thinking")
    assert (thinking.meta["input_tokens"], thinking.meta["output_tokens"]) == (10, 5)


def test_on_every_store(store_url):
    """memory://, a SQLite file and PostgreSQL (when CTXLEDGER_TEST_POSTGRES is set) import alike."""
    from engine import EstimateCounter

    led = Ledger.open(store_url, token_counter=EstimateCounter())
    try:
        result = import_path(led, CC_DIR_OR_FILE)
        again = import_path(led, CC_DIR_OR_FILE)
        assert again.report.already_imported
        s = led.session(CC_NAME)
        assert s.verify().ok and len(rewrites(s)) == 3
        assert [sp.id for sp in s.spans()] == [sp.id for sp in result.session.spans()]
    finally:
        led.close()


CC_DIR_OR_FILE = CC.parent
