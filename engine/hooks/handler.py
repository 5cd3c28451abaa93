"""One hook run: read the payload, record, audit, answer on stdout in the agent's own shape.

What each event prints (both agents read the same shapes):

- ``PreCompact``: nothing (exit 0 lets the compaction go on; Claude Code treats exit 2 as blocking
  there, so this never exits 2);
- ``PostCompact``: ``{"systemMessage": "..."}``, a one-line status for the user (PostCompact cannot add
  model context in either CLI; Codex ignores plain stdout and rejects other JSON fields there);
- ``SessionStart`` (source ``compact``): ``{"hookSpecificOutput": {"hookEventName": "SessionStart",
  "additionalContext": notice}}``, added to the resumed model's context;
- anything else: nothing.

Every failure is caught here: one line on stderr, exit 0, and nothing half-written.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, BinaryIO, TextIO

from engine.hooks import AGENTS

__all__ = ["main", "run", "Outcome"]

USAGE = "usage: python -m engine.hooks {claude-code|codex} [--db URL] [--budget TOKENS] < payload.json"


class Outcome:
    """What one hook run produced: ``stdout`` for the agent, ``error`` (one line) if it failed."""

    __slots__ = ("stdout", "error", "notice", "session")

    def __init__(self, stdout: str = "", error: str = "", notice: Any = None, session: str = ""):
        self.stdout, self.error, self.notice, self.session = stdout, error, notice, session


def run(agent: str, raw: bytes, *, db: str | None = None, budget: int | None = None) -> Outcome:
    """Handle one payload; never raises."""
    try:
        return _run(agent, raw, db, budget)
    except Exception as e:  # noqa: BLE001 - a hook must never break the agent
        message = getattr(e, "message", None) or f"{type(e).__name__}: {e}"
        return Outcome(error=" ".join(str(message).split())[:300])


def _run(agent: str, raw: bytes, db: str | None, budget: int | None) -> Outcome:
    from engine.hooks.payload import parse

    if agent not in AGENTS:
        raise ValueError(f"unknown agent {agent!r}; the hooks serve {', '.join(AGENTS)}")
    payload = parse(raw)
    event = payload.hook_event_name
    if event not in ("PreCompact", "PostCompact") and not (event == "SessionStart" and payload.source == "compact"):
        return Outcome()  # not ours (an old settings entry, a wider matcher): nothing to do

    from engine.errors import InvalidInputError
    from engine.hooks.record import record
    from engine.hooks.state import default_db_url, ensure_folder, remember
    from engine.ledger import Ledger

    url = db or os.environ.get("CTXLEDGER_URL") or default_db_url()
    ensure_folder(url)
    with Ledger.open(url) as ledger:
        result = record(ledger, agent, payload)
        session = result.session
        remember(agent, payload.cwd or os.getcwd(), session.name, url)
        skipped = len(result.report.bad_lines)
        warning = f"skipped {skipped} malformed transcript line(s)" if skipped else ""
        if event == "PreCompact":
            return Outcome(error=warning, session=session.name)
        from projections.lost import summary_of  # loads the checker's text tools: not for PreCompact

        try:
            summary = summary_of(session)
        except InvalidInputError:
            return Outcome(error=warning or f"no compaction in {payload.transcript_path} yet; nothing to check",
                           session=session.name)
        if not _is_this_compaction(session, summary, payload):
            return Outcome(error=warning or f"the newest compaction is not in {payload.transcript_path} yet; nothing to check",
                           session=session.name)
        report = _Findings(_summary_findings(session, summary, url))
        if event == "PostCompact":
            mine = [f for f in report.findings if f.severity in ("error", "warning")]
            status = (f"ctxledger: compaction recorded as {summary.id} in {session.name}; "
                      + (f"the summary has {len(mine)} unsupported statement(s); the resumed model is told which"
                         if mine else "its audit found nothing unsupported"))
            return Outcome(stdout=json.dumps({"systemMessage": status}), error=warning, session=session.name)
        from engine.hooks.notice import DEFAULT_BUDGET, compose

        notice = compose(session, summary, report, budget=budget or _env_budget() or DEFAULT_BUDGET,
                         agent=agent, counter=ledger.counter)
        out = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": notice.text}}
        return Outcome(stdout=json.dumps(out, ensure_ascii=False), error=warning, notice=notice, session=session.name)


class _Findings:
    """The part of an audit report the notice reads."""

    __slots__ = ("findings",)

    def __init__(self, findings: list[Any]):
        self.findings = findings


def _summary_findings(session: Any, summary: Any, url: str) -> list[Any]:
    """The audit's findings on ``summary``. PostCompact and SessionStart(compact) fire one after the
    other on the same log: the audit (a pure function of the log at a position) is run once and kept
    in the state directory for that position."""
    import msgspec

    from engine.hooks.state import cache, cached, locked
    from projections.finding import Finding  # not the audit's module: a kept audit loads no checker

    key = f"audit|{url}|{session.id}"
    with locked(key):  # the second of two racing hooks waits for the first one's audit, then reads it
        kept = cached(key, session.position)
        if kept is not None:
            try:
                return msgspec.json.decode(kept, type=list[Finding])
            except msgspec.DecodeError:
                pass  # a damaged cache entry: audit again
        mine = [f for f in session.audit().findings if summary.id in f.span_ids]
        cache(key, session.position, msgspec.json.encode(mine))
        return mine


def _is_this_compaction(session: Any, summary: Any, payload: Any) -> bool:
    """Whether ``summary`` is the compaction the payload is about, not an earlier one (the agent may
    fire the hook before the transcript holds the new summary): PostCompact's ``compact_summary``
    must be in it when given; and the user has typed nothing since it was written."""
    from projections.lost import user_words

    if payload.compact_summary:
        probe = " ".join(payload.compact_summary.split())[:200]
        body = " ".join(summary.text.split())
        if probe and probe not in body and body[:200] not in " ".join(payload.compact_summary.split()):
            return False
    return not any(user_words(s) and s.position > summary.position for s in session.spans())


def _env_budget() -> int | None:
    value = os.environ.get("CTXLEDGER_NOTICE_BUDGET", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


def main(argv: list[str] | None = None, stdin: BinaryIO | None = None, stdout: TextIO | None = None,
         stderr: TextIO | None = None) -> int:
    """``python -m engine.hooks AGENT [--db URL] [--budget N]``: always returns 0 (see the module doc)."""
    args = list(sys.argv[1:] if argv is None else argv)
    out, err = stdout or sys.stdout, stderr or sys.stderr
    agent, db, budget, bad = "", None, None, ""
    while args:
        a = args.pop(0)
        if a in ("--db", "--budget") and args:
            value = args.pop(0)
            if a == "--db":
                db = value
            elif value.isdigit() and int(value) > 0:
                budget = int(value)
            else:
                bad = f"--budget needs a positive number of tokens, not {value!r}"
        elif not agent and not a.startswith("-"):
            agent = a
        else:
            bad = f"unexpected argument {a!r}; {USAGE}"
    try:
        raw = (stdin or sys.stdin.buffer).read()
    except (OSError, ValueError) as e:
        raw, bad = b"", bad or f"cannot read stdin: {e}"
    outcome = Outcome(error=bad) if bad else run(agent, raw, db=db, budget=budget)
    try:
        if outcome.stdout:
            out.write(outcome.stdout + "\n")
            out.flush()
        if outcome.error:
            err.write(f"ctxledger hook: {outcome.error}\n")
            err.flush()
    except (OSError, ValueError):
        pass
    return 0
