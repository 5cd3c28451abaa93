"""What the compacting model saw is among a summary's sources, and imported events keep the
transcript's own time (issue 21, part 1), on the real Claude Code session in ../shared."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

from engine import Ledger
from engine.errors import InvalidInputError
from engine.importers import import_path

REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts" / "claude_spotter_ae4a77f8_manual.jsonl"
pytestmark = pytest.mark.skipif(not REAL.exists(), reason=f"the shared real transcript is not at {REAL}")


def _layout(tmp_path: Path, *, subagents: bool = True) -> Path:
    main = tmp_path / REAL.name
    shutil.copy(REAL, main)
    if subagents:
        shutil.copytree(REAL.parent / REAL.stem, tmp_path / REAL.stem)
    return main


def _summary(session):
    return next(sp for sp in session.spans() if sp.provenance.value == "derived")


def _sources(session, span):
    return [session.original(i) for i in span.sources]


def test_the_compaction_calls_prompt_and_the_users_compact_instruction_are_sources(tmp_path):
    s = import_path(Ledger.open("memory://"), _layout(tmp_path), name="real").session
    d1 = _summary(s)
    sources = _sources(s, d1)
    kinds = [sp.meta.get("harness") for sp in sources]
    assert "compaction-prompt" in kinds  # the prompt the compacting model was given
    prompt = next(sp for sp in sources if sp.meta.get("harness") == "compaction-prompt")
    assert prompt.text.startswith("Your task is to create a detailed summary")
    assert prompt.meta["compaction_call"] == "agent-acompact-946d2b"
    # the /compact command Claude Code writes after the summary is dated before it: an input
    command = next(sp for sp in sources if sp.meta.get("harness") == "command-name")
    assert "continue with the reamining tasks" in command.text
    assert command.meta["line"] == 1484 and d1.meta["line"] == 1482
    # nothing after the summary's own command echo moved: the next user turn follows the summary
    after = [sp for sp in s.spans() if sp.position > d1.position]
    assert any(sp.text == "continue implementation" for sp in after)


def test_without_the_compaction_call_the_command_echo_still_grounds_the_instruction(tmp_path):
    s = import_path(Ledger.open("memory://"), _layout(tmp_path, subagents=False), name="real").session
    sources = _sources(s, _summary(s))
    assert not any(sp.meta.get("harness") == "compaction-prompt" for sp in sources)
    assert any("continue with the reamining tasks" in sp.text for sp in sources)


def test_a_truncated_compaction_call_is_reported_and_not_used(tmp_path):
    main = _layout(tmp_path)
    call = tmp_path / REAL.stem / "subagents" / "agent-acompact-946d2b.jsonl"
    first, reply = call.read_bytes().splitlines(keepends=True)
    call.write_bytes(first)  # the reply is gone: the call was cut off
    result = import_path(Ledger.open("memory://"), main, name="real")
    sources = _sources(result.session, _summary(result.session))
    assert not any(sp.meta.get("harness") == "compaction-prompt" for sp in sources)
    # no reply means no link to the summary either: the import still writes the compaction
    assert result.report.compactions == 1


def test_imported_events_carry_the_transcripts_time_and_the_append_time_apart(tmp_path):
    before = datetime.now(timezone.utc)
    s = import_path(Ledger.open("memory://"), _layout(tmp_path), name="real").session
    events = list(s.events())
    first = json.loads(REAL.read_text().splitlines()[events[1].meta["line"] - 1])  # o1's transcript line
    assert events[0].at == events[1].at == datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00"))
    assert events[0].recorded is not None and events[0].recorded >= before
    assert all(ev.at.year == 2026 and ev.at.month == 2 for ev in events)  # February, not today
    assert all(ev.recorded is not None and ev.recorded >= before for ev in events)
    # the checkpoint mark carries the time of the last line it covers, not the import time
    assert events[-1].type == "Marked" and events[-1].at < before


def test_happened_at_is_validated_and_a_bad_time_writes_nothing():
    s = Ledger.open("memory://").create_session("t")
    for bad in ("yesterday", "2026-02-12T14:00:00", datetime(2026, 2, 12), 42):
        with pytest.raises(InvalidInputError):
            with s.happened_at(bad):
                s.observe("never written")
    assert s.position == 1
    with s.happened_at("2026-02-12T14:00:00Z"):
        sp = s.observe("written then")
    ev = s.event(sp.position)
    assert ev.at == datetime(2026, 2, 12, 14, tzinfo=timezone.utc) and ev.recorded > ev.at
    assert s.event(s.observe("now").position).recorded is None  # outside the block: one time


def test_original_time_survives_export_and_import(tmp_path):
    ledger = Ledger.open("memory://")
    s = import_path(ledger, _layout(tmp_path), name="real").session
    lines = s.export()
    copy = Ledger.open("memory://").import_(lines)
    assert [(e.at, e.recorded) for e in copy.events()] == [(e.at, e.recorded) for e in s.events()]


def test_the_audit_of_the_real_faithful_compaction_is_clean_and_a_planted_false_completion_is_named(tmp_path):
    """The first thing a user runs on a session of their own: the real summary (checked claim by
    claim by hand, benchmarks/data/real_labels.json) gets no error and no warning; the issue's false
    completion planted into it is named, where it stands."""
    from projections.grounding import check
    from projections.grounding.evidence import source_of

    s = import_path(Ledger.open("memory://"), _layout(tmp_path), name="real").session
    report = s.audit()
    assert (report.errors, report.warnings) == (0, 0), [f.message for f in report.findings if f.severity != "info"]
    d1 = _summary(s)
    sources = [source_of(sp) for sp in s.originals(d1.id)]
    planted = "Everything was deployed to production and the release announcement has been sent."
    at = d1.text.index("6. All User Messages")
    text = d1.text[:at] + planted + "\n\n" + d1.text[at:]
    named = [f for f in check(text, sources).findings
             if f["severity"] in ("error", "warning") and at <= f["offset"] < at + len(planted)]
    assert {f["kind"] for f in named} == {"unsupported-completion"}


def test_codex_keeps_recent_user_messages_live_and_they_still_ground_its_summary(tmp_path):
    """Codex's local compaction keeps the recent user messages in the new history: the summarizer
    read them, so a summary that restates them is grounded (they are its ``seen`` sources), while
    they stay live, observed, outside the derived span."""
    def line(ts, kind, payload):
        return json.dumps({"timestamp": f"2026-10-21T09:00:{ts:02d}.000Z", "type": kind, "payload": payload})

    def msg(role, text):
        return {"type": "message", "role": role, "content": [{"type": "input_text" if role == "user" else "output_text", "text": text}]}

    rows = [
        line(0, "session_meta", {"id": "0199a3c4-1111-7222-8333-aaaabbbbcccc", "cwd": "/w"}),
        line(1, "response_item", msg("user", "Keep the v1 endpoints of billing-api until 2026-11-30.")),
        line(2, "response_item", {"type": "function_call", "name": "shell", "arguments": "{\"command\": [\"ls\"]}", "call_id": "c1"}),
        line(3, "response_item", {"type": "function_call_output", "call_id": "c1", "output": "api_v1.py api_v2.py"}),
        line(4, "response_item", msg("assistant", "Both API versions are in the repo.")),
        line(5, "compacted", {"message": "Another language model started to solve this problem and produced a summary of its thinking process.\n"
                                          "The user wants the billing-api v1 endpoints kept until 2026-11-30; api_v1.py and api_v2.py exist."}),
    ]
    f = tmp_path / "rollout-2026-10-21T09-00-00-0199a3c4-1111-7222-8333-aaaabbbbcccc.jsonl"
    f.write_text("\n".join(rows) + "\n")
    s = import_path(Ledger.open("memory://"), f, name="codex").session
    d1 = _summary(s)
    kept = [sp for sp in s.spans() if sp.provenance.value == "observed" and sp.role == "user"]
    assert any("2026-11-30" in sp.text for sp in kept)  # the recent user message stayed live
    assert all(sp.id not in d1.sources for sp in kept) and d1.meta.get("seen")
    report = s.audit()
    assert (report.errors, report.warnings) == (0, 0), [f.message for f in report.findings]


def test_a_directory_import_leaves_no_compaction_call_out(tmp_path):
    """A flat ``<stem>_agent-*.jsonl`` imports with its main transcript (its inputs become the
    summary's sources); one whose main transcript is absent imports as a session of its own."""
    call = REAL.parent / REAL.stem / "subagents" / "agent-acompact-946d2b.jsonl"
    shutil.copy(REAL, tmp_path / "main.jsonl")
    shutil.copy(call, tmp_path / "main_agent-acompact-946d2b.jsonl")
    shutil.copy(call, tmp_path / "other_agent-acompact-1.jsonl")  # its main transcript is not here
    ledger = Ledger.open("memory://")
    result = import_path(ledger, tmp_path)
    names = sorted(s.name for s in result.sessions)
    assert any(n.endswith("/agent-acompact-1") for n in names) and any(n.endswith("/agent-acompact-946d2b") for n in names)
    main = next(s for s in result.sessions if "/" not in s.name)
    assert any(sp.meta.get("harness") == "compaction-prompt" for sp in _sources(main, _summary(main)))
