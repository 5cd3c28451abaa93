"""The seed's story, played on a real SQLite file: prune-only cycles, a first rewrite, an attempted
summary-of-summary that is refused, a re-derivation from the originals, and time travel back to
before each step."""

from __future__ import annotations

import pytest

from engine import EstimateCounter, Ledger, Provenance, RewritePolicyError, RewriteRefused


def test_the_seed_story(sqlite_url):
    ledger = Ledger.open(sqlite_url, token_counter=EstimateCounter())
    s = ledger.create_session("agent-seed")
    s.observe("You are an SRE agent.", role="system")
    checkpoints = {}

    # Cycles 1-8: the agent works; compaction only prunes tool outputs older than two cycles.
    for cycle in range(1, 9):
        call = s.observe(
            f"get_logs(service=svc-{cycle})",
            role="assistant",
            kind="tool_call",
            meta={"tool_call_id": f"c{cycle}", "name": "get_logs", "arguments": {"service": f"svc-{cycle}"}},
        )
        s.observe(
            f"svc-{cycle}: 200 OK, p99 {100 + cycle}ms",
            role="tool",
            kind="tool_result",
            meta={"tool_call_id": f"c{cycle}"},
        )
        old = [sp for sp in s.spans() if sp.kind == "tool_result" and sp.position < call.position - 4]
        for sp in old:
            s.prune(sp.id, reason=f"cycle {cycle}: tool output older than two cycles", by="compactor")
        checkpoints[f"cycle-{cycle}"] = s.mark(f"cycle-{cycle}")
    assert all(sp.provenance is Provenance.OBSERVED for sp in s.spans())
    pruned_results = [sp for sp in s.at("cycle-8").spans() if sp.kind == "tool_result"]
    assert len(pruned_results) == 2  # only the two most recent outputs survived

    # Cycle 9: two distinct API failures are observed, then summarized once. Accurate.
    f1 = s.observe("billing-api returned 503 at 13:58 (upstream timeout)", role="user")
    f2 = s.observe("auth-service returned 500 at 14:01 (token cache miss)", role="user")
    m = s.observe("Started migration 0042 at 14:00; still running.", role="user")
    before_rewrite = s.position
    summary = s.rewrite(
        [f1.id, f2.id, m.id],
        "billing-api 503 at 13:58; auth-service 500 at 14:01; migration 0042 started 14:00, running.",
        by="model-x",
        reason="cycle 9: compact above 70%",
    )
    assert summary.generation == 1 and summary.sources == (f1.id, f2.id, m.id)
    after_rewrite = s.mark("cycle-9")

    # Cycle 10: the naive policy hands the model its own summary plus new turns. Refused, recorded.
    new = s.observe("Deploy of billing-api v2.3.1 finished.", role="user")
    with pytest.raises(RewritePolicyError):
        s.rewrite(
            [summary.id, new.id],
            "The API failure was fixed; the migration completed at 14:02; billing v2.3.1 deployed.",
            by="model-x",
        )
    refusal = list(s.events(s.position))[0]
    assert isinstance(refusal, RewriteRefused) and refusal.offending == (summary.id,)
    assert "migration completed at 14:02" in refusal.text  # the attempted drift is kept for forensics
    live_text = " ".join(sp.text for sp in s.spans())
    assert "completed at 14:02" not in live_text  # ...but never entered the buffer

    # The legal path: rewrite only the new observation, and re-derive the old summary from its
    # ORIGINAL observations, read back from the log, never from the summary itself.
    seen = []

    def rewriter(originals):
        seen.extend(originals)
        return "; ".join(o.text for o in originals)

    re = s.rederive(summary.id, rewriter=rewriter, by="model-x", reason="cycle 10: shorten")
    assert [o.id for o in seen] == [f1.id, f2.id, m.id]
    assert all(o.provenance is Provenance.OBSERVED and o.generation == 0 for o in seen)
    assert re.generation == 1 and "14:02" not in re.text
    assert max(sp.generation for sp in s.spans()) == 1

    # Time travel: before each step the buffer is exactly what it was.
    before = s.at(before_rewrite)
    assert [sp.id for sp in before.spans()][-3:] == [f1.id, f2.id, m.id]
    assert all(sp.provenance is Provenance.OBSERVED for sp in before.spans())
    at9 = s.at("cycle-9")
    assert at9.position == after_rewrite
    assert at9.span(summary.id).text.startswith("billing-api 503 at 13:58")
    for label, position in checkpoints.items():
        assert s.at(label).position == position
    assert len(s.at("cycle-1").spans()) == 3  # system + the first call and its output

    # The whole history survives a reopen and verifies.
    ledger.close()
    reopened = Ledger.open(sqlite_url, token_counter=EstimateCounter()).session("agent-seed")
    assert reopened.spans() == s.spans()
    assert reopened.verify().ok
    assert reopened.rebuild() == reopened.state
