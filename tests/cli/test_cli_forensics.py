"""The read-side commands through the real CLI, on a real SQLite file: output, --json and exit codes
(audit: 0 clean, 1 drift, 2 usage errors)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from engine import EstimateCounter, Ledger
from engine.cli import main


@pytest.fixture
def db(tmp_path):
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    ledger = Ledger.open(url, token_counter=EstimateCounter())
    clean = ledger.create_session("clean")
    a = clean.observe("billing-api returned 503 at 10:02")
    clean.rewrite([a.id], "billing-api failed (503) at 10:02", by="model-x")
    s = ledger.create_session("drift")
    a = s.observe("GET /v1/invoices -> 503 from billing-api at 10:02", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
    b = s.observe("POST /v1/sessions -> 500 from auth-service at 10:07", role="tool", kind="tool_result", meta={"tool_call_id": "c2"})
    c = s.observe("Running migration 0042_add_index on orders-db (started 13:41)")
    s.mark("before")
    s.rewrite([a.id, b.id], "Retried after the API failure.", by="model-x")
    s.rewrite([c.id], "The migration completed at 14:02.", by="model-x")
    s.prune("d1")
    ledger.close()
    return url


def run(db, *args):
    return CliRunner().invoke(main, ["--db", db, *args], catch_exceptions=False)


def snapshot(db, name):
    with Ledger.open(db, token_counter=EstimateCounter()) as ledger:
        s = ledger.session(name)
        return s.position, list(s.events())


# -- audit --------------------------------------------------------------------------------------


def test_audit_exits_0_when_clean(db):
    r = run(db, "audit", "clean")
    assert r.exit_code == 0, r.output
    assert r.output.startswith("audit of 'clean' at position 3: clean")


def test_audit_exits_1_on_drift_and_names_it(db):
    r = run(db, "audit", "drift")
    assert r.exit_code == 1
    assert "DRIFT" in r.output and "unsupported-specific" in r.output and "'14:02'" in r.output


def test_audit_json_is_the_report(db):
    r = run(db, "audit", "drift", "--json")
    assert r.exit_code == 1
    report = json.loads(r.output)
    assert report["ok"] is False and report["session"] == "drift"
    values = [f["value"] for f in report["findings"] if f["kind"] == "unsupported-specific"]
    assert values == ["14:02"]
    assert {"kind", "severity", "span_ids", "positions", "message", "value"} <= set(report["findings"][0])


def test_audit_at_an_earlier_position(db):
    r = run(db, "audit", "drift", "--at", "before")
    assert r.exit_code == 0 and "at position 5: clean" in r.output


def test_audit_severity_filter(db):
    r = run(db, "audit", "drift", "--severity", "error")
    assert r.exit_code == 1 and "info " not in r.output and "error " in r.output


@pytest.mark.parametrize(
    "args",
    [
        ("audit", "no-such-session"),
        ("audit", "drift", "--at", "999"),
        ("audit", "drift", "--at", "no-such-mark"),
        ("audit", "drift", "--severity", "loud"),
        ("audit",),
    ],
)
def test_audit_usage_errors_exit_2_and_change_nothing(db, args):
    before = snapshot(db, "drift")
    r = run(db, *args)
    assert r.exit_code == 2
    assert snapshot(db, "drift") == before


# -- blame --------------------------------------------------------------------------------------


def test_blame_names_the_rewrite_that_introduced_text(db):
    r = run(db, "blame", "drift", "14:02")
    assert r.exit_code == 1  # live and NOT GROUNDED: a drift finding, exit 1 as audit
    assert "NOT GROUNDED" in r.output and "introduced by rewrite at position 7 by model-x" in r.output


def test_blame_json_and_removed_text(db):
    r = run(db, "blame", "drift", "API failure", "--json")
    assert r.exit_code == 0
    [hit] = json.loads(r.output)
    assert hit["span_id"] == "d1" and hit["live"] is False and hit["removed_type"] == "Pruned"


def test_blame_exits_1_when_the_text_is_nowhere(db):
    r = run(db, "blame", "drift", "kubernetes")
    assert r.exit_code == 1 and "in no span" in r.output


def test_blame_usage_errors(db):
    assert run(db, "blame", "drift", " ").exit_code == 2
    assert run(db, "blame", "drift").exit_code == 2


# -- lineage --------------------------------------------------------------------------------------


def test_lineage_prints_a_tree_and_a_history(db):
    r = run(db, "lineage", "drift", "d1")
    assert r.exit_code == 0
    assert "d1: derived, pruned at position 8" in r.output
    assert "├── o1  observed at 2" in r.output and "└── o2  observed at 3" in r.output
    assert "Pruned" in r.output
    data = json.loads(run(db, "lineage", "drift", "o3", "--json").output)
    assert data["descendants"] == ["d2"] and data["status"] == "rewritten"


@pytest.mark.parametrize("span", ["o99", "x1", "d3"])
def test_lineage_unknown_span_exits_2(db, span):
    r = run(db, "lineage", "drift", span)
    assert r.exit_code == 2 and "error" in r.output


# -- diff ---------------------------------------------------------------------------------------


def test_diff_stat_and_details(db):
    r = run(db, "diff", "drift", "before")
    assert r.exit_code == 0
    assert r.output.startswith("diff 'drift' 5..8: 3 events; +1 -3 spans (3 rewritten)")
    assert "- o3" in r.output and "rewritten into d2 at 7" in r.output and "+ d2" in r.output
    data = json.loads(run(db, "diff", "drift", "--json", "--", "before", "-1").output)
    assert data["a"] == 5 and data["b"] == 8 and data["stat"].startswith("3 events")


def test_diff_bad_position_exits_2(db):
    assert run(db, "diff", "drift", "0").exit_code == 2
    assert run(db, "diff", "drift", "2", "99").exit_code == 2


# -- timeline ----------------------------------------------------------------------------------


def test_timeline_table_csv_and_json(db):
    r = run(db, "timeline", "drift")
    assert r.exit_code == 0 and len(r.output.strip().splitlines()) == 1 + 8
    rows = list(csv.DictReader(io.StringIO(run(db, "timeline", "drift", "--csv").output)))
    assert [int(row["position"]) for row in rows] == list(range(1, 9))
    assert rows[-1]["derived"] == "1" and rows[-1]["observed"] == "0"
    data = json.loads(run(db, "timeline", "drift", "--json", "--at", "4").output)
    assert [p["position"] for p in data["points"]] == [1, 2, 3, 4]
    every = run(db, "timeline", "drift", "--csv", "--every", "4").output.strip().splitlines()
    assert [line.split(",")[0] for line in every[1:]] == ["1", "5", "8"]


def test_timeline_usage_errors(db):
    assert run(db, "timeline", "drift", "--every", "0").exit_code == 2
    assert run(db, "timeline", "nope").exit_code == 2


# -- help ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["audit", "blame", "lineage", "diff", "timeline"])
def test_each_command_has_help_with_an_example(command):
    r = CliRunner().invoke(main, [command, "--help"])
    assert r.exit_code == 0 and "Example:" in r.output and f"ctxledger {command}" in r.output
