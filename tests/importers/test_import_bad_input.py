"""Bad transcripts: a typed error naming the file and line, and the store unchanged (or, with
skip_bad, the line skipped and counted); a writer caught mid-line is waited for, never an error."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine import Ledger
from engine.errors import ImportFormatError, InvalidInputError, LedgerError
from engine.importers import import_path

DATA = Path(__file__).parents[1] / "data" / "transcripts"
CC = DATA / "claude_code" / "7c2d9e10-5b7a-4c1e-9f00-aa11bb22cc33.jsonl"
CODEX = next((DATA / "codex").rglob("rollout-2026-10-21*.jsonl"))


@pytest.fixture
def ledger():
    return Ledger.open("memory://")


def snapshot(ledger):
    return sorted((i.name, i.position) for i in ledger.sessions())


def with_line(src: Path, dst: Path, index: int, raw: bytes) -> Path:
    lines = src.read_bytes().splitlines(keepends=True)
    lines.insert(index, raw)
    dst.write_bytes(b"".join(lines))
    return dst


BAD_LINES = [
    pytest.param(b'{"type": "user", "message": {"role": "user", "content": "half\n', id="truncated-json"),
    pytest.param(b"[1, 2, 3]\n", id="not-an-object"),
    pytest.param(b'{"type": "assistant", "message": "just a string"}\n', id="assistant-without-message"),
    pytest.param(b'{"type": "assistant", "message": {"content": [{"type": "tool_use", "input": {}}]}}\n',
                 id="tool-use-without-id"),
    pytest.param(b'{"type": "user", "message": {"content": [{"type": "tool_result"}]}}\n', id="result-without-id"),
    pytest.param(b'{"type": 7}\n', id="type-not-a-string"),
]


@pytest.mark.parametrize("raw", BAD_LINES)
def test_malformed_claude_line_writes_nothing(ledger, tmp_path, raw):
    f = with_line(CC, tmp_path / "t.jsonl", 12, raw)
    before = snapshot(ledger)
    with pytest.raises(ImportFormatError) as e:
        import_path(ledger, f, format="claude-code")
    assert e.value.line == 13 and f"{f}: line 13" in e.value.message and "nothing was imported" in e.value.message
    assert snapshot(ledger) == before == []


@pytest.mark.parametrize("raw", BAD_LINES)
def test_skip_bad_counts_the_line(ledger, tmp_path, raw):
    f = with_line(CC, tmp_path / "t.jsonl", 12, raw)
    result = import_path(ledger, f, format="claude-code", skip_bad=True)
    assert result.report.bad_lines == [13]
    clean = import_path(Ledger.open("memory://"), CC).session
    assert [sp.text for sp in result.session.spans()] == [sp.text for sp in clean.spans()]


def test_malformed_line_in_the_growth_leaves_the_session_unchanged(ledger, tmp_path):
    lines = CC.read_bytes().splitlines(keepends=True)
    f = tmp_path / CC.name
    f.write_bytes(b"".join(lines[:10]))
    s = import_path(ledger, f).session
    before = snapshot(ledger)
    f.write_bytes(b"".join(lines[:10] + lines[10:14] + [b"{oops\n"] + lines[14:]))
    with pytest.raises(ImportFormatError, match="line 15"):
        import_path(ledger, f)
    assert snapshot(ledger) == before and ledger.session(s.name).position == s.position


def test_half_written_last_line_waits(ledger, tmp_path):
    lines = CC.read_bytes().splitlines(keepends=True)
    f = tmp_path / CC.name
    f.write_bytes(b"".join(lines[:8]) + lines[8][:25])  # a writer caught mid-line
    first = import_path(ledger, f)
    assert first.report.pending_tail and first.report.last_line == 8
    f.write_bytes(b"".join(lines))
    import_path(ledger, f)
    whole = import_path(Ledger.open("memory://"), CC).session
    assert [sp.text for sp in ledger.session(whole.name).spans()] == [sp.text for sp in whole.spans()]


def test_codex_and_messages_malformed(ledger, tmp_path):
    f = with_line(CODEX, tmp_path / "rollout.jsonl", 5,
                  b'{"timestamp": "x", "type": "response_item", "payload": {"type": "function_call"}}\n')
    with pytest.raises(ImportFormatError, match="line 6: a function_call needs a 'call_id'"):
        import_path(ledger, f, format="codex")
    m = tmp_path / "m.jsonl"
    m.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n"
                 + json.dumps({"messages": [{"role": "wizard", "content": "x"}]}) + "\n")
    with pytest.raises(ImportFormatError, match="line 2"):
        import_path(ledger, m, format="messages")
    assert snapshot(ledger) == []


def test_openhands_malformed_event_file(ledger, tmp_path):
    conv = tmp_path / "conv"
    shutil.copytree(DATA / "openhands" / "v0" / "sessions" / "3f1c0de2a1b34c5d", conv)
    (conv / "events" / "4.json").write_text('{"id": 4, "observation": "run", "content": ')
    with pytest.raises(ImportFormatError, match="line 5: 4.json is not a JSON object"):
        import_path(ledger, conv, format="openhands")
    assert snapshot(ledger) == []
    assert import_path(ledger, conv, format="openhands", skip_bad=True).report.bad_lines == [5]


def test_unknown_format_and_undetectable_input(ledger, tmp_path):
    with pytest.raises(InvalidInputError, match="unknown import format 'aider'"):
        import_path(ledger, CC, format="aider")
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    with pytest.raises(ImportFormatError, match="not a transcript format"):
        import_path(ledger, junk)
    with pytest.raises(InvalidInputError, match="no such file"):
        import_path(ledger, tmp_path / "missing.jsonl")
    with pytest.raises(InvalidInputError, match="names one transcript"):
        import_path(ledger, DATA / "codex", format="codex", name="one")
    assert snapshot(ledger) == []


def test_errors_are_ledger_errors():
    assert issubclass(ImportFormatError, LedgerError)


def test_ledger_import_dispatches_to_the_importers(ledger):
    s = ledger.import_(CC, format="claude-code", name="via-ledger")
    assert s.name == "via-ledger" and [ev.by for ev in s.events() if ev.type == "Rewritten"][0] == "claude-code:compact:auto"
    detected = ledger.import_(CODEX)
    assert detected.name.startswith("codex:")


def test_hostile_bytes_are_not_recognised(ledger, tmp_path):
    deep = tmp_path / "deep.jsonl"
    deep.write_bytes(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(bytes(range(256)) * 10)
    for f in (deep, binary):
        with pytest.raises(ImportFormatError):
            import_path(ledger, f)
    assert snapshot(ledger) == []
