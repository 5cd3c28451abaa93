"""What a compaction dropped (projections/lost.py, ``ctxledger lost``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Ledger
from engine.cli import main
from engine.spans import Provenance, Span
from projections.lost import CATEGORIES, is_instruction, lost, summary_of

REAL = Path(__file__).resolve().parents[3] / "shared" / "data" / "transcripts" / "claude_spotter_ae4a77f8_manual.jsonl"


def _obs(n: int, text: str, role: str = "user", kind: str = "message", **meta) -> Span:
    return Span(id=f"o{n}", text=text, role=role, kind=kind, provenance=Provenance.OBSERVED, meta=meta, position=n + 1)


def _summary(text: str, sources: list[Span]) -> Span:
    return Span(id="d1", text=text, role="user", kind="summary", provenance=Provenance.DERIVED, generation=1,
                sources=tuple(s.id for s in sources), position=len(sources) + 2)


SOURCES = [
    _obs(1, "Never push to main; open a pull request for the checkout fix."),
    _obs(2, "Running the tests.", "assistant", "tool_call", tool_call_id="c1", name="Bash",
         arguments={"command": "pytest -q tests/test_cart.py"}),
    _obs(3, "FAILED tests/test_cart.py::test_discount - AssertionError: 9.99 != 10.0\n1 failed, 41 passed",
         "tool", "tool_result", tool_call_id="c1", is_error=True),
    _obs(4, "The build id is 7f3a9c2e and the deploy finished in 412 seconds.", "assistant"),
    _obs(5, "Also look at src/shop/cart.py when you can.", "user"),
    _obs(6, "<system-reminder>hook output</system-reminder> src/hooks/ignored.py", "user", harness="system-reminder"),
]


def test_each_category_counts_what_the_summary_kept():
    summary = _summary("The user said never push to main and to open a pull request for the checkout fix. "
                       "`pytest -q tests/test_cart.py` failed on the discount in tests/test_cart.py.", SOURCES)
    r = lost(summary, SOURCES)
    assert [c.name for c in r.categories] == list(CATEGORIES)
    user = r.category("user_messages")
    assert (user.kept, user.total) == (1, 2)
    assert [i.span_id for i in user.dropped] == ["o5"]
    assert (r.category("instructions").kept, r.category("instructions").total) == (1, 2)
    assert (r.category("commands").kept, r.category("commands").total) == (1, 1)
    errors = r.category("errors")
    assert (errors.kept, errors.total) == (0, 1) and errors.dropped[0].text.startswith("FAILED tests/test_cart.py")
    paths = r.category("paths")
    assert "tests/test_cart.py" not in {i.text for i in paths.dropped}
    assert "src/shop/cart.py" in {i.text for i in paths.dropped}
    assert "src/hooks/ignored.py" not in {i.text for i in paths.dropped}  # harness text is not counted
    assert {"7f3a9c2e"} <= {i.text for i in r.category("ids").dropped}
    assert {"412 seconds"} & {i.text for i in r.category("numbers").dropped} or any(
        "412" in i.text for i in r.category("numbers").dropped)


def test_an_item_mentioned_again_counts_once_and_names_the_first_span():
    """A source read twice (the same tool output again, a copied message) adds nothing the second
    time: every item counts once, under the first span that holds it."""
    again = [_obs(n + 10, s.text, s.role, s.kind, **s.meta) for n, s in enumerate(SOURCES)]
    summary = _summary("The checkout fix is in tests/test_cart.py.", SOURCES)
    once, twice = lost(summary, SOURCES), lost(summary, [*SOURCES, *again])
    for a, b in zip(once.categories, twice.categories):
        assert (a.name, a.kept, a.total, a.dropped) == (b.name, b.kept, b.total, b.dropped)
    assert twice.sources == 2 * len(SOURCES)


def test_a_summary_that_repeats_everything_keeps_everything_and_an_empty_one_nothing():
    everything = "\n".join(s.text for s in SOURCES) + "\n" + "pytest -q tests/test_cart.py"
    full = lost(_summary(everything, SOURCES), SOURCES)
    assert all(c.kept == c.total and not c.dropped for c in full.categories)
    empty = lost(_summary("Work continued.", SOURCES), SOURCES)
    assert all(c.kept == 0 and len(c.dropped) == c.total for c in empty.categories)


_words = st.text(alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd"), max_codepoint=0x7F), min_size=1, max_size=8)
_texts = st.lists(_words, min_size=1, max_size=12).map(" ".join)


@settings(max_examples=80, deadline=None)
@given(texts=st.lists(_texts, min_size=1, max_size=8), keep=st.data())
def test_kept_never_exceeds_total_and_adding_a_source_to_the_summary_keeps_it(texts, keep):
    sources = [_obs(i + 1, t, "user" if i % 2 else "tool", "message" if i % 2 else "tool_result")
               for i, t in enumerate(texts)]
    chosen = keep.draw(st.lists(st.sampled_from(sources), unique_by=lambda s: s.id))
    r = lost(_summary("\n".join(s.text for s in chosen) or "-", sources), sources)
    for c in r.categories:
        assert 0 <= c.kept <= c.total and len(c.dropped) == c.total - c.kept
    dropped_from = {i.span_id for c in r.categories for i in c.dropped}
    for s in chosen:  # an item whose whole source is in the summary is never reported dropped from it
        if s.role == "user":
            assert s.id not in {i.span_id for i in r.category("user_messages").dropped}
    assert dropped_from <= {s.id for s in sources}


def test_instructions_are_told_from_other_messages():
    assert is_instruction("Don't touch the migrations.")
    assert is_instruction("Run the linter before you commit")
    assert is_instruction("we must keep the old API")
    assert not is_instruction("Thanks, that looks right.")
    assert not is_instruction("What does the cache layer do?")


# -- the CLI on the real session ------------------------------------------------------------------


@pytest.fixture
def real_db(tmp_path):
    if not REAL.exists():
        pytest.skip(f"the shared real transcript is not at {REAL}")
    main_file = tmp_path / REAL.name
    shutil.copy(REAL, main_file)
    url = f"sqlite:///{tmp_path / 'real.db'}"
    with Ledger.open(url) as ledger:
        ledger.import_(main_file, format="claude-code", name="real")
    return url


def test_lost_cli_on_the_real_session(real_db):
    r = CliRunner().invoke(main, ["--db", real_db, "lost", "real", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    with Ledger.open(real_db) as ledger:
        sources = len(ledger.session("real").originals("d1"))
    assert data["span_id"] == "d1" and data["sources"] == sources > 100
    by = {c["name"]: c for c in data["categories"]}
    assert set(by) == set(CATEGORIES)
    assert by["user_messages"]["total"] >= 1
    assert by["commands"]["total"] > 20 and by["commands"]["kept"] < by["commands"]["total"]
    assert all(len(c["dropped"]) == c["total"] - c["kept"] for c in data["categories"])
    text = CliRunner().invoke(main, ["--db", real_db, "lost", "real", "d1"])
    assert text.exit_code == 0
    assert "commands" in text.output and f"{by['commands']['kept']} / {by['commands']['total']}" in text.output
    with Ledger.open(real_db) as ledger:
        s = ledger.session("real")
        assert summary_of(s).id == "d1" and summary_of(s, "d1").id == "d1"


@pytest.mark.parametrize("args, message", [
    (["real", "o1"], "observed span"),
    (["real", "d9"], "does not exist"),
    (["real", "x"], ""),
    (["nosuch"], "no session"),
])
def test_lost_bad_input_is_exit_2_and_changes_nothing(real_db, args, message):
    with Ledger.open(real_db) as ledger:
        before = ledger.session("real").position
    r = CliRunner().invoke(main, ["--db", real_db, "lost", *args])
    assert r.exit_code == 2, r.output
    assert message in r.output
    with Ledger.open(real_db) as ledger:
        assert ledger.session("real").position == before


def test_lost_of_a_session_without_a_compaction(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with Ledger.open(url) as ledger:
        ledger.create_session("plain").observe("hello", role="user")
    r = CliRunner().invoke(main, ["--db", url, "lost", "plain"])
    assert r.exit_code == 2 and "no compaction" in r.output
