"""Two buffers side by side: two sessions (the demo's naive and guarded runs at the same cycle) or
two positions of one session, aligned by turn.

Both sides are ``s.at(n)`` (a snapshot read each). Observation ids are observation sequence numbers,
so two runs of one workload share them: each row holds what each side has for the same
observations — the observed span itself, or the summary that replaced it (a derived span sits on the
row of its earliest source). A turn starts at each user message. Rows where both sides hold the very
same observed span are "same" (the page folds runs of them); the rest are where the runs differ.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.spans import Provenance

if TYPE_CHECKING:
    from engine.session import SessionView

__all__ = ["MAX_ROWS", "compare"]

MAX_ROWS = 2_000


def _key(span: Any) -> int:
    ids = [span.id] if span.provenance is Provenance.OBSERVED else list(span.sources)
    nums = [int(i[1:]) for i in ids if i[:1] == "o" and i[1:].isdigit()]
    return min(nums) if nums else 0


def _side(span: Any) -> dict[str, Any]:
    return {"id": span.id, "role": span.role, "kind": span.kind, "provenance": str(span.provenance),
            "generation": span.generation, "tokens": span.tokens, "text": span.text, "sources": list(span.sources)}


def compare(a: SessionView, b: SessionView) -> dict[str, Any]:
    """Rows ``{"key", "turn", "starts_turn", "same", "a": [spans], "b": [spans]}`` in buffer order
    (``key``: the observation number of the row; ``turn``: how many user messages either buffer
    holds up to this row, a summary's own not counted) and each side's totals."""
    rows: dict[int, dict[str, Any]] = {}
    for side, view in (("a", a), ("b", b)):
        for span in view.spans():
            row = rows.setdefault(_key(span), {"a": [], "b": []})
            row[side].append(span)
    out = []
    turn = 0
    for key in sorted(rows):
        row = rows[key]
        starts = any(s.role == "user" and s.kind == "message" and s.provenance is Provenance.OBSERVED
                     for s in row["a"] + row["b"])
        turn += starts
        same = (len(row["a"]) == len(row["b"]) == 1 and row["a"][0].id == row["b"][0].id
                and row["a"][0].text == row["b"][0].text and row["a"][0].provenance is Provenance.OBSERVED)
        out.append({"key": key, "turn": turn, "starts_turn": starts, "same": same,
                    "a": [_side(s) for s in row["a"]], "b": [_side(s) for s in row["b"]]})
    def total(v: SessionView) -> dict[str, Any]:
        spans = v.spans()
        return {"session": v.name, "position": v.position, "tokens": v.tokens, "spans": len(spans),
                "derived": sum(1 for s in spans if s.provenance is Provenance.DERIVED),
                "max_generation": max((s.generation for s in spans), default=0)}
    return {"a": total(a), "b": total(b), "rows": out[:MAX_ROWS], "truncated": len(out) > MAX_ROWS,
            "differ": sum(1 for r in out if not r["same"])}
