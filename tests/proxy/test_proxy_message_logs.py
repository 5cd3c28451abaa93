"""The ``messages`` importer (the proxy's diff, offline): a log of request bodies, chat or Responses
API, where the client rewrote its whole history is recorded with the same recognition — the rewrite
is a derived span the audit judges — and a Responses log follows ``previous_response_id`` and a
compaction's opaque item (issue 23)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from engine import Ledger
from engine.cli import main

SYSTEM = "You deploy services."
TURNS = ["Run migration 0042 on billing-api.", "It finished. Restart the workers.", "Workers are up."]
SUMMARY = "Summary: migration 0042 completed at 14:02; workers restarted."


def _import(tmp_path, lines: list[dict], name: str = "log") -> tuple[object, str]:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    db = f"sqlite:///{tmp_path / 'import.db'}"
    result = CliRunner().invoke(main, ["--db", db, "import", "--format", "messages", str(path), "--json"])
    assert result.exit_code == 0, result.output
    ledger = Ledger.open(db)
    return ledger, ledger.sessions()[0].name


def test_a_chat_log_whose_client_rewrote_its_history_is_a_derived_span_the_audit_judges(tmp_path):
    lines, history = [], [{"role": "system", "content": SYSTEM}]
    for turn in TURNS:
        history = [*history, {"role": "user", "content": turn}]
        lines.append({"model": "m", "messages": history})
        history = [*history, {"role": "assistant", "content": f"Done: {turn}"}]
    lines.append({"model": "m", "messages": [history[0], {"role": "user", "content": SUMMARY},
                                               {"role": "user", "content": "Check the health endpoint."}]})
    ledger, name = _import(tmp_path, lines)
    s = ledger.session(name)
    [summary] = [x for x in s.spans() if x.derived]
    assert summary.text == SUMMARY and len(summary.sources) == 5  # three turns, the two replies the log had
    assert "14:02" in [f.value for f in s.audit().findings if f.kind == "unsupported-specific"]
    ledger.close()


def test_a_responses_log_follows_previous_response_id_and_records_a_compaction_as_opaque(tmp_path):
    compaction = {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB-opaque-bytes"}
    lines = [
        {"request": {"model": "m", "instructions": SYSTEM, "input": TURNS[0]},
         "response": {"id": "resp_1", "object": "response", "output": [
             {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Migrated."}]}]}},
        {"request": {"model": "m", "input": [{"role": "user", "content": TURNS[1]}], "previous_response_id": "resp_1"},
         "response": {"id": "resp_2", "object": "response", "output": [
             {"type": "function_call", "call_id": "call_1", "name": "restart", "arguments": "{\"service\": \"workers\"}"}]}},
        {"model": "m", "input": [{"type": "function_call_output", "call_id": "call_1", "output": "restarted"}],
         "previous_response_id": "resp_2"},
        {"model": "m", "instructions": SYSTEM, "input": [
            {"role": "user", "content": TURNS[0]}, {"role": "user", "content": TURNS[1]}, compaction,
            {"role": "user", "content": TURNS[2]}]},
    ]
    ledger, name = _import(tmp_path, lines, "responses")
    s = ledger.session(name)
    kinds = [(e.role, e.kind, e.text) for e in s.events() if type(e).__name__ == "Observed"]
    assert kinds[:6] == [("system", "message", SYSTEM), ("user", "message", TURNS[0]), ("assistant", "message", "Migrated."),
                         ("user", "message", TURNS[1]), ("assistant", "tool_call", 'restart({"service":"workers"})'),
                         ("tool", "tool_result", "restarted")]
    [rewrite] = [e for e in s.events() if type(e).__name__ == "Rewritten"]
    assert rewrite.by == "openai:compact" and rewrite.meta["opaque"] is True
    assert rewrite.meta["encrypted_content"] == compaction["encrypted_content"]
    assert {s.original(i).text for i in rewrite.inputs} >= {"Migrated.", "restarted"}
    assert [x.text for x in s.spans()][-1] == TURNS[2]
    ledger.close()


def test_a_log_whose_client_sent_its_summary_alone_is_a_rewrite_too(tmp_path):
    """Claude Code's automatic compaction: the next request is the summary ALONE, the instruction to
    go on at its end (the proxy's rule needs a quoted reply to follow it across conversations; in a
    log of one conversation the diff sees it replace the history)."""
    lines, history = [], []
    for turn in TURNS:
        history = [*history, {"role": "user", "content": turn}]
        lines.append({"model": "m", "system": SYSTEM, "messages": history})
        history = [*history, {"role": "assistant", "content": [{"type": "text", "text": f"Done: {turn}"}]}]
    alone = f"This session is being continued from a previous conversation.\n\n{SUMMARY}\nPlease continue."
    lines.append({"model": "m", "system": SYSTEM, "messages": [{"role": "user", "content": alone}]})
    ledger, name = _import(tmp_path, lines, "alone")
    s = ledger.session(name)
    [summary] = [x for x in s.spans() if x.derived]
    assert summary.text == alone and {s.original(i).text for i in summary.sources} == {
        *TURNS, "Done: Run migration 0042 on billing-api.", "Done: It finished. Restart the workers."}
    assert [x.text for x in s.spans()] == [SYSTEM, alone]
    assert "14:02" in [f.value for f in s.audit().findings if f.kind == "unsupported-specific"]
    ledger.close()
