"""Rule ``pairing``: a fact the summary gives a thing is not one the sources give to something else.

Every fact real, the pairing wrong: "billing-api returned 500" when billing-api returned 503 and
auth-service 500. The summary binds a thing X (a service, a path, a ticket, a host) to a value v in
one clause; both are stated somewhere. It is a swap only when the sources pair them otherwise: some
unit of evidence gives X another value w of v's kind, AND some unit gives v to another thing Y of
X's kind, while none states X with v. Facts from different sources about the same subject (a
migration's id in one, its backfill count in another) are not a swap; a tool call and its result
are one unit of evidence (the command and the output it printed state their pairing together).
"""

from __future__ import annotations

from projections.grounding.evidence import Evidence
from projections.grounding.registry import GroundingFinding, finding, rule
from projections.grounding.specifics import SourceIndex, Specific, tokens
from projections.grounding.statuses import within
from projections.grounding.text import clauses, sentences

__all__ = ["SWAPPED_PAIRING", "swapped_pairings"]

SWAPPED_PAIRING = "swapped-pairing"
_PAIRABLE = ("name", "identifier", "host", "number", "time", "code", "version", "path", "date", "quantity", "url", "email")
# what names a thing: a source can only state one of these if it has all of its words
_WORDY = frozenset({"name", "identifier", "host", "path", "url", "email", "code", "version"})


@rule("pairing", (SWAPPED_PAIRING,),
      "A value the summary gives a thing is not one the sources give to another thing while giving this one another value.")
def check_pairings(ev: Evidence) -> list[GroundingFinding]:
    return swapped_pairings(ev)


class _Units:
    """Which units of evidence state a specific (one index per unit, built on first need)."""

    def __init__(self, ev: Evidence):
        self.ev = ev
        self.members = ev.units
        self._specs: dict[int, list[Specific]] = {}
        self._keys: dict[int, set[str]] = {}
        self._words: list[set[str]] | None = None
        self._indexes: dict[int, SourceIndex] = {}

    def specifics(self, u: int) -> list[Specific]:
        found = self._specs.get(u)
        if found is None:
            per = self.ev.index.per_text
            found = self._specs[u] = [sp for i in self.members[u] for sp in per[i]]
        return found

    def holds(self, u: int, sp: Specific) -> bool:
        keys = self._keys.get(u)
        if keys is None:
            keys = self._keys[u] = {s.key for s in self.specifics(u)}
        if sp.key in keys:
            return True
        idx = self._indexes.get(u)
        if idx is None:
            index = self.ev.index
            idx = self._indexes[u] = SourceIndex.build(
                ["\n".join(index.texts[i] for i in self.members[u])],
                [self.specifics(u)],
                [[t for i in self.members[u] for t in index.tok_lists[i]]],
            )
        return idx.supports(sp)[0]

    def holding(self, sp: Specific) -> set[int]:
        candidates = range(len(self.members))
        if sp.category in _WORDY:
            if self._words is None:
                tl = self.ev.index.tok_lists
                self._words = [{t for i in members for t in tl[i]} for members in self.members]
            need = set(tokens(sp.text))
            if need:
                candidates = [u for u in candidates if need <= self._words[u]]
        return {u for u in candidates if self.holds(u, sp)}

    def other(self, units: set[int], about: Specific, like: Specific) -> Specific | None:
        """A specific of ``like``'s category, not ``like`` itself, that one of ``units`` states on
        the same line as ``about`` (the way a summary clause binds two things, a line of output
        does: ``billing-api: 503``)."""
        index = self.ev.index
        need = set(tokens(about.text))
        for u in sorted(units):
            for i in self.members[u]:
                text = index.texts[i]
                for sp in index.per_text[i]:
                    if sp.category != like.category or sp.weak or sp.key == like.key or _same(sp, like):
                        continue
                    if like.category == "number" and sp.noun != like.noun:
                        continue  # another count of something else is no other value of this one
                    a = text.rfind("\n", 0, sp.start) + 1
                    b = text.find("\n", sp.end)
                    line = text[a : b if b >= 0 else len(text)]
                    if need <= set(tokens(line)):
                        return sp
        return None


def _pairable(sp: Specific) -> bool:
    """A specific that states a fact about the thing beside it. A small bare number (under 100,
    no noun: "complexity (10 > max 9)", "task 4") numbers or counts something the clause does not
    name, so it is no fact about the thing named there."""
    if sp.category not in _PAIRABLE or sp.weak:
        return False
    if sp.category == "number" and not sp.noun:
        try:
            return abs(float(sp.value)) >= 100
        except (TypeError, ValueError):
            return True
    return True


def _same(a: Specific, b: Specific) -> bool:
    return "".join(tokens(a.text)) == "".join(tokens(b.text))


def swapped_pairings(ev: Evidence) -> list[GroundingFinding]:
    """Clauses that bind a thing to a value the sources give to another thing."""
    if len(ev.units) < 2:
        return []  # one unit: every pairing is stated together in it
    units = _Units(ev)
    out: list[GroundingFinding] = []
    for offset, sentence in sentences(ev.text):
        for clause_offset, clause in clauses(sentence):
            start = offset + clause_offset
            bound = [
                sp for sp in within(ev.found, start, start + len(clause))
                if _pairable(sp) and ev.index.supports(sp)[0]  # unsupported: the literal rule
            ]
            swap = _swapped(bound, units)
            if swap is None:
                continue
            thing, value, w, y = swap
            out.append(finding(
                "pairing", SWAPPED_PAIRING, "error", f"{thing.text} … {value.text}",
                f"the summary pairs {thing.text!r} with {value.text!r}, but the sources pair {thing.text!r} "
                f"with {w.text!r} and {value.text!r} with {y.text!r}: facts may have been swapped",
                offset=thing.start, category=f"{thing.category}+{value.category}",
            ))
    return out


def _swapped(bound: list[Specific], units: _Units) -> tuple[Specific, Specific, Specific, Specific] | None:
    """(thing X, value v, X's value w in the sources, v's thing Y in the sources) for the first pair
    of specifics the sources pair otherwise."""
    holding: dict[int, set[int]] = {}

    def held(k: int) -> set[int]:
        if k not in holding:
            holding[k] = units.holding(bound[k])
        return holding[k]

    for i in range(len(bound)):
        for j in range(i + 1, len(bound)):
            a, b = bound[i], bound[j]
            if a.category == b.category or (a.category not in _WORDY and b.category not in _WORDY):
                continue  # a swap gives a fact to the wrong thing: one side names the thing
            (x, kx), (v, kv) = ((a, i), (b, j)) if a.category in _WORDY or b.category not in _WORDY else ((b, j), (a, i))
            with_x, with_v = held(kx), held(kv)
            if not with_x or not with_v or with_x & with_v:
                continue  # stated together somewhere (or not stated): no swap
            w = units.other(with_x, x, v)  # X with another value of v's kind
            y = units.other(with_v, v, x) if w is not None else None  # v with another thing of X's kind
            if w is not None and y is not None:
                return x, v, w, y
    return None
