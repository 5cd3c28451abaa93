"""The measurement data from real sessions is well formed: every transcript is the byte-identical copy its
manifest names, every label points at lines that exist and at claims the summary really makes, every
planted sentence has exactly one anchor and invents only what the model never saw, and the second
author's cases are complete."""

from __future__ import annotations

import collections
import re
import json
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import real_data  # noqa: E402

TRANSCRIPTS = real_data.real_transcripts()
BY_PATH = {t["path"]: t for t in TRANSCRIPTS}
LABELS = real_data.labels()
PLANTED = real_data.planted_cases()
SECOND = real_data.second_author_cases()


def _present(entry: dict) -> None:
    if not entry["present"]:
        pytest.skip(f"{entry['path']} is not on this machine (see benchmarks/data/real/README.md to fetch it)")


def _lines(path: str) -> list[str]:
    return real_data.resolve(path).read_text(encoding="utf-8").split("\n")


def _seen_text(entry: dict, boundary: int) -> str:
    """Everything before the boundary plus the compaction call's prompt lines, lower-cased: the raw JSON
    lines are enough to tell whether a literal was ever shown (JSON escapes aside, checked both ways)."""
    lines = _lines(entry["path"])[: boundary - 1]
    for call in entry["compaction_calls"]:
        call_lines = _lines(call)
        lines += [line for line in call_lines if '"type":"user"' in line]
    raw = "\n".join(lines)
    decoded = []
    for line in lines:
        if line.strip():
            decoded.append(json.dumps(json.loads(line), ensure_ascii=False))
    return (raw + "\n" + "\n".join(decoded)).lower()


@pytest.mark.parametrize("entry", TRANSCRIPTS, ids=lambda e: e["name"])
def test_transcript_is_the_copy_the_manifest_names(entry):
    _present(entry)
    path = Path(entry["file"])
    assert real_data.sha256_of(path) == entry["sha256"]
    assert path.stat().st_size == entry["bytes"]
    for sub, digest in entry["subagent_sha256"].items():
        assert real_data.sha256_of(real_data.resolve(sub)) == digest, sub
    lines = _lines(entry["path"])
    assert entry["compactions"], "a real transcript here has at least one compaction"
    for compaction in entry["compactions"]:
        boundary = json.loads(lines[compaction["boundary_line"] - 1])
        assert boundary["type"] == "system" and boundary["subtype"] == "compact_boundary"
        assert boundary["compactMetadata"]["trigger"] == compaction["trigger"]
        summary = json.loads(lines[compaction["summary_line"] - 1])
        assert summary.get("isCompactSummary") is True
    assert entry["licence_file"] and real_data.resolve(entry["licence_file"]).is_file()


def test_manifest_entries_are_complete():
    assert len(TRANSCRIPTS) >= 2
    names = [t["name"] for t in TRANSCRIPTS]
    assert len(set(names)) == len(names)
    for t in TRANSCRIPTS:
        for field in ("source_repo", "source_commit", "source_path", "licence", "sha256", "compaction_calls"):
            assert t[field], (t["name"], field)
        assert len(t["source_commit"]) == 40


@pytest.mark.parametrize("path", sorted(LABELS), ids=lambda p: Path(p).stem[:20])
def test_labels_point_at_real_lines_and_real_claims(path):
    entry = BY_PATH[path]
    _present(entry)
    record = LABELS[path]
    boundary = record["compaction_line"]
    compaction = next(c for c in entry["compactions"] if c["boundary_line"] == boundary)
    summary = real_data.summary_text(path, boundary)
    n_lines = len([line for line in _lines(path) if line])
    assert record["compaction_call"] in entry["compaction_calls"]
    call_lines = _lines(record["compaction_call"])
    assert record["claims"], "every labelled compaction has claims"
    for claim in record["claims"]:
        assert claim["text"] in summary, claim["text"][:80]
        assert claim["label"] in real_data.LABEL_VALUES
        for n in claim["evidence_lines"]:
            assert 1 <= n <= n_lines, (claim["text"][:60], n)
            # What the model saw: the lines before the boundary, or (manual /compact) the harness rows
            # holding the user's instruction just after the summary.
            after_summary = compaction["trigger"] == "manual" and boundary + 1 < n <= boundary + 4
            assert n < boundary or after_summary, (claim["text"][:60], n)
        for n in claim.get("compaction_call_lines", []):
            assert 1 <= n <= len(call_lines) and '"type":"user"' in call_lines[n - 1], (claim["text"][:60], n)
        if claim["label"] == "faithful":
            assert claim["evidence_lines"] or claim.get("compaction_call_lines"), claim["text"][:80]
        else:
            assert claim["note"], claim["text"][:80]


def test_every_label_file_key_is_a_manifest_transcript():
    assert set(LABELS) <= set(BY_PATH)
    assert len(LABELS) >= 2


def test_planted_cases_are_complete_and_of_known_kinds():
    ids = [c["id"] for c in PLANTED]
    assert len(set(ids)) == len(ids)
    per = collections.Counter((c["transcript"], c["kind"]) for c in PLANTED)
    for transcript in {c["transcript"] for c in PLANTED}:
        assert transcript in BY_PATH
        for kind in real_data.PLANTED_KINDS:
            assert per[(transcript, kind)] >= 4, (transcript, kind)
    for case in PLANTED:
        assert case["kind"] in real_data.PLANTED_KINDS
        assert case["sentence"].strip() and case["note"].strip() and case["after"]


@pytest.mark.parametrize("path", sorted({c["transcript"] for c in PLANTED}), ids=lambda p: Path(p).stem[:20])
def test_planted_anchor_occurs_once_and_invented_literals_were_never_seen(path):
    entry = BY_PATH[path]
    _present(entry)
    cases = [c for c in PLANTED if c["transcript"] == path]
    summaries = {}
    seen = {}
    for case in cases:
        line = case["compaction_line"]
        if line not in summaries:
            summaries[line] = real_data.summary_text(path, line)
            seen[line] = _seen_text(entry, line)
        summary = summaries[line]
        assert summary.count(case["after"]) == 1, case["id"]
        planted = real_data.plant(summary, case)
        assert len(planted) == len(summary) + len(case.get("prefix", " ")) + len(case["sentence"])
        assert planted.replace(case.get("prefix", " ") + case["sentence"], "", 1) == summary
        assert case["sentence"] not in summary, case["id"]
        for literal in case["invented"]:
            assert literal.lower() not in summary.lower(), (case["id"], literal)
            assert literal.lower() not in seen[line], (case["id"], literal)


def test_second_author_cases_are_complete():
    assert len(SECOND) >= 60
    ids = [c["id"] for c in SECOND]
    assert len(set(ids)) == len(ids)
    styles = collections.Counter(c["style"] for c in SECOND)
    assert len(styles) >= 6
    for case in SECOND:
        assert case["summary"].strip()
        assert case["sources"]
        for source in case["sources"]:
            assert source["role"] in ("user", "assistant", "tool"), case["id"]
            assert source["kind"] in ("message", "tool_call", "tool_result"), case["id"]
            assert isinstance(source["text"], str)
        assert any(s["text"].strip() for s in case["sources"])


def test_plant_refuses_a_missing_or_repeated_anchor():
    case = {"id": "x", "after": "beta", "sentence": "Inserted.", "prefix": " "}
    with pytest.raises(ValueError, match="0 times"):
        real_data.plant("alpha gamma", case)
    with pytest.raises(ValueError, match="2 times"):
        real_data.plant("beta and beta", case)


@given(
    head=st.text(alphabet="abc .\n-", max_size=40),
    tail=st.text(alphabet="abc .\n-", max_size=40),
    sentence=st.text(alphabet="xyz .", min_size=1, max_size=20),
    prefix=st.sampled_from([" ", "\n   - ", "\n"]),
)
def test_plant_inserts_right_after_the_anchor(head, tail, sentence, prefix):
    anchor = "ANCHOR!"
    summary = head + anchor + tail
    planted = real_data.plant(summary, {"after": anchor, "sentence": sentence, "prefix": prefix})
    assert planted == head + anchor + prefix + sentence + tail


# ---- held-out sets (written blind; same formats as the dev sets above) ----

PLANTED_HELDOUT = real_data.planted_heldout_cases()
SECOND_HELDOUT = real_data.second_author_heldout_cases()
# The second held-out pair, written blind by a third author; it gets the same checks as the first.
PLANTED_HELDOUT2 = real_data.planted_heldout2_cases()
SECOND_HELDOUT2 = real_data.second_author_heldout2_cases()
# The third held-out pair, written blind by a fourth author; the same checks again.
PLANTED_HELDOUT3 = real_data.planted_heldout3_cases()
SECOND_HELDOUT3 = real_data.second_author_heldout3_cases()
# The fourth held-out pair, written blind by a fifth and a sixth author.
PLANTED_HELDOUT4 = real_data.planted_heldout4_cases()
SECOND_HELDOUT4 = real_data.second_author_heldout4_cases()
PLANTED_SETS = {
    "heldout": PLANTED_HELDOUT, "heldout2": PLANTED_HELDOUT2, "heldout3": PLANTED_HELDOUT3, "heldout4": PLANTED_HELDOUT4,
    # planted set 5, by a tenth author (no second-author half)
    "heldout5": real_data.planted_heldout5_cases(),
}
SECOND_SETS = {
    "heldout": SECOND_HELDOUT, "heldout2": SECOND_HELDOUT2, "heldout3": SECOND_HELDOUT3, "heldout4": SECOND_HELDOUT4,
    # sets 5, 6 and 7: faithful summaries only, by three more authors
    "heldout5": real_data.second_author_heldout5_cases(), "heldout6": real_data.second_author_heldout6_cases(),
    "heldout7": real_data.second_author_heldout7_cases(),
}
LITERAL_KINDS = ("invented-quote", "invented-number", "invented-id")


def _other_planted(name: str) -> list[dict]:
    return PLANTED + [c for other, cases in PLANTED_SETS.items() if other != name for c in cases]


@pytest.mark.parametrize("name", sorted(PLANTED_SETS))
def test_heldout_planted_cases_are_complete_and_spread_over_every_summary(name):
    cases = PLANTED_SETS[name]
    others = _other_planted(name)
    ids = [c["id"] for c in cases]
    assert len(set(ids)) == len(ids)
    assert not set(ids) & {c["id"] for c in others}, "held-out ids are new"
    assert not {c["sentence"] for c in cases} & {c["sentence"] for c in others}, "held-out sentences are new"
    assert collections.Counter(c["kind"] for c in cases) == {kind: 10 for kind in real_data.PLANTED_KINDS}
    per = collections.Counter((c["transcript"], c["kind"]) for c in cases)
    assert {c["transcript"] for c in cases} == set(BY_PATH), "every real summary gets held-out cases"
    for transcript in BY_PATH:
        for kind in real_data.PLANTED_KINDS:
            assert per[(transcript, kind)] >= 2, (transcript, kind)
    for case in cases:
        assert case["sentence"].strip() and case["note"].strip() and case["after"]
        assert case["compaction_line"] in [c["boundary_line"] for c in BY_PATH[case["transcript"]]["compactions"]]
        for literal in case["invented"]:
            assert literal and literal in case["sentence"], (case["id"], literal)
        if case["kind"] in LITERAL_KINDS:
            assert case["invented"], f"{case['id']}: a planted literal must be listed"


@pytest.mark.parametrize(
    ("name", "path"),
    sorted({(name, c["transcript"]) for name, cases in PLANTED_SETS.items() for c in cases}),
    ids=lambda v: Path(v).stem[:20] if "/" in v else v,
)
def test_heldout_anchor_occurs_once_and_invented_literals_are_absent_from_everything_seen(name, path):
    """Absent from the main file before the boundary AND from every line of the compaction call's own
    transcript (where hook reminders and project context live), and from the summary itself."""
    entry = BY_PATH[path]
    _present(entry)
    cases = [c for c in PLANTED_SETS[name] if c["transcript"] == path]
    line = cases[0]["compaction_line"]
    summary = real_data.summary_text(path, line)
    seen = real_data.seen_text(entry, line)
    for case in cases:
        assert summary.count(case["after"]) == 1, case["id"]
        planted = real_data.plant(summary, case)
        assert planted.replace(case["prefix"] + case["sentence"], "", 1) == summary
        assert real_data.seen_literals(entry, line, case["invented"], seen) == [], case["id"]
        assert not [lit for lit in case["invented"] if lit.lower() in summary.lower()], case["id"]


def test_seen_text_covers_the_compaction_call_not_only_the_main_file():
    """The absence check can fail: a hook reminder that only the compaction call holds counts as seen,
    and so does a tool output of the main file; a string nobody wrote does not."""
    entry = next(t for t in TRANSCRIPTS if t["name"] == "spotter-8463c716")
    _present(entry)
    line = entry["compactions"][0]["boundary_line"]
    main_only = "\n".join(_lines(entry["path"])[: line - 1]).lower()
    call_only = "cyclomatic complexity is 10, max is 9"
    assert call_only not in main_only, "fixture assumption: this reminder is only in the compaction call"
    seen = real_data.seen_text(entry, line)
    assert real_data.seen_literals(entry, line, [call_only.upper(), "49 tests, 0 failures"], seen) == [
        call_only.upper(),
        "49 tests, 0 failures",
    ]
    assert real_data.seen_literals(entry, line, ["zq-never-written-7731"], seen) == []


_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_DOUBLE_QUOTED = re.compile(r"\"([^\"\n]{3,})\"")
_HEX_ID = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")


@pytest.mark.parametrize("name", sorted(SECOND_SETS))
def test_heldout_second_author_cases_are_complete_and_in_new_styles(name):
    cases = SECOND_SETS[name]
    others = SECOND + [c for other, more in SECOND_SETS.items() if other != name for c in more]
    assert len(cases) >= 40
    ids = [c["id"] for c in cases]
    assert len(set(ids)) == len(ids)
    assert not set(ids) & {c["id"] for c in others}
    styles = collections.Counter(c["style"] for c in cases)
    assert len(styles) >= 8 and min(styles.values()) >= 3, styles
    assert not set(styles) & {c["style"] for c in others}, "held-out styles are ones no other set has"
    assert not {c["summary"] for c in cases} & {c["summary"] for c in others}, "held-out summaries are new"
    for case in cases:
        assert case["summary"].strip() and case["sources"], case["id"]
        open_calls = []
        for source in case["sources"]:
            assert source["role"] in ("user", "assistant", "tool"), case["id"]
            assert source["kind"] in ("message", "tool_call", "tool_result"), case["id"]
            assert isinstance(source["text"], str)
            # a harness joins a call to its result by id: every result answers an earlier call
            if source["kind"] == "tool_call":
                assert source["role"] == "assistant" and source["call"], case["id"]
                open_calls.append(source["call"])
            elif source["kind"] == "tool_result":
                assert source["role"] == "tool" and source["call"] in open_calls, case["id"]
                open_calls.remove(source["call"])
        assert not open_calls, f"{case['id']}: a call without its result"


@pytest.mark.parametrize("case", [c for cases in SECOND_SETS.values() for c in cases], ids=lambda c: c["id"])
def test_heldout_second_author_quotes_code_and_ids_come_from_a_source(case):
    """A cheap floor under "faithful": what the summary puts in backticks or double quotes, and every
    hex id, occurs verbatim in one of its sources (numbers may be converted or rounded, so they are
    left to the hand check)."""
    texts = [s["text"] for s in case["sources"]]
    # tool calls are often JSON: compare against the decoded text as well
    texts += [t.replace('\\"', '"').replace("\\n", "\n") for t in texts]
    summary = case["summary"]
    spans = _CODE_SPAN.findall(summary) + _DOUBLE_QUOTED.findall(_CODE_SPAN.sub("", summary)) + _HEX_ID.findall(summary)
    missing = [span for span in spans if not any(span in t for t in texts)]
    assert not missing, missing
