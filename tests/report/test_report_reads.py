"""The report reads the log in bulk: the lineages' events in blocks, the model's edits by topic;
what it shows is what one event at a time would show."""

from __future__ import annotations

from engine import EstimateCounter, Ledger
from engine.report import _EventMemo, _model_edits, collect


def _session(led):
    s = led.create_session("s", strict=False)
    ids = [s.observe(f"step {k} took {k} s", role="assistant").id for k in range(1500)]
    d1 = s.rewrite(ids[:700], "steps 0-699 took 0 to 699 s", by="model:m")
    s.prune(ids[900], by="model:m")
    s.prune(ids[901], by="harness")
    s.rewrite([d1.id, *ids[700:800]], "steps took seconds; finished at 14:02", by="model:m")
    return s


def test_model_edits_and_lineage_events_read_in_bulk(tmp_path):
    with Ledger.open(f"sqlite:///{tmp_path / 'l.db'}", token_counter=EstimateCounter()) as led:
        s = _session(led)
        edits = sum(1 for ev in s.events() if getattr(ev, "by", "").startswith("model:"))
        assert _model_edits(s) == edits == 3
        memo = _EventMemo(s)
        for p in (1, 2, 700, 701, 1500, s.position):
            assert memo.event(p) == s.event(p)
        assert len(memo._events) <= 4 * _EventMemo.BLOCK  # blocks around the positions asked for
        data = collect(s)
        assert data["model_edits"] == 3 and data["findings"]  # the invented 14:02
        assert any(f["lineage"] for f in data["findings"])
