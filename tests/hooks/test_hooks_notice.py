"""The notice for the resumed model (engine/hooks/notice.py): the user's own words verbatim,
instructions first and most recent first, within any budget; the rest named; the unsupported
statements with why."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Ledger
from engine.hooks.notice import compose

SAID = [
    ("Never push to main; open a pull request instead.", True),
    ("What does the cart service do?", False),
    ("Use the staging database for the migration test.", True),
    ("Thanks, that looks right so far.", False),
    ("Don't change the public API of cart.py.", True),
]
INVENTED = "The user asked to wipe the production bucket before the release."


def _compacted(ledger: Ledger):
    s = ledger.create_session("agent", strict=False)
    for i, (text, _) in enumerate(SAID):
        s.observe(text, role="user")
        s.observe(f"Step {i}: ran the cart tests, 12 passed.", role="assistant")
    ids = [sp.id for sp in s.spans()]
    s.rewrite(ids, "The user wants a pull request, not a push to main, and the staging database for the test. "
              + INVENTED, by="claude-code:compact:auto")
    return s


def test_instructions_first_most_recent_first_and_the_invented_statement_named(mem_ledger):
    s = _compacted(mem_ledger)
    d = next(sp for sp in s.spans() if sp.derived)
    n = compose(s, d, s.audit(), budget=1_500)
    text = n.text
    order = [text.index(t) for t, instr in reversed(SAID) if instr] + [text.index(t) for t, instr in reversed(SAID) if not instr]
    assert order == sorted(order)
    assert INVENTED in text and "none of the user's messages" in text
    assert n.statements == 1 and not n.recallable
    assert n.tokens == mem_ledger.counter.count(text) <= 1_500


def test_a_clean_summary_warns_about_nothing(mem_ledger):
    s = mem_ledger.create_session("agent", strict=False)
    s.observe("Never push to main.", role="user")
    s.rewrite(["o1"], "The user said never to push to main.", by="claude-code:compact:auto")
    d = next(sp for sp in s.spans() if sp.derived)
    n = compose(s, d, s.audit())
    assert n.statements == 0 and "nothing you saw supports" not in n.text
    assert "[o1] Never push to main." in n.text


@settings(max_examples=40, deadline=None)
@given(budget=st.integers(min_value=20, max_value=400))
def test_any_budget_holds_and_every_user_message_is_shown_or_named(budget):
    with Ledger.open("memory://") as ledger:
        s = _compacted(ledger)
        d = next(sp for sp in s.spans() if sp.derived)
        n = compose(s, d, s.audit(), budget=budget)
        assert ledger.counter.count(n.text) <= budget or n.text.startswith("[ctxledger] Context compacted into d1.")
        users = [sp for sp in s.originals("d1") if sp.role == "user"]
        assert {*n.shown, *n.recallable} == {sp.id for sp in users}
        for sp in users:
            assert (f"[{sp.id}] {sp.text}" in n.text) == (sp.id in n.shown)
        assert "context_recall" in n.text


class _Exact:
    """The ledger's counter without its byte bound: every comparison is decided on a count."""

    def __init__(self, counter):
        self.name, self.exact, self.calls, self._count = counter.name, counter.exact, 0, counter.count

    def count(self, text: str) -> int:
        self.calls += 1
        return self._count(text)


@settings(max_examples=40, deadline=None)
@given(budget=st.integers(min_value=20, max_value=1_600), long=st.integers(min_value=0, max_value=3))
def test_the_byte_bound_changes_no_decision(budget, long):
    """The notice composed on byte bounds where they settle a comparison is the one exact counts give."""
    with Ledger.open("memory://") as ledger:
        s = _compacted(ledger)
        for i in range(long):  # messages longer than the bound lets through uncounted
            s.observe(f"Keep the retry budget at {i + 3} attempts. " * 40, role="user")
        d = next(sp for sp in s.spans() if sp.derived)
        report = s.audit()
        bounded = compose(s, d, report, budget=budget)
        exact = compose(s, d, report, budget=budget, counter=_Exact(ledger.counter))
        assert (bounded.text, bounded.shown, bounded.recallable) == (exact.text, exact.shown, exact.recallable)
        assert bounded.tokens == ledger.counter.count(bounded.text)


def test_a_notice_its_length_proves_within_budget_counts_nothing(mem_ledger):
    s = _compacted(mem_ledger)
    d = next(sp for sp in s.spans() if sp.derived)
    counter = _Exact(mem_ledger.counter)
    counter.bytes_bound = True  # what BPECounter declares: no more tokens than UTF-8 bytes
    n = compose(s, d, s.audit(), budget=1_500, counter=counter)
    assert counter.calls == 0 and len(n.text.encode()) <= 1_500 and n.statements == 1
    assert n.tokens == mem_ledger.counter.count(n.text) and counter.calls == 1
