"""Property: generated transcripts import to exactly the message sequence they hold, whatever the
split of assistant content blocks over lines, the bookkeeping lines between them, and where an
incremental import stops."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import EstimateCounter, Ledger
from engine.importers import import_path

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=40).filter(str.strip)
message = st.one_of(
    st.tuples(st.just("user"), text),
    st.tuples(st.just("assistant"), text),
    st.tuples(st.just("thinking"), text),
    st.tuples(st.just("tool"), text, st.dictionaries(st.sampled_from("abc"), st.integers(), max_size=2), text),
)


def claude_lines(messages, noise) -> tuple[list[str], list[tuple]]:
    """JSONL lines of a Claude Code transcript and the (role, kind, text) sequence it holds."""
    lines, expected = [], []
    for i, (m, extra) in enumerate(zip(messages, noise)):
        uid = f"u{i}"
        if m[0] == "user":
            lines.append({"type": "user", "uuid": uid, "timestamp": "t", "message": {"role": "user", "content": m[1]}})
            expected.append(("user", "message", m[1]))
        elif m[0] in ("assistant", "thinking"):
            block = {"type": "text", "text": m[1]} if m[0] == "assistant" else {"type": "thinking", "thinking": m[1]}
            lines.append({"type": "assistant", "uuid": uid, "message": {"id": f"msg{i // 3}", "content": [block]}})
            expected.append(("assistant", "message" if m[0] == "assistant" else "thinking", m[1]))
        else:
            _, name, args, out = m
            call = {"type": "tool_use", "id": f"toolu_{i}", "name": "T" + name.strip()[:5] or "T", "input": args}
            lines.append({"type": "assistant", "uuid": uid, "message": {"id": f"msg{i}", "content": [call]}})
            lines.append({"type": "user", "uuid": uid + "r", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": out}]}})
            expected.append(("assistant", "tool_call", call["name"] + "(" + json.dumps(args, separators=(",", ":")) + ")"))
            expected.append(("tool", "tool_result", out))
        if extra:
            lines.append({"type": "progress", "uuid": uid + "p", "data": {"type": "hook_progress"}})
    return [json.dumps(d) + "\n" for d in lines], expected


def observed(session):
    return [(ev.role, ev.kind, ev.text) for ev in session.events() if ev.type == "Observed"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(message, min_size=1, max_size=12), st.lists(st.booleans(), min_size=12, max_size=12), st.data())
def test_claude_code_round_trip(messages, noise, data):
    lines, expected = claude_lines(messages, noise)
    cut = data.draw(st.integers(0, len(lines)))
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "s.jsonl"
        ledger = Ledger.open("memory://", token_counter=EstimateCounter())
        f.write_text("".join(lines[:cut]))
        if cut:
            import_path(ledger, f, format="claude-code", name="s")
        f.write_text("".join(lines))
        result = import_path(ledger, f, format="claude-code", name="s")
        assert observed(ledger.session("s")) == expected
        assert result.report.skipped.get("progress", 0) == sum(noise[: len(messages)]) - sum(
            1 for i, line in enumerate(lines[:cut]) if '"progress"' in line)
        assert import_path(ledger, f, format="claude-code", name="s").report.already_imported


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "assistant", "developer"]), text), min_size=1, max_size=10))
def test_codex_round_trip(messages):
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "rollout.jsonl"
        rows = [{"timestamp": "t", "type": "session_meta", "payload": {"id": "abc"}}]
        for role, body in messages:
            kind = "output_text" if role == "assistant" else "input_text"
            rows.append({"timestamp": "t", "type": "response_item",
                         "payload": {"type": "message", "role": role, "content": [{"type": kind, "text": body}]}})
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
        s = import_path(Ledger.open("memory://", token_counter=EstimateCounter()), f, format="codex").session
        assert [(r, t) for r, _, t in observed(s)] == [("system" if r == "developer" else r, t) for r, t in messages]
