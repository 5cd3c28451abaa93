"""Imports under attack (issue 24, items 3, 4, 7, 8, 12): an import killed or interrupted at any point
never wedges its session name (a re-run takes over its own unfinished import and ends equal to a
clean one); a line nested too deep is a typed error naming the file and line in every format
(skippable with --skip-bad); the writing pass reads only what the validating pass read, even when
the file grows or is atomically replaced meanwhile, and the checkpoint fingerprints those bytes; a
directory import reports per transcript and goes on under --skip-bad, its exit code saying that some
failed. Each attack checks the refusal and that the store is unchanged."""

from __future__ import annotations

import gc
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import msgspec

from engine import DuplicateSessionError, EstimateCounter, ImportFormatError, InvalidInputError, Ledger
from engine._store.codec import chain_hash, encode_payload
from engine.cli import main
from engine.importers import Checkpoint, import_path
from engine.importers.source import MAX_RECORD_DEPTH, fingerprint
from engine._store.transfer import EVENT_DECODERS

DATA = Path(__file__).parents[1] / "data" / "transcripts"
CC = DATA / "claude_code" / "7c2d9e10-5b7a-4c1e-9f00-aa11bb22cc33.jsonl"
CODEX = next((DATA / "codex").rglob("rollout-2026-10-21*.jsonl"))
MESSAGES = DATA / "messages" / "openai.jsonl"
OPENHANDS = DATA / "openhands" / "v0" / "sessions" / "3f1c0de2a1b34c5d"
ROOT = Path(__file__).parents[2]
CTXLEDGER = str(Path(sys.executable).with_name("ctxledger"))


def led(url: str = "memory://") -> Ledger:
    return Ledger.open(url, token_counter=EstimateCounter())


def state(ledger: Ledger) -> list[tuple[str, list[str]]]:
    """Every session and its whole log as stored."""
    return sorted((i.name, ledger.session(i.name).export()) for i in ledger.sessions())


def spans(session) -> list[tuple]:
    return [(sp.id, sp.role, sp.kind, sp.text, sp.generation, sp.sources) for sp in session.spans()]


def deep(n: int) -> str:
    return "[" * n + "1" + "]" * n


def with_line(src: Path, dst: Path, index: int, raw: str) -> Path:
    lines = src.read_bytes().splitlines(keepends=True)
    lines.insert(index, raw.encode() + b"\n")
    dst.write_bytes(b"".join(lines))
    return dst


def claude_lines(n: int, session_id: str = "5e55e55e-0000-4000-8000-000000000000", start: int = 0) -> list[str]:
    """``n`` Claude Code lines, user and assistant turns in turn, chained by uuid."""
    out = []
    for i in range(start, start + n):
        role = "user" if i % 2 == 0 else "assistant"
        message = ({"role": "user", "content": f"question {i}: what does line {i} say?"} if role == "user" else
                   {"id": f"msg_{i}", "type": "message", "role": "assistant", "model": "m",
                    "content": [{"type": "text", "text": f"answer {i}: it says {i * 7}"}]})
        out.append(json.dumps({
            "parentUuid": f"00000000-0000-4000-8000-{i - 1:012d}" if i else None, "isSidechain": False,
            "sessionId": session_id, "type": role, "message": message,
            "uuid": f"00000000-0000-4000-8000-{i:012d}", "timestamp": f"2026-11-03T10:{i // 60 % 60:02d}:{i % 60:02d}.000Z",
        }))
    return out


# -- item 4: a line nested too deep, in every format ------------------------------------------------


def _openhands_with(tmp_path: Path, body: str) -> Path:
    conv = tmp_path / "oh" / "sessions" / "deep"
    shutil.copytree(OPENHANDS, conv)
    n = len(list((conv / "events").glob("*.json")))
    (conv / "events" / f"{n}.json").write_text(body % n)
    return conv


def _export_with_deep_meta(tmp_path: Path, depth: int) -> Path:
    """An export whose last event's meta nests ``depth`` deep, its chain recomputed as a careful
    forger would (so nothing but the nesting is wrong with it)."""
    source = led()
    s = source.create_session("exported")
    s.observe("one")
    s.observe("two")
    out, prev = [], b""
    for i, raw in enumerate(s.export()):
        d = json.loads(raw)
        if i == 2:
            d["event"]["meta"] = "DEEP"
        text = json.dumps(d).replace('"DEEP"', '{"deep": %s}' % deep(depth))
        if depth < 500:  # decodable: recompute the chain
            d = msgspec.json.decode(text)
            ev = msgspec.structs.replace(EVENT_DECODERS[d["type"]].decode(msgspec.json.encode(d["event"])), prev=prev)
            payload = encode_payload(ev)
            d["event"], d["hash"] = msgspec.json.decode(msgspec.json.encode(ev)), chain_hash(payload).hex()
            prev = chain_hash(payload)
            text = msgspec.json.encode(d).decode()
        out.append(text)
    f = tmp_path / "export.jsonl"
    f.write_text("\n".join(out) + "\n")
    return f


DEEP_CASES = {
    "claude-code": lambda t, d: (with_line(CC, t / "cc.jsonl", 5, '{"type":"user","message":{"role":"user","content":"x"},"extra":%s}' % deep(d)), 6),
    "claude-code tool input": lambda t, d: (with_line(CC, t / "cc2.jsonl", 5, '{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"t9","name":"x","input":{"a":%s}}]}}' % deep(d)), 6),
    "codex": lambda t, d: (with_line(CODEX, t / "rollout.jsonl", 3, '{"timestamp":"2026-10-21T10:00:00Z","type":"response_item","payload":{"type":"message","x":%s}}' % deep(d)), 4),
    "messages": lambda t, d: (with_line(MESSAGES, t / "m.jsonl", 1, '{"model":"x","messages":[{"role":"user","content":"hi","extra":%s}]}' % deep(d)), 2),
}
FORMATS = {"claude-code": "claude-code", "claude-code tool input": "claude-code", "codex": "codex", "messages": "messages"}


@pytest.mark.parametrize("depth", [MAX_RECORD_DEPTH + 1, 1000, 50_000])
@pytest.mark.parametrize("case", sorted(DEEP_CASES))
def test_a_deep_line_is_a_typed_error_naming_file_and_line_and_skippable(tmp_path, case, depth):
    # Earlier tests' garbage is finalized here, at a shallow stack: a finalizer that runs in the middle
    # of the deep decode below has no stack left to report its warning, and pytest fails this test
    # for it (seen once in a core-only CI run: "RecursionError ... Failed to process unraisable exception")
    f, line = DEEP_CASES[case](tmp_path, depth)
    ledger = led()
    if case == "claude-code" and depth < 1000:
        pytest.skip("an unknown field is not decoded at all: nothing deep reaches the parser")
    gc.collect()
    gc.disable()  # and no collection starts while the stack is deep
    try:
        with pytest.raises(ImportFormatError) as err:
            import_path(ledger, f, format=FORMATS[case])
        assert err.value.line == line and f"{f}: line {line}" in err.value.message
        assert "nothing was imported" in err.value.message and state(ledger) == []
        result = import_path(ledger, f, format=FORMATS[case], skip_bad=True)
    finally:
        gc.enable()
    assert result.report.bad_lines == [line] and result.report.spans > 0
    assert all(s.verify().ok for s in result.sessions)


def test_deep_tool_arguments_are_kept_as_their_json_text(tmp_path):
    """Arguments nested deeper than meta may hold (but a line the reader takes) stay in the span."""
    f, _ = DEEP_CASES["claude-code tool input"](tmp_path, 100)
    s = import_path(led(), f, format="claude-code").session
    call = next(ev for ev in s.events() if getattr(ev, "kind", "") == "tool_call" and ev.meta.get("tool_call_id") == "t9")
    assert isinstance(call.meta["arguments"], str) and json.loads(call.meta["arguments"]) == {"a": json.loads(deep(100))}
    assert s.verify().ok


def test_deep_openhands_arguments_are_stored_readably(tmp_path):
    conv = _openhands_with(tmp_path, '{"id": %%d, "source": "agent", "action": "run", "args": {"command": "ls", "x": %s}}' % deep(200))
    s = import_path(led(), conv, format="openhands").session
    assert s.verify().ok and s.export()


@pytest.mark.parametrize("depth", [1000, 50_000])
def test_a_deep_openhands_event_file_is_a_typed_error_naming_it(tmp_path, depth):
    conv = _openhands_with(tmp_path, '{"id": %%d, "source": "agent", "action": "run", "args": {"command": "ls", "x": %s}}' % deep(depth))
    ledger = led()
    with pytest.raises(ImportFormatError) as err:
        import_path(ledger, conv, format="openhands")
    assert str(conv) in err.value.message and "line" in err.value.message
    assert state(ledger) == []


@pytest.mark.parametrize("depth", [80, 1000])
def test_a_deep_event_in_an_export_is_refused_whole(tmp_path, depth):
    f = _export_with_deep_meta(tmp_path, depth)
    ledger = led()
    with pytest.raises((ImportFormatError, InvalidInputError)) as err:
        ledger.import_(f)
    assert "nest" in err.value.message and "line 3" in err.value.message
    assert state(ledger) == []


def test_a_deep_line_through_the_cli_exits_2_with_one_line(tmp_path):
    f, line = DEEP_CASES["codex"](tmp_path, 5000)
    db = f"sqlite:///{tmp_path / 'l.db'}"
    result = CliRunner().invoke(main, ["--db", db, "import", "--format", "codex", str(f)])
    assert result.exit_code == 2 and f"line {line}" in result.output and "Traceback" not in result.output
    assert "RecursionError" not in result.output
    with led(db) as ledger:
        assert state(ledger) == []


# -- item 3: a killed or interrupted import never wedges the name ------------------------------------


KILL_AT_FIRST_COMMIT = textwrap.dedent("""
    import os, signal, sys
    import engine.importers.writer as writer
    real = writer.SessionWriter.commit
    def commit(self, *a, **k):
        if not self.dry:
            os.kill(os.getpid(), getattr(signal, sys.argv[3]))  # after the session exists, before a chunk commits
        return real(self, *a, **k)
    writer.SessionWriter.commit = commit
    from engine.cli import main
    main(["--db", sys.argv[1], "import", sys.argv[2]])
""")


def _import_cli(db: str, path: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([CTXLEDGER, "--db", db, "import", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, **kw)


@pytest.fixture(scope="module")
def transcript(tmp_path_factory) -> tuple[Path, list[tuple]]:
    """A Claude Code transcript of 1,500 lines (under one write chunk: the whole write is exposed),
    and the spans of its clean import."""
    f = tmp_path_factory.mktemp("t") / "5e55e55e-0000-4000-8000-000000000000.jsonl"
    f.write_text("\n".join(claude_lines(1500)) + "\n")
    return f, spans(import_path(led(), f).session)


def _assert_resumes(db: str, f: Path, clean: list[tuple]) -> None:
    again = _import_cli(db, f)
    assert again.returncode == 0, again.stderr
    assert "already exists" not in again.stderr
    with led(db) as ledger:
        (info,) = ledger.sessions()
        s = ledger.session(info.name)
        assert spans(s) == clean and s.verify().ok
        assert Checkpoint.of(s).line == 1500


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGINT"])
def test_killed_after_the_session_is_created_and_before_its_first_chunk(tmp_path, transcript, sig):
    f, clean = transcript
    db = f"sqlite:///{tmp_path / 'l.db'}"
    killed = subprocess.run([sys.executable, "-c", KILL_AT_FIRST_COMMIT, db, str(f), sig], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode != 0
    with led(db) as ledger:  # the worst moment: the session exists and holds nothing but its start
        (info,) = ledger.sessions()
        assert info.position == 1 and Checkpoint.of(ledger.session(info.name)) is None
    _assert_resumes(db, f, clean)


def test_killed_at_random_points_never_wedges_the_name(tmp_path, transcript):
    f, clean = transcript
    rng = random.Random(24)
    t0 = time.perf_counter()
    assert _import_cli(f"sqlite:///{tmp_path / 'timing.db'}", f).returncode == 0
    whole = time.perf_counter() - t0
    for attempt in range(6):
        db = f"sqlite:///{tmp_path / f'k{attempt}.db'}"
        proc = subprocess.Popen([CTXLEDGER, "--db", db, "import", str(f)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.0) * whole)
        proc.send_signal(rng.choice([signal.SIGKILL, signal.SIGINT]))
        proc.wait(timeout=120)
        _assert_resumes(db, f, clean)


def test_a_session_someone_else_created_is_still_refused(tmp_path, transcript):
    f, _ = transcript
    ledger = led()
    ledger.create_session("claude-code:5e55e55e-0000-4000-8000-000000000000")
    before = state(ledger)
    with pytest.raises(DuplicateSessionError, match="holds no imported transcript"):
        import_path(ledger, f)
    assert state(ledger) == before


# -- items 7, 8: read only what was validated; fingerprint what was read ----------------------------


def _between_passes(monkeypatch, action, *, on_call: int = 2):
    """Run ``action`` when the claude-code parser is called for the ``on_call``-th time (2: the start
    of the writing pass)."""
    from engine.importers.claude_code import IMPORTER

    real = IMPORTER.parse
    calls = {"n": 0}

    def parse(records, ctx):
        calls["n"] += 1
        if calls["n"] == on_call:
            action()
        yield from real(records, ctx)

    monkeypatch.setattr(IMPORTER, "parse", parse)


def test_a_file_that_grows_a_bad_line_between_the_passes_imports_what_was_validated(tmp_path, monkeypatch):
    f = tmp_path / "5e55e55e-0000-4000-8000-000000000000.jsonl"
    first = claude_lines(300)
    f.write_text("\n".join(first) + "\n")

    def grow():
        with open(f, "a") as out:
            out.write("{not json\n" + "\n".join(claude_lines(20, start=300)) + "\n")

    _between_passes(monkeypatch, grow)
    ledger = led()
    result = import_path(ledger, f)
    assert result.report.last_line == 300 and not result.report.bad_lines
    s = result.session
    assert spans(s) == spans(import_path(led(), _copy_lines(f, tmp_path, 300)).session)
    assert Checkpoint.of(s).line == 300
    monkeypatch.undo()
    before = state(ledger)
    with pytest.raises(ImportFormatError) as err:  # the next import meets the bad line, and says so truly
        import_path(ledger, f)
    assert err.value.line == 301 and "nothing was imported" in err.value.message
    assert state(ledger) == before
    resumed = import_path(ledger, f, skip_bad=True)
    assert resumed.report.bad_lines == [301] and Checkpoint.of(resumed.session).line == 321


def _copy_lines(f: Path, tmp_path: Path, n: int) -> Path:
    out = tmp_path / "copy" / f.name
    out.parent.mkdir(exist_ok=True)
    out.write_bytes(b"".join(f.read_bytes().splitlines(keepends=True)[:n]))
    return out


@pytest.mark.parametrize("when", ["between the passes", "after the first chunk"])
def test_an_atomically_replaced_file_is_imported_as_it_was_read(tmp_path, monkeypatch, when):
    import engine.importers.runner as runner

    f = tmp_path / "5e55e55e-0000-4000-8000-000000000000.jsonl"
    original = "\n".join(claude_lines(200)) + "\n"
    f.write_text(original)
    other = tmp_path / "other.jsonl"
    other.write_text("\n".join(claude_lines(260, start=1000)) + "\n")  # another transcript, same name

    def replace():
        os.replace(other, f)

    if when == "between the passes":
        _between_passes(monkeypatch, replace)
    else:
        monkeypatch.setattr(runner, "CHUNK", 10)
        import engine.importers.writer as writer

        real = writer.SessionWriter.commit
        done = {"n": 0}

        def commit(self, *a, **k):
            real(self, *a, **k)
            if not self.dry:
                done["n"] += 1
                if done["n"] == 1:
                    replace()

        monkeypatch.setattr(writer.SessionWriter, "commit", commit)
    ledger = led()
    result = import_path(ledger, f)
    monkeypatch.undo()
    kept = tmp_path / "kept" / f.name
    kept.parent.mkdir()
    kept.write_text(original)
    assert spans(result.session) == spans(import_path(led(), kept).session)
    cp = Checkpoint.of(result.session)
    assert cp.line == 200 and cp.fingerprint == fingerprint(kept, cp.offset)
    assert any("replaced" in n for n in result.report.notes)
    before = state(ledger)
    with pytest.raises(DuplicateSessionError, match="different transcript"):
        import_path(ledger, f)  # the new file is another transcript: never appended to this one
    assert state(ledger) == before


# -- item 12: a directory import reports per transcript ----------------------------------------------


@pytest.fixture
def project(tmp_path) -> Path:
    """A Claude Code project directory of three transcripts; the middle one's name is taken."""
    d = tmp_path / "project"
    d.mkdir()
    for k in range(3):
        sid = f"5e55e55e-0000-4000-8000-00000000000{k}"
        (d / f"{sid}.jsonl").write_text("\n".join(claude_lines(10, session_id=sid)) + "\n")
    return d


TAKEN = "claude-code:5e55e55e-0000-4000-8000-000000000001"


def test_a_directory_import_stops_at_a_bad_transcript_and_says_what_was_imported(project):
    ledger = led()
    ledger.create_session(TAKEN)
    with pytest.raises(DuplicateSessionError) as err:
        import_path(ledger, project)
    assert "1 transcript(s) before it were imported" in err.value.message
    assert "--skip-bad" in err.value.message
    assert sorted(i.name for i in ledger.sessions()) == [
        "claude-code:5e55e55e-0000-4000-8000-000000000000", TAKEN]


def test_a_directory_import_goes_on_under_skip_bad_and_reports_each(project):
    ledger = led()
    ledger.create_session(TAKEN)
    taken_before = ledger.session(TAKEN).export()
    result = import_path(ledger, project, skip_bad=True)
    assert [r.source.rsplit("/", 1)[1] for r in result.failed] == ["5e55e55e-0000-4000-8000-000000000001.jsonl"]
    assert "holds no imported transcript" in result.failed[0].error
    assert sorted(s.name for s in result.sessions) == [
        "claude-code:5e55e55e-0000-4000-8000-000000000000", "claude-code:5e55e55e-0000-4000-8000-000000000002"]
    assert ledger.session(TAKEN).export() == taken_before
    assert "FAILED" in result.summary()


@pytest.mark.parametrize("as_json", [False, True])
def test_the_cli_exits_1_when_some_transcripts_failed(tmp_path, project, as_json):
    db = f"sqlite:///{tmp_path / 'l.db'}"
    with led(db) as ledger:
        ledger.create_session(TAKEN)
    runner = CliRunner()
    result = runner.invoke(main, ["--db", db, "import", "--skip-bad", str(project), *(["--json"] if as_json else [])])
    assert result.exit_code == 1, result.output
    if as_json:
        reports = json.loads(result.stdout)
        assert [bool(r["error"]) for r in reports] == [False, True, False]
    else:
        assert result.stdout.count("FAILED") == 1 and "1 of 3 transcripts could not be imported" in result.stderr
    strict = runner.invoke(main, ["--db", db, "import", str(project)])
    assert strict.exit_code == 2 and "Traceback" not in strict.output
