"""``Session.audit``: structural findings, grounding findings, time travel, the grounding gate, and
bad input. Runs on every store (memory, SQLite, PostgreSQL)."""

from __future__ import annotations

import base64
import io
import json
import sqlite3

import msgspec
import pytest

from engine import EstimateCounter, Ledger
from engine._store.codec import chain_hash, encode_payload
from engine.errors import (
    GroundingError,
    ImportFormatError,
    InvalidInputError,
    PositionOutOfRangeError,
    RewritePolicyError,
)
from engine.events import EVENT_TYPES, RewriteRefused, Rewritten
from projections import AuditReport, audit

FAILURES = (
    "GET /v1/invoices -> 503 from billing-api at 10:02 (upstream timeout)",
    "POST /v1/sessions -> 500 from auth-service at 10:07 (token cache miss)",
    "Running migration 0042_add_index on orders-db (started 13:41)",
)


def incident(ledger, name="inc", strict=True):
    s = ledger.create_session(name, strict=strict)
    spans = [s.observe(t, role="tool", kind="tool_result", meta={"tool_call_id": f"c{i}"}) for i, t in enumerate(FAILURES)]
    return s, spans


def snapshot(s):
    return s.position, list(s.events())


def kinds(report: AuditReport) -> list[tuple[str, str]]:
    return [(f.kind, f.severity) for f in report.findings]


def test_a_faithful_session_audits_clean(ledger):
    s, (a, b, c) = incident(ledger)
    s.rewrite([a.id, b.id], "billing-api returned 503 at 10:02; auth-service returned 500 at 10:07.", by="model-x")
    report = s.audit()
    assert report.ok and report.errors == 0 and report.warnings == 0
    assert report.chain_ok
    assert report.derived_checked == 1
    assert report.position == s.position and report.session == "inc"
    assert bool(report) is True


def test_an_invented_time_is_an_error_with_span_position_and_value(ledger):
    s, (a, b, c) = incident(ledger)
    d = s.rewrite([c.id], "The migration completed at 14:02.", by="model-x")
    report = s.audit()
    assert not report.ok
    [f] = report.of_kind("unsupported-specific")
    assert (f.severity, f.value, f.category) == ("error", "14:02", "time")
    assert f.span_ids == (d.id,)
    assert f.positions == (d.position,)
    assert d.id in f.message and "14:02" in f.message


def test_merged_failures_are_reported_with_their_source_positions(ledger):
    s, (a, b, c) = incident(ledger)
    d = s.rewrite([a.id, b.id], "Two requests were retried after the API failure.", by="model-x")
    report = s.audit()
    [f] = report.of_kind("merged-events")
    assert f.severity == "error" and not report.ok
    assert f.span_ids == (d.id,)
    assert f.positions == (d.position, a.position, b.position)


def test_dropped_specifics_are_reported_as_info_with_coverage(ledger):
    s, (a, b, c) = incident(ledger)
    d = s.rewrite([a.id], "billing-api returned 503.", by="model-x")
    report = s.audit()
    assert report.ok
    [f] = report.of_kind("dropped-specifics")
    assert f.severity == "info" and "10:02" in f.value
    [cov] = report.coverage
    assert cov.span_id == d.id and "10:02" in cov.dropped and 0 < cov.coverage < 1


def test_every_refused_rewrite_is_reported_as_attempted_drift(ledger):
    s, (a, b, c) = incident(ledger)
    d = s.rewrite([a.id], "billing-api returned 503 at 10:02.")
    with pytest.raises(RewritePolicyError):
        s.rewrite([d.id, b.id], "a summary of a summary", by="model-x")
    report = s.audit()
    [f] = report.of_kind("rewrite-refused")
    assert f.severity == "warning" and f.positions == (s.position,)
    assert "model-x" in f.message and d.id in f.message
    assert report.ok  # the rule held: nothing drifted


def test_a_rewrite_of_a_rewrite_in_a_permissive_session_is_an_error_while_live(ledger):
    s, (a, b, c) = incident(ledger, strict=False)
    d1 = s.rewrite([a.id], "billing-api returned 503 at 10:02.")
    d2 = s.rewrite([d1.id, b.id], "billing-api and auth-service failed.", by="model-x")
    assert d2.generation == 2
    report = s.audit()
    [f] = report.of_kind("generation-exceeded")
    assert f.severity == "error" and f.span_ids == (d2.id, d1.id) and not report.ok
    s.prune(d2.id)
    later = s.audit()
    [f] = later.of_kind("generation-exceeded")
    assert f.severity == "warning" and "no longer live" in f.message
    assert later.ok


def test_audit_at_a_position_uses_only_the_events_up_to_it(ledger):
    s, (a, b, c) = incident(ledger)
    before = s.position
    s.rewrite([c.id], "The migration completed at 14:02.", by="model-x")
    s.mark("after-drift")
    with pytest.raises(RewritePolicyError):
        s.rewrite(["d1"], "again")
    assert s.audit(at=before).ok
    assert s.audit(at=before).position == before
    at_mark = s.audit(at="after-drift")
    assert not at_mark.ok and at_mark.of_kind("rewrite-refused") == []
    assert len(s.audit().of_kind("rewrite-refused")) == 1
    assert audit(s.at(before)).ok  # the projection itself, on a view


def test_rederive_from_the_originals_clears_the_finding(ledger):
    s, (a, b, c) = incident(ledger)
    d = s.rewrite([c.id], "The migration completed at 14:02.", by="model-x")
    assert not s.audit().ok
    s.rederive(d.id, text="Migration 0042_add_index started on orders-db at 13:41.", by="model-y")
    assert s.audit().ok


def test_a_buffer_that_differs_from_its_rebuild_is_reported(mem_ledger):
    s, (a, b, c) = incident(mem_ledger)
    s.state.live.pop(b.id)  # a corrupted in-memory state (as a bad snapshot would produce)
    report = s.audit()
    [f] = report.of_kind("rebuild-mismatch")
    assert f.severity == "error" and b.id in f.span_ids and "missing" in f.message


def test_a_broken_hash_chain_is_reported_with_the_first_bad_position(tmp_path):
    path = tmp_path / "ledger.db"
    ledger = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    s, (a, b, c) = incident(ledger)
    s.rewrite([a.id], "billing-api returned 503 at 10:02.")
    ledger.close()
    con = sqlite3.connect(path)
    version = b.position
    (state,) = con.execute("SELECT state FROM stored_events WHERE originator_version=? AND topic='ctxledger:Observed'", (version,)).fetchone()
    ev = msgspec.msgpack.decode(state, type=EVENT_TYPES["Observed"])
    forged = encode_payload(msgspec.structs.replace(ev, text=ev.text.replace("500", "200")))
    con.execute("UPDATE stored_events SET state=? WHERE originator_version=? AND topic='ctxledger:Observed'", (forged, version))
    con.commit()
    con.close()
    ledger = Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())
    s = ledger.session("inc")
    report = s.audit()
    [f] = report.of_kind("chain-broken")
    assert f.severity == "error" and f.positions == (version,) and not report.chain_ok and not report.ok
    ledger.close()


def _forge_export(lines: list[str], edit) -> str:
    """Re-chain an export after ``edit(position, event_dict)`` changed some events: a log written by
    another tool, internally consistent but not by ctxledger's rules."""
    out, prev = [], b""
    for raw in lines:
        line = json.loads(raw)
        cls = EVENT_TYPES[line["type"]]
        body = dict(line["event"])
        edit(line["position"], body)
        body["prev"] = base64.b64encode(prev).decode()
        ev = msgspec.json.decode(json.dumps(body), type=cls)
        prev = chain_hash(encode_payload(ev))
        line["event"] = json.loads(msgspec.json.encode(ev))
        line["hash"] = prev.hex()
        out.append(json.dumps(line))
    return "\n".join(out) + "\n"


def test_an_imported_log_whose_sources_point_elsewhere_is_reported(ledger, mem_ledger):
    s, (a, b, c) = incident(mem_ledger)
    d = s.rewrite([a.id], "billing-api returned 503 at 10:02.")
    mark_position = s.mark("here")

    def edit(position, body):
        if position == d.position:
            body["source_positions"] = [mark_position]

    forged = _forge_export(s.export(), edit)
    imported = ledger.import_(io.StringIO(forged))
    report = imported.audit()
    assert not report.ok
    assert [f.kind for f in report.findings if f.severity == "error"] == ["source-mismatch", "missing-source"]
    missing = report.of_kind("missing-source")[0]
    assert missing.positions == (d.position, mark_position) and "Marked" in missing.message


def test_an_imported_log_with_derived_sources_is_reported(ledger, mem_ledger):
    s, (a, b, c) = incident(mem_ledger)
    d = s.rewrite([a.id], "billing-api returned 503 at 10:02.")

    def edit(position, body):
        if position == d.position:
            body["sources"] = ["d7"]

    imported = ledger.import_(io.StringIO(_forge_export(s.export(), edit)))
    report = imported.audit()
    assert ("derived-source", "error") in kinds(report)


def test_audit_of_a_fork_reads_through_its_parent(ledger):
    s, (a, b, c) = incident(ledger)
    s.rewrite([c.id], "The migration completed at 14:02.", by="model-x")
    fork = ledger.fork(s, at=c.position, name="inc-fork")
    fork.rewrite([c.id], "Migration 0042_add_index started at 13:41.")
    assert fork.audit().ok and fork.audit().chain_ok
    assert not s.audit().ok


def test_audit_of_an_encrypted_store(tmp_path):
    key = base64.b64encode(b"k" * 32).decode()
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'enc.db'}", token_counter=EstimateCounter(), cipher_key=key)
    s, (a, b, c) = incident(ledger)
    s.rewrite([c.id], "The migration completed at 14:02.")
    report = s.audit()
    assert report.chain_ok and [f.value for f in report.of_kind("unsupported-specific")] == ["14:02"]
    ledger.close()


def test_audit_inside_a_batch_sees_the_unsaved_commands(ledger):
    s, (a, b, c) = incident(ledger)
    with s.batch():
        s.rewrite([c.id], "The migration completed at 14:02.")
        report = s.audit()
        assert report.chain_ok and report.position == s.position
        assert [f.value for f in report.of_kind("unsupported-specific")] == ["14:02"]
    assert s.audit().chain_ok


# -- the grounding gate ------------------------------------------------------------------------


def test_the_gate_refuses_and_records_a_rewrite_with_unsupported_specifics(ledger):
    s, (a, b, c) = incident(ledger)
    spans_before = s.spans()
    position = s.position
    with pytest.raises(GroundingError) as info:
        s.rewrite([c.id], "The migration completed at 14:02.", by="model-x", gate=True)
    err = info.value
    assert [f["value"] for f in err.findings] == ["14:02"]
    assert "14:02" in err.message
    assert s.position == position + 1 and s.spans() == spans_before
    refusal = s.event(s.position)
    assert isinstance(refusal, RewriteRefused) and refusal.command == "rewrite"
    assert [f["value"] for f in refusal.findings] == ["14:02"] and refusal.by == "model-x"
    report = s.audit()
    assert report.ok and "grounding gate" in report.of_kind("rewrite-refused")[0].message


def test_the_gate_lets_a_grounded_rewrite_through(ledger):
    s, (a, b, c) = incident(ledger)
    d = s.rewrite([c.id], "Migration 0042_add_index started on orders-db at 13:41.", gate=True)
    assert isinstance(s.event(d.position), Rewritten)


def test_the_gate_is_off_by_default(ledger):
    s, (a, b, c) = incident(ledger)
    s.rewrite([c.id], "The migration completed at 14:02.")
    assert not s.audit().ok


def test_the_gate_on_rederive_reads_the_originals(ledger):
    s, (a, b, c) = incident(ledger)
    d = s.rewrite([c.id], "Migration 0042_add_index started at 13:41.")
    position = s.position
    with pytest.raises(GroundingError):
        s.rederive(d.id, text="Migration finished at 14:02.", gate=True)
    assert s.position == position + 1 and s.span(d.id).text == "Migration 0042_add_index started at 13:41."
    assert s.event(s.position).command == "rederive"
    s.rederive(d.id, text="Migration on orders-db began 13:41.", gate=True)


# -- bad input: a typed error and an unchanged log ------------------------------------------


@pytest.mark.parametrize("at", [0, 999, "no-such-mark", "1.5", True, 2.0])
def test_audit_at_a_bad_position(ledger, at):
    s, _ = incident(ledger)
    before = snapshot(s)
    with pytest.raises(PositionOutOfRangeError):
        s.audit(at=at)
    assert snapshot(s) == before


def test_importing_a_broken_export_is_refused_and_audit_unchanged(ledger, mem_ledger):
    s, (a, b, c) = incident(mem_ledger)
    lines = s.export()
    lines[1] = lines[1].replace("10:02", "10:03")
    with pytest.raises(ImportFormatError):
        ledger.import_(io.StringIO("\n".join(lines)))
    assert "inc" not in ledger


def test_gate_with_bad_input_is_refused_before_anything_is_written(ledger):
    s, (a, b, c) = incident(ledger)
    before = snapshot(s)
    with pytest.raises(InvalidInputError):
        s.rewrite([c.id], "", gate=True)
    with pytest.raises(InvalidInputError):
        s.rewrite([c.id], 42, gate=True)
    assert snapshot(s) == before


def test_an_opaque_provider_summary_is_reported_unchecked_never_clean():
    """A provider's encrypted compaction (the proxy records OpenAI's as meta.opaque) cannot be
    checked: the audit says so with a warning and counts it, and the CLI's verdict is UNCHECKED."""
    from click.testing import CliRunner

    from engine.cli import main

    led = Ledger.open("memory://", token_counter=EstimateCounter())
    s = led.create_session("opaque")
    s.observe("billing-api returned 503 at 13:58", role="tool", kind="tool_result", meta={"tool_call_id": "c"})
    s.rewrite(["o1"], "[compaction summary encrypted by the provider]", by="openai:compact",
              meta={"opaque": True, "by": "openai:compact"})
    report = s.audit()
    assert report.unchecked == 1 and report.derived_checked == 0
    assert [(f.kind, f.severity) for f in report.findings] == [("opaque-summary", "warning")]
    assert "cannot be checked" in report.findings[0].message
