"""Blame through the search index (``engine.blame_index``) finds what the walk of the whole log
finds: the same hits, on random sessions of observations, prunes, restores, rewrites (of rewrites,
in permissive sessions), re-derivations and expansions, for needles cut anywhere in their words."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from engine import EstimateCounter, InvalidInputError, Ledger, LedgerError
from engine.blame_index import index_facts, install, match_expression
from engine.search_index import open_index
from projections.blame import blame, walk

WORDS = ["tail_wrapper.sh", "wrapper", "Tail", "INC-4411", "set_attributes_safely", "foo", "foo.bar", "bar",
         "/etc/passwd", "v1.2.3", "café", "deploy", "x9", "at 09:12", "42", "Ünïcode", "日本"]


def _text(draw) -> str:
    return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6)))


@st.composite
def sessions(draw):
    """A script of commands: each applied if it is valid at that point, skipped if not."""
    ops = []
    for _ in range(draw(st.integers(3, 28))):
        kind = draw(st.sampled_from(["observe"] * 4 + ["prune", "restore", "rewrite", "rederive", "expand"]))
        ops.append((kind, draw(st.integers(0, 10**6)), draw(st.integers(1, 3)), _text(draw)))
    return draw(st.booleans()), ops


def _play(session, ops) -> None:
    pruned: list[str] = []
    for kind, pick, many, text in ops:
        live = [s.id for s in session.spans()]
        observed = [i for i in live if i.startswith("o")]
        derived = [i for i in live if i.startswith("d")]
        try:
            if kind == "observe" or not live:
                role = ["user", "assistant", "tool"][pick % 3]
                session.observe(text, role=role, kind="tool_result" if role == "tool" else "message")
            elif kind == "prune":
                victim = live[pick % len(live)]
                session.prune(victim)
                pruned.append(victim)
            elif kind == "restore" and pruned:
                session.restore(pruned.pop(pick % len(pruned)))
            elif kind == "rewrite":
                pool = live if not session.strict else observed
                if pool:
                    start = pick % len(pool)
                    session.rewrite(pool[start : start + many], text)
            elif kind == "rederive" and derived:
                session.rederive(derived[pick % len(derived)], text=text)
            elif kind == "expand" and derived:
                session.expand(derived[pick % len(derived)])
        except LedgerError:
            pass  # not valid at this point (a restore of a span that came back another way, ...)


def _needles(session, pick: int) -> list[str]:
    fixed = ["wrap", "ail_wr", "passwd", "foo.ba", "4411", "nothing-like-it", "1.2"]
    texts = [ev.text for ev in session.events() if hasattr(ev, "text") and isinstance(ev.text, str) and ev.text.strip()]
    if not texts:  # every command of the script was refused: blame of an empty session
        return fixed
    text = texts[pick % len(texts)]
    a = pick % len(text)
    b = a + 1 + (pick // 7) % 24
    return [text[a:b], text, *fixed]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(script=sessions(), pick=st.integers(0, 10**6))
# a script whose observations are all tool output (picks of 2 mod 3): each is a tool result
@example(script=(False, [("observe", 14, 1, "tail_wrapper.sh"), ("observe", 181676, 1, "tail_wrapper.sh"),
                         ("observe", 8, 1, "tail_wrapper.sh")]), pick=0)
def test_index_blame_equals_the_walk(tmp_path_factory, script, pick):
    strict, ops = script
    path = tmp_path_factory.mktemp("blame") / "ledger.db"
    with install(Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())) as led:
        s = led.create_session("s", strict=strict)
        _play(s, ops)
        s = led.session("s")
        assert s.blame_finder is not None
        index = open_index(led.url)
        at = [s.position, max(1, s.position // 2)]  # now, and a view of an earlier position
        for needle in _needles(s, pick):
            if not needle.strip():
                continue
            for n in at:
                view = s.view(n)
                walked = blame(view, needle)
                indexed = blame(view, needle, find=led.blame_finder)
                assert indexed == walked, (needle, n)
                folded = needle.casefold().strip()
                if folded.isascii() and any(c.isalnum() for c in folded):
                    assert index_facts(view, folded, index) is not None, needle  # the index answered


def test_the_index_answers_the_sessions_blame(tmp_path):
    """``Session.blame`` of an installed ledger takes the index path, and reads no observation bodies
    from the log to find the hits (only the summaries' structural events and the holders)."""
    path = tmp_path / "ledger.db"
    with install(Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())) as led:
        s = led.create_session("s")
        ids = [s.observe(f"step {k} ran tail_wrapper.sh --fast" if k == 7 else f"step {k} ran make").id for k in range(40)]
        s.rewrite(ids[:20], "steps 0-19 ran make")
        s.prune(ids[30])
        d = s.rewrite(ids[20:30], "steps 20-29 ran make")
        read = []
        real = s._store.read_event
        s._store.read_event = lambda sid, p: read.append(p) or real(sid, p)
        hits = s.blame("tail_wrapper.sh")
        assert [h.span_id for h in hits] == ["o8"] and not hits[0].live
        assert "rewritten into d1 without it" in hits[0].message
        assert set(read) == {9}  # only the holder (o8, at position 9): no walk over the other 40 observations
        assert s.blame("ran make") == blame(s, "ran make")  # the walk agrees
        assert d.id == "d2"


def test_match_expression_covers_cut_words():
    vocab = ["tail", "wrapper", "wrappers", "sh", "unwrap", "rap"]

    def like(pattern, limit):
        core = pattern.strip("%")
        return [t for t in vocab if (core in t if pattern.startswith("%") and pattern.endswith("%") else t.endswith(core))][:limit]

    assert match_expression("tail_wrapper.sh", like) == '"wrapper sh" *'  # "tail" may end a longer word
    assert match_expression("/tail_wrapper.sh", like) == '"tail wrapper sh" *'
    assert match_expression("rap", like) == '"wrapper" OR "wrappers" OR "unwrap" OR "rap"'
    assert match_expression("rap)", like) == '"unwrap" OR "rap"'
    assert match_expression("zzz", like) == ""  # no indexed word holds it: no text does
    assert match_expression("(rap", like) == '"rap" *'
    assert match_expression("café", like) is None and match_expression("--", like) is None


def test_bad_needles_are_typed_errors_and_change_nothing(tmp_path):
    path = tmp_path / "ledger.db"
    with Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter()) as led:
        s = led.create_session("s")
        s.observe("hello world")
        before = s.position
        for bad in ("", "   ", 42):
            with pytest.raises(InvalidInputError):
                s.blame(bad)
        assert led.session("s").position == before


def test_an_unreadable_index_leaves_blame_to_the_walk(tmp_path):
    path = tmp_path / "ledger.db"
    with install(Ledger.open(f"sqlite:///{path}", token_counter=EstimateCounter())) as led:
        s = led.create_session("s")
        a = s.observe("ran tail_wrapper.sh")
        s.rewrite([a.id], "ran it")
        index = open_index(led.url)
        with index._lock:
            index._db.execute(f"DROP TABLE IF EXISTS fts_{s.id.hex}")
            index._db.execute("INSERT OR REPLACE INTO indexed VALUES (?, ?, ?)", (s.id.hex, str(s.state.started_at), 99))
        assert led.blame_finder(s, "tail_wrapper.sh") is None  # the index cannot answer: no error, the walk does
        assert s.blame("tail_wrapper.sh") == blame(s, "tail_wrapper.sh")
        assert walk(s, "tail_wrapper.sh").observed_with == {2}
    assert sqlite3.connect(path).execute("SELECT count(*) FROM stored_events").fetchone()[0] >= 3
