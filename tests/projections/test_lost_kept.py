"""``lost`` reports kept beside the grounding results (``engine.lost_kept``): the kept report is
the computed one, a second read computes nothing, and other code or other inputs miss the row."""

from __future__ import annotations

import sys

import pytest

import engine.lost_kept as lost_kept
from engine import EstimateCounter, Ledger
from projections.lost import lost, summary_of


def _session(led):
    s = led.create_session("s")
    a = s.observe("never push to main; run pytest -q before each commit", role="user")
    b = s.observe("ran /usr/bin/make in /srv/app: exit 2 after 41 s", role="assistant")
    c = s.observe("deploy v1.4.2 to host db-7.internal", role="user")
    s.rewrite([a.id, b.id, c.id], "The user asked for a deploy; make ran.")
    return s


@pytest.mark.parametrize("url", ["sqlite", "memory"])
def test_the_kept_report_is_the_computed_one_and_is_read_once_kept(tmp_path, url, monkeypatch):
    db = f"sqlite:///{tmp_path / 'l.db'}" if url == "sqlite" else "memory://"
    with Ledger.open(db, token_counter=EstimateCounter()) as led:
        s = _session(led)
        summary = summary_of(s)
        fresh = lost(summary, s.originals(summary.id))
        assert fresh.category("paths").total >= 1 and fresh.category("instructions").dropped
        calls = []
        module = sys.modules["projections.lost"]  # (the package binds the function over the module's name)
        monkeypatch.setattr(module, "lost", lambda *a: calls.append(1) or lost(*a))
        first = lost_kept.lost_report(s, summary)
        second = lost_kept.lost_report(led.session("s"), summary)
        assert first == second == fresh
        assert len(calls) == 1  # computed once, then read
        # other code (a new version of the extractor or of lost) misses the row
        monkeypatch.setattr(lost_kept, "lost_version", lambda: "projections.lost@other")
        assert lost_kept.lost_report(s, summary) == fresh and len(calls) == 2
        # other inputs (a source's text) miss it too
        changed = [msgspec_replace(o, text=o.text + " v9.9.9") for o in s.originals(summary.id)]
        assert lost_kept.lost_report(s, summary, changed) == lost(summary, changed) and len(calls) == 3


def msgspec_replace(span, **kw):
    import msgspec

    return msgspec.structs.replace(span, **kw)


def test_the_cli_reads_the_kept_report(tmp_path):
    from click.testing import CliRunner

    from engine.cli import main

    db = f"sqlite:///{tmp_path / 'l.db'}"
    with Ledger.open(db, token_counter=EstimateCounter()) as led:
        _session(led)
    runs = [CliRunner().invoke(main, ["--db", db, "lost", "s", "--json"]) for _ in range(2)]
    assert runs[0].exit_code == 0 and runs[0].output == runs[1].output
    assert '"instructions"' in runs[0].output
