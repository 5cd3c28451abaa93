"""What is written once (issue 25): one event description with a terse and a prose style, one
escaping module for the page and the terminal, one text clip, one rewriter call for ``rederive``
and the compactor."""

from __future__ import annotations

import pytest

from engine import EstimateCounter, Ledger, RewriterError
from engine.compaction import Compactor, RewriteOldest
from engine.escaping import BIDI_CONTROLS, INVISIBLE, esc, printable, visible
from engine.event_lines import describe
from engine.text_clip import clip

HOSTILE = "ok \x1b[31mred\u202e <b>x</b>\n" + "word " * 40


@pytest.fixture
def events():
    ledger = Ledger.open("memory://", token_counter=EstimateCounter())
    s = ledger.create_session("lines")
    a = s.observe(HOSTILE, role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
    b = s.observe("second observation", role="user")
    d = s.rewrite([a.id, b.id], "a summary \u202e of both", by="m")
    s.rederive(d.id, text="a re-derived summary")
    s.prune(d.id)
    s.restore(d.id)
    s.mark("here")
    yield list(s.events(1, s.position + 1))
    ledger.close()


def test_both_styles_say_what_each_event_did_in_one_line(events):
    assert len(events) == 8
    for ev in events:
        for style in ("terse", "prose"):
            line = describe(ev, style)
            assert "\n" not in line and line
    terse = [describe(ev) for ev in events]
    prose = [describe(ev, "prose") for ev in events]
    assert terse[1].startswith("o1 tool/tool_result") and "\\x1b" in terse[1] and "\u202e" not in terse[1]
    assert len(terse[1]) < 120 and terse[1].endswith("…")
    assert prose[1] == f"observed o1 (tool/tool_result, {events[1].tokens:,} tokens)"
    assert terse[3].startswith("d1 <- o1,o2") and prose[3].startswith("rewrote o1, o2 into d1")
    assert prose[5] == "pruned d1" and terse[5] == "d1 pruned"
    assert terse[7] == prose[7] == "mark 'here'"
    with pytest.raises(ValueError):
        describe(events[0], "loud")


def test_one_list_of_hostile_characters_for_page_and_terminal():
    for c in BIDI_CONTROLS + INVISIBLE:
        assert c not in esc(c) and c not in printable(c) and c not in visible(c)
        assert esc(c) == visible(c) == f"\u27e8U+{ord(c):04X}\u27e9"
    assert esc('<a href="x">') == "&lt;a href=&quot;x&quot;&gt;"
    assert visible("<b>") == "<b>"
    assert printable("a\x1bb\n") == "a\\x1bb\\x0a"


def test_the_one_clip():
    assert clip("a  b\n\tc") == "a b c"
    assert clip("x" * 100, 10) == "x" * 9 + "…" and len(clip("y " * 100)) == 80


def _failing(spans):
    raise ConnectionError("model down")


@pytest.mark.parametrize("output", [_failing, lambda spans: ""], ids=["raises", "empty"])
def test_rederive_and_the_compactor_refuse_a_bad_rewriter_alike(output):
    ledger = Ledger.open("memory://", token_counter=EstimateCounter())
    s = ledger.create_session("rw")
    spans = [s.observe(f"log line {i} " + "detail " * 20, tokens=40) for i in range(6)]
    d = s.rewrite([spans[0].id, spans[1].id], "summary", by="m")
    before = s.position
    with pytest.raises(RewriterError) as rederived:
        s.rederive(d.id, rewriter=output)
    assert rederived.value.span_id == d.id and "nothing was written" in rederived.value.message
    assert s.position == before
    compactor = Compactor(budget=200, keep_last_turns=0, strategies=[RewriteOldest(output, summary_tokens=16)])
    with pytest.raises(RewriterError) as compacted:
        compactor.step(s)
    assert "nothing was written" in compacted.value.message and s.position == before
    if output is _failing:
        assert "while re-deriving d1: ConnectionError: model down" in rederived.value.message
        assert "the rewriter failed on" in compacted.value.message
    ledger.close()
