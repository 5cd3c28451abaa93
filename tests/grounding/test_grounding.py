"""The grounding check on its own: specifics, normalization, merged events, coverage, the gate's
findings. Pure functions over texts; no store."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from projections.grounding import MERGED, UNSUPPORTED, check, gate_findings, merged_events
from projections.grounding.specifics import SourceIndex, extract


def flagged(derived: str, sources: list[str], severities=("error", "warning")) -> list[str]:
    """The values of the unsupported-specific findings."""
    return [
        f["value"]
        for f in check(derived, sources).findings
        if f["kind"] == UNSUPPORTED and f["severity"] in severities
    ]


# -- the seed's failure --------------------------------------------------------------------------


def test_the_seeds_invented_time_is_flagged_as_an_error():
    sources = [
        "Running migration 0042_add_index on orders-db (started 13:41).",
        "migration progress: 61% after 18 minutes",
    ]
    result = check("The migration completed at 14:02.", sources)
    [finding] = [f for f in result.findings if f["kind"] == UNSUPPORTED]
    assert finding["value"] == "14:02"
    assert finding["category"] == "time"
    assert finding["severity"] == "error"
    assert "13:41" in finding["message"]  # the reviewer sees what the sources do say


def test_the_seeds_merged_failures_are_flagged():
    sources = [
        "GET /v1/invoices -> 503 from billing-api at 10:02 (upstream timeout)",
        "POST /v1/sessions -> 500 from auth-service at 10:07 (token cache miss)",
    ]
    [finding] = merged_events("Retrying after the API failure.", sources)
    assert finding["kind"] == MERGED
    assert finding["severity"] == "error"
    assert finding["value"] == "the API failure"
    assert set(finding["entities"]) == {"billing-api", "auth-service"}
    assert "2 distinct failures" in finding["message"]


# -- normalization: the same fact written differently is supported ------------------------------


@pytest.mark.parametrize(
    "derived, source",
    [
        ("finished at 14:02", "done at 14:02:00"),
        ("finished at 14:02", "done at 14:02:37"),
        ("finished at 2:02 PM", "done at 14:02"),
        ("finished at 2pm", "done at 14:00"),
        ("retried three times", "retried 3 times"),
        ("retried 3 times", "retried three times"),
        ("a 30s timeout", "timeout after 30 seconds"),
        ("a 30 sec timeout", "timeout: thirty seconds"),
        ("took 1.5 minutes", "took 90 seconds"),
        ("took about a minute and a half", "took 93 seconds"),
        ("1.5 GB of memory", "rss=1536 MB"),
        ("12 percent of requests", "12% of requests"),
        ("the billing API", "billing-api returned 503"),
        ("BillingApi", "billing-api returned 503"),
        ("Billing-API", "billing_api returned 503"),
        ("roughly 1,200 rows", "copied 1,187 rows"),
        ("over 1,000 rows", "copied 1,187 rows"),
        ("on Nov 11", "on 2026-11-11"),
        ("on 11 November 2026", "on 2026-11-11 at 14:02"),
        ("released v2", "released 2.0.0"),
        ("running 2.3", "running v2.3.1"),
        ("commit a1b2c3d", "HEAD is a1b2c3d4e5f60718293a"),
        ("see main.py", "edited /srv/app/src/main.py"),
        ("see https://status.example.com", "details: https://status.example.com/incidents/42"),
        ("mail OPS@example.com", "contact ops@example.com"),
        ("the 'Connection Refused' error", "error: connection refused (ECONNREFUSED)"),
        ("host DB-01.prod.internal", "db-01.prod.internal is down"),
        ("5xx errors", "GET /v1/cart -> 503"),
        ("INC-4521", "opened inc-4521"),
        ("user_id", "missing field user_id"),
    ],
)
def test_equivalent_forms_are_supported(derived, source):
    assert flagged(derived, [source]) == []


def test_a_more_precise_time_than_the_source_is_not_supported():
    assert flagged("finished at 14:02:37", ["done at 14:02"]) == ["14:02:37"]


# -- altered and invented specifics --------------------------------------------------------------


@pytest.mark.parametrize(
    "derived, source, value",
    [
        ("timed out after 45s", "timed out after 30s", "45s"),
        ("returned 502", "returned 503", "502"),
        ("finished at 14:20", "finished at 14:02", "14:20"),
        ("took 30 minutes", "took 30 seconds", "30 minutes"),
        ("deployed v2.4.0", "deployed v2.3.1", "v2.4.0"),
        ("see INC-1243", "see INC-1234", "INC-1243"),
        ("on Nov 12", "on 2026-11-11", "Nov 12"),
        ("request 7c9e6679-7425-40de-944b-e07fc1f90ae7", "request 7c9e6679-7425-40de-944b-e07fc1f90ae8", "7c9e6679-7425-40de-944b-e07fc1f90ae7"),
        ("edited /etc/nginx/nginx.conf", "edited /etc/app/config.yaml", "/etc/nginx/nginx.conf"),
        ("see https://grafana.example.com/d/api", "see https://status.example.com", "https://grafana.example.com/d/api"),
        ("paged alice@example.com", "paged bob@example.com", "alice@example.com"),
        ("auth-service failed", "billing-api failed", "auth-service"),
        ("PaymentService threw", "InvoiceMapper threw", "PaymentService"),
        ("error 'disk quota exceeded'", "error: connection refused", "'disk quota exceeded'"),
        ("exactly 1,200 rows", "copied 1,187 rows", "1,200"),
        ("commit 9f8e7d6c", "commit a1b2c3d4", "9f8e7d6c"),
        ("on db-02", "on db-01", "db-02"),
    ],
)
def test_altered_or_invented_specifics_are_errors(derived, source, value):
    findings = [f for f in check(derived, [source]).findings if f["kind"] == UNSUPPORTED]
    assert [f["value"] for f in findings] == [value]
    assert findings[0]["severity"] == "error"


def test_a_small_count_absent_from_the_sources_is_information_not_drift():
    # the summarizer may have counted: nothing says otherwise (the contract's "info")
    findings = check("three services failed", ["billing-api failed", "auth-service failed"]).findings
    counts = [f for f in findings if f["kind"] == UNSUPPORTED]
    assert [(f["value"], f["severity"]) for f in counts] == [("three", "info")]


@pytest.mark.parametrize(
    "derived, source, value",
    [("approved by Priya", "approved by Marcus", "Priya"), ("escalated to Rotili", "escalated to the on-call", "Rotili")],
)
def test_a_name_no_source_uses_is_a_warning(derived, source, value):
    """A proper name is no literal of the contract (not a quote, number, id, hash, path or time):
    a person no source names, as the summary's actor, is positive evidence of an invention, a warning."""
    findings = [f for f in check(derived, [source]).findings if f["kind"] == UNSUPPORTED]
    assert [(f["value"], f["severity"]) for f in findings] == [(value, "warning")]


@pytest.mark.parametrize(
    "derived",
    ["Latency comes from Prometheus now.", "No HSTS header is set.", "The SLO is on p999.", "It listens on IPv6 too."],
)
def test_a_one_word_name_that_is_no_actor_is_information(derived):
    """A word of the field's vocabulary (a product, an acronym, a metric) in no source is no evidence
    either way: information, never an alarm."""
    findings = [f for f in check(derived, ["latency 1.84 s, header X-Frame-Options set, listening on 0.0.0.0"]).findings
                if f["kind"] == UNSUPPORTED]
    assert findings and {f["severity"] for f in findings} == {"info"}


def test_a_joined_identifier_in_no_source_stays_an_error():
    findings = [f for f in check("Set maxReplicas on the LiveData observer.", ["observer registered"]).findings
                if f["kind"] == UNSUPPORTED]
    assert [(f["value"], f["severity"]) for f in findings] == [("maxReplicas", "error"), ("LiveData", "error")]


@pytest.mark.parametrize("word", ["Understood", "Chose", "Immediate", "Framework", "Core", "Major", "JavaScript"])
def test_a_capitalized_english_word_is_no_name(word):
    """Words English writes in lower case (by the tokenizer's vocabulary) name nothing, capitalized
    at a sentence start, in a heading or mid-sentence for emphasis."""
    for derived in (f"{word} the plan.", f"The {word} step is next.", f"## {word}"):
        assert [f for f in check(derived, ["the plan, the step"]).findings if f["kind"] == UNSUPPORTED] == []


def test_a_count_of_the_source_observations_is_supported():
    assert flagged("two services failed", ["billing-api failed", "auth-service failed"]) == []


def test_a_count_that_contradicts_the_sources_is_an_error():
    findings = check("retried 5 times", ["retried 3 times"]).findings
    assert [(f["value"], f["severity"]) for f in findings if f["kind"] == UNSUPPORTED] == [("5", "error")]


def test_specifics_are_matched_against_the_union_of_all_sources():
    sources = ["billing-api returned 503 at 10:02", "auth-service returned 500 at 10:07"]
    assert flagged("billing-api 503 at 10:02; auth-service 500 at 10:07", sources) == []


# -- faithful paraphrases are not flagged --------------------------------------------------------

PARAPHRASES = [
    (
        ["$ kubectl rollout status deploy/checkout -n prod\nWaiting for 3 of 4 updated replicas...\ndeployment \"checkout\" successfully rolled out"],
        "The checkout deployment in prod rolled out successfully; 3 of 4 replicas were updated first.",
    ),
    (
        ["pytest: 412 passed, 3 failed, 2 skipped in 93.4s\nFAILED tests/test_cart.py::test_discount - AssertionError"],
        "Tests: 412 passed and 3 failed (including test_discount in tests/test_cart.py) in about 93 seconds.",
    ),
    (
        ["User: please keep the old API version v1 running until Friday."],
        "The user asked to keep API v1 running until Friday.",
    ),
    (
        ["ERROR 2026-11-11T14:02:07Z payments-gateway: connection pool exhausted (max=50)", "WARN 14:03:10 payments-gateway: retrying"],
        "At 14:02 on Nov 11 the payments-gateway ran out of pool connections (max 50) and started retrying at 14:03.",
    ),
    (
        ["Dana Kim: I approved the rollback of INC-4521."],
        "Dana Kim approved the rollback for INC-4521.",
    ),
    (
        ["disk usage on db-01.prod.internal: 91% (1.8 TB of 2 TB)"],
        "Disk on db-01.prod.internal is at 91%, 1.8 TB used out of 2 TB.",
    ),
]


@pytest.mark.parametrize("sources, derived", PARAPHRASES)
def test_faithful_paraphrases_have_no_unsupported_specifics(sources, derived):
    result = check(derived, sources)
    assert [f for f in result.findings if f["severity"] in ("error", "warning")] == []


# -- merged events ------------------------------------------------------------------------------

FAILURES = [
    "billing-api returned 503 at 10:02 (upstream timeout)",
    "auth-service returned 500 at 10:07 (token cache miss)",
]


@pytest.mark.parametrize(
    "derived, severity",
    [
        ("We retried after the API failure.", "error"),
        ("The outage is over.", "error"),
        ("The billing-api failure delayed the release.", "warning"),
    ],
)
def test_collapsing_two_failures_into_one_is_flagged(derived, severity):
    [finding] = merged_events(derived, FAILURES)
    assert finding["severity"] == severity


@pytest.mark.parametrize(
    "derived",
    [
        "billing-api returned 503 at 10:02 and auth-service returned 500 at 10:07.",
        "Two API failures: billing-api and auth-service.",
        "Both services failed.",
        "There were API failures this morning.",
        "The billing-api failure and the auth-service failure were unrelated.",
        "Nothing else happened.",
    ],
)
def test_keeping_the_failures_apart_is_not_flagged(derived):
    assert merged_events(derived, FAILURES) == []


def test_one_service_failing_twice_is_one_event_source():
    sources = ["billing-api returned 503 at 10:02", "billing-api returned 503 again at 10:05"]
    assert merged_events("The billing-api failure is resolved.", sources) == []


# -- coverage --------------------------------------------------------------------------------


def test_coverage_lists_the_specifics_the_summary_dropped():
    result = check("billing-api failed at 10:02.", ["billing-api returned 503 at 10:02 after 812 ms"])
    assert set(result.dropped) == {"503", "812 ms"}
    assert result.source_specifics == 4
    assert result.coverage == pytest.approx(0.5)


# -- the gate's findings --------------------------------------------------------------------------


def test_gate_findings_are_errors_only_and_serializable():
    findings = gate_findings("two services failed; the migration completed at 14:02", ["billing-api failed", "auth-service failed"])
    assert [f["value"] for f in findings] == ["14:02"]
    assert all(f["severity"] == "error" and f["kind"] == UNSUPPORTED and f["message"] for f in findings)
    assert msgspec.json.decode(msgspec.json.encode(findings)) == findings


def test_gate_findings_pass_a_faithful_rewrite():
    assert gate_findings("billing-api returned 503 at 10:02", FAILURES) == []


def test_the_check_is_deterministic():
    derived = "The API failure at 14:02 delayed the migration to v2.4 (INC-99)."
    first = check(derived, FAILURES)
    assert check(derived, FAILURES).findings == first.findings


# -- extraction invariants ---------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        "billing-api", "auth-service", "returned", "503", "at", "14:02:07", "after", "812 ms", "req-00a3f1",
        "/var/log/app/error.log", "v2.3.1", "INC-1234", "2026-11-11", "Nov 11", "three", "retries", "30s",
        "timeout=45", "(10.0.3.12)", "db-01.prod.internal", "PaymentService", "user_id", "ERR_TIMEOUT",
        "a1b2c3d4e5", "https://status.example.com/x", "ops@example.com", "'connection refused'", "Dana",
        "the", "failed", "Summary:", "1,204 rows", "12%", "1.5 GB", "and", ";", ".", "\n",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(_PIECES, min_size=1, max_size=12).map(" ".join), min_size=1, max_size=3))
def test_a_verbatim_copy_of_the_sources_is_always_grounded(sources):
    """Whatever the sources say, a summary that repeats them word for word invents nothing."""
    for derived in ("\n".join(sources), sources[0]):
        values = [f["value"] for f in check(derived, sources).findings if f["kind"] == UNSUPPORTED and f["severity"] == "error"]
        assert values == []


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_extraction_never_fails_and_spans_point_into_the_text(text):
    for sp in extract(text):
        assert 0 <= sp.start <= sp.end <= len(text)
        if sp.category != "quote":
            assert sp.text == text[sp.start : sp.end]
    SourceIndex.build([text])


# -- the hedge shortcut ------------------------------------------------------------------------

_HEDGE_PIECES = [
    "about", "About", "around", "approximately", "approx.", "approx", "roughly", "nearly", "almost",
    "~", "some", "circa", "ca.", "over", "more than", "MORE  THAN", "above", "at least", "upwards of",
    ">", ">=", "exceeding", "under", "less than", "fewer than", "below", "at most", "up to", "<", "<=",
    "within", "moreover", "Xabout", "x.approx.", "5over", "ſome", "é", "(", " ", "\n", "\t", "-", ".",
    "the", "to", "of", "most", "than", "least", "a", "1",
]


@given(st.lists(st.sampled_from(_HEDGE_PIECES), max_size=8), st.sampled_from(["", " ", "  ", "\n"]))
@settings(max_examples=500, deadline=None)
def test_the_hedge_shortcut_agrees_with_the_plain_search(pieces, gap):
    """_hedge skips the regex search when the text before a number cannot end with a hedge; it must
    answer exactly what the search alone answers."""
    from projections.grounding.specifics import _HEDGE_BEFORE, _hedge

    def reference(text: str, start: int) -> str:
        m = _HEDGE_BEFORE.search(text, max(0, start - 24), start)
        if m is None or (m.start() > 0 and text[m.start() - 1].isalnum()):
            return ""
        return m.lastgroup or ""

    text = "".join(pieces) + gap + "42 units"
    start = text.rindex("42")
    assert _hedge(text, start) == reference(text, start)
