"""Blame, lineage, diff and timeline: pure folds over the log, usable at any position."""

from __future__ import annotations

import pytest

from engine.errors import InvalidInputError, PositionOutOfRangeError, UnknownSpanError
from engine.spans import Provenance

SOURCES = (
    "GET /v1/invoices -> 503 from billing-api at 10:02 (upstream timeout)",
    "POST /v1/sessions -> 500 from auth-service at 10:07 (token cache miss)",
    "Running migration 0042_add_index on orders-db (started 13:41)",
)


@pytest.fixture
def story(ledger):
    """o1..o3 observed; d1 <- o1,o2 (faithful), d2 <- o3 (invents 14:02), d2 re-derived keeping it,
    o4 observed then pruned, d1 pruned and restored."""
    s = ledger.create_session("story")
    o = [s.observe(t, role="tool", kind="tool_result", meta={"tool_call_id": f"c{i}"}) for i, t in enumerate(SOURCES)]
    d1 = s.rewrite([o[0].id, o[1].id], "billing-api returned 503 at 10:02; auth-service returned 500 at 10:07.", by="model-x")
    d2 = s.rewrite([o[2].id], "Migration 0042_add_index completed at 14:02.", by="model-x")
    s.mark("drifted")
    s.rederive(d2.id, text="Migration 0042_add_index on orders-db started 13:41, completed at 14:02.", by="model-y")
    o4 = s.observe("user: is the migration done?")
    s.prune(o4.id, by="policy")
    s.prune(d1.id)
    s.restore(d1.id)
    return s


def snapshot(s):
    return s.position, list(s.events())


# -- blame ------------------------------------------------------------------------------------


def test_blame_of_observed_text_is_grounded_in_its_observation(story):
    s = story
    o = s.observe("deploy of cart-service finished", by="ci")
    [hit] = s.blame("CART-SERVICE")  # case-insensitive
    assert (hit.span_id, hit.live, hit.grounded, hit.origin_kind) == (o.id, True, True, "observed")
    assert hit.position == hit.origin_position == o.position and hit.by == "ci" and hit.event_type == "Observed"


def test_blame_of_text_a_rewrite_left_out(story):
    removed = story.blame("token cache miss")
    assert [(h.span_id, h.live, h.removed_type) for h in removed] == [("o2", False, "Rewritten")]
    assert "rewritten into d1 without it" in removed[0].message and removed[0].grounded


def test_blame_of_derived_text_found_in_a_source_is_grounded(story):
    s = story
    [hit] = s.blame("auth-service")
    assert (hit.span_id, hit.live, hit.grounded, hit.origin_kind, hit.origin_span_id) == ("d1", True, True, "observed", "o2")
    assert hit.origin_position == 3 and hit.event_type == "Rewritten" and hit.by == "model-x"
    assert "grounded" in hit.message and "o2" in hit.message
    # a phrase the rewrite composed is not verbatim in any source: blame says the rewrite wrote it
    [composed] = s.blame("auth-service returned 500")
    assert not composed.grounded and composed.origin_kind == "derived" and "absent from all 2 source observations" in composed.message


def test_blame_of_invented_text_names_the_rewrite_that_introduced_it(story):
    s = story
    [hit] = s.blame("14:02")
    rewrite_position = s.lineage("d2").came_from.position
    assert hit.span_id == "d2" and hit.live and not hit.grounded and hit.origin_kind == "derived"
    assert hit.origin_position == rewrite_position  # first appearance: the rewrite, not the re-derivation
    assert hit.event_type == "Rederived" and hit.by == "model-y"
    assert hit.position == s.span("d2").position
    assert f"introduced by rewrite at position {rewrite_position} by model-x; absent from its 1 source observation" in hit.message
    assert "still in d2 after the re-derivation" in hit.message


def test_blame_of_pruned_text_says_which_event_removed_it(story):
    s = story
    [hit] = s.blame("is the migration done")
    assert (hit.span_id, hit.live, hit.removed_type, hit.removed_by, hit.grounded) == ("o4", False, "Pruned", "policy", True)
    assert hit.message.startswith(f"gone: pruned at position {hit.removed_position} by policy")


def test_blame_at_an_earlier_position(story):
    s = story
    [hit] = s.blame("14:02", at="drifted")
    assert hit.event_type == "Rewritten" and hit.position == hit.origin_position
    assert s.blame("is the migration done", at="drifted") == []


def test_blame_of_text_that_was_never_there(story):
    assert story.blame("kubernetes") == []


@pytest.mark.parametrize("bad, error", [("", InvalidInputError), ("   ", InvalidInputError), (None, InvalidInputError), (42, InvalidInputError)])
def test_blame_bad_input(story, bad, error):
    before = snapshot(story)
    with pytest.raises(error):
        story.blame(bad)
    assert snapshot(story) == before


# -- lineage ----------------------------------------------------------------------------------


def test_lineage_of_a_derived_span_is_a_tree_and_a_history(story):
    lin = story.lineage("d1")
    assert lin.provenance == "derived" and lin.status == "live"
    assert [c.span_id for c in lin.came_from.children] == ["o1", "o2"]
    assert [c.position for c in lin.came_from.children] == [2, 3]
    assert lin.came_from.by == "model-x" and lin.came_from.children[0].text.startswith("GET /v1/invoices")
    assert [(st.event_type, st.action) for st in lin.became] == [
        ("Rewritten", "made by rewrite of o1, o2"),
        ("Pruned", "pruned"),
        ("Restored", "restored"),
    ]


def test_lineage_of_an_observed_span_follows_it_into_what_it_became(story):
    lin = story.lineage("o3")
    assert lin.status == "rewritten" and lin.descendants == ("d2",)
    actions = [(st.span_id, st.action) for st in lin.became]
    assert actions[0] == ("o3", "observed")
    assert actions[1] == ("o3", "o3 rewritten into d2")
    assert actions[2][0] == "d2" and actions[2][1].startswith("re-derived from its originals o3")


def test_lineage_of_a_rewrite_of_a_rewrite_nests(ledger):
    s = ledger.create_session("perm", strict=False)
    a, b = s.observe("alpha 1"), s.observe("beta 2")
    d1 = s.rewrite([a.id], "alpha is 1")
    d2 = s.rewrite([d1.id, b.id], "alpha 1, beta 2")
    tree = s.lineage(d2.id).came_from
    assert tree.generation == 2
    assert [c.span_id for c in tree.children] == ["d1", "o2"]
    assert [c.span_id for c in tree.children[0].children] == ["o1"]
    assert s.lineage(d1.id).status == "rewritten"


def test_lineage_at_an_earlier_position_does_not_see_later_events(story):
    lin = story.lineage("d2", at="drifted")
    assert [st.event_type for st in lin.became] == ["Rewritten"]
    assert lin.position == story.marks()["drifted"]


def test_lineage_of_an_expanded_span(ledger):
    s = ledger.create_session("exp")
    a, b = s.observe("one"), s.observe("two")
    d = s.rewrite([a.id, b.id], "one and two")
    s.expand(d.id)
    assert s.lineage(d.id).status == "expanded"
    assert s.lineage(a.id).became[-1].action == "restored by the expansion of d1"
    assert s.lineage(a.id).status == "live"


@pytest.mark.parametrize("bad, error", [("o99", UnknownSpanError), ("zz", UnknownSpanError), ("d0", UnknownSpanError), (5, InvalidInputError)])
def test_lineage_bad_input(story, bad, error):
    before = snapshot(story)
    with pytest.raises(error):
        story.lineage(bad)
    assert snapshot(story) == before


def test_lineage_of_a_span_that_does_not_exist_yet_at_that_position(story):
    with pytest.raises(UnknownSpanError):
        story.lineage("d2", at=4)


# -- diff ---------------------------------------------------------------------------------------


def test_diff_explains_each_change_by_the_event_that_caused_it(story):
    s = story
    start = 4  # after the three observations
    d = s.diff(start)
    by_id = {e.span_id: e for e in d.entries}
    assert by_id["d1"].change == "added" and by_id["d1"].event_type == "Restored"
    assert by_id["d2"].change == "added" and by_id["d2"].event_type == "Rederived"
    assert by_id["o1"].change == "rewritten" and by_id["o1"].into == "d1"
    assert by_id["o3"].change == "rewritten" and by_id["o3"].into == "d2"
    assert "o4" not in by_id  # observed and pruned in between: no net change
    assert d.tokens_a == s.at(start).tokens and d.tokens_b == s.tokens
    assert sum(e.tokens for e in d.entries) == d.tokens_b - d.tokens_a
    assert d.events["Observed"] == 1 and d.events["Pruned"] == 2
    assert d.stat().startswith(f"{s.position - start} events; +2 -3 spans (3 rewritten)")


def test_diff_reports_a_rederivation(story):
    s = story
    d = s.diff("drifted", "-1")
    [e] = d.rederived
    assert e.span_id == "d2" and e.event_type == "Rederived" and e.by == "model-y"


def test_diff_backwards_and_to_itself(story):
    s = story
    forward, backward = s.diff(4), s.diff(-1, 4)
    assert {e.span_id for e in forward.added} == {e.span_id for e in backward.of("removed")}
    assert s.diff(5, 5).entries == () and s.diff(5, 5).events == {}


@pytest.mark.parametrize("a, b", [(0, 3), (3, 999), ("nope", None), (3, "nope"), (2.5, None)])
def test_diff_bad_positions(story, a, b):
    before = snapshot(story)
    with pytest.raises(PositionOutOfRangeError):
        story.diff(a, b)
    assert snapshot(story) == before


# -- timeline ------------------------------------------------------------------------------------


def test_timeline_matches_the_buffer_at_every_position(story):
    s = story
    tl = s.timeline()
    assert [p.position for p in tl.points] == list(range(1, s.position + 1))
    for p in tl.points:
        view = s.at(p.position)
        spans = view.spans()
        assert p.live == len(spans)
        assert p.observed == sum(1 for sp in spans if sp.provenance is Provenance.OBSERVED)
        assert p.derived_tokens == sum(sp.tokens for sp in spans if sp.derived)
        assert p.tokens == view.tokens
    assert tl.columns()["position"] == [p.position for p in tl.points]


def test_timeline_at_a_position_stops_there(story):
    tl = story.timeline(at="drifted")
    assert tl.points[-1].position == story.marks()["drifted"] and tl.points[-1].event_type == "Marked"


def test_timeline_of_a_fork_continues_its_parent(ledger, story):
    fork = ledger.fork(story, at=4, name="story-fork")
    fork.observe("a new turn")
    tl = fork.timeline()
    assert [p.position for p in tl.points] == list(range(1, fork.position + 1))
    assert tl.points[-1].live == len(fork.spans()) and tl.points[-1].tokens == fork.tokens
