"""Measurement data from real sessions, kept apart from the checker's rules.

    python benchmarks/real_data.py          # what is here: transcripts, labels, planted and second-author counts

Four sets, all plain JSON under ``benchmarks/data/``:

- ``real/manifest.json``: the real Claude Code transcripts with a compaction (where each came from, its
  licence, size, sha256, the line of its ``compact_boundary``). A path is relative to the repository root;
  ``../shared/...`` is the shared data folder beside the checkout.
- ``real_labels.json``: every claim of each real summary labelled by hand ``faithful``, ``unfaithful`` or
  ``unverifiable``, with the transcript lines that support it (``evidence_lines``, 1-based lines of the main
  file; ``compaction_call_lines`` for lines of the compaction call's own transcript) or a note saying why
  nothing does.
- ``planted_real.jsonl``: one invented sentence of a known kind to insert into a real summary after an
  exact anchor (``plant(summary, case)`` does it).
- ``second_author.jsonl``: faithful summaries of small source sets, written by hand in styles unlike the
  drift set's generator.
- ``planted_real_heldout.jsonl`` and ``second_author_heldout.jsonl``: held-out sets of the same two formats,
  written blind (without running the checker) so that tuning on the two sets above is measured for transfer.
  A held-out source may carry ``call``, the tool call id a harness gives a call and its result.
- ``planted_real_heldout2.jsonl`` and ``second_author_heldout2.jsonl``: a second pair of held-out sets in the
  same formats, written blind by a third author, who never ran the checker nor read its rules, its cases or
  the other held-out files (60 planted cases, 2 of each kind per real summary; 40 faithful summaries in ten
  styles the dev set does not have, every tool result joined to its call by ``call``).
- ``planted_real_heldout3.jsonl`` and ``second_author_heldout3.jsonl``: a third pair in the same formats, written
  blind by a fourth author, who never ran the checker and read neither its rules, its cases nor the other
  held-out files (60 planted cases, 2 of each kind per real summary, constraints, deadlines and passive
  completions among them; 40 faithful summaries in ten more styles, several with 15 or more sources, mixed
  toolchains and figures restated in another form).
- ``planted_real_heldout4.jsonl`` and ``second_author_heldout4.jsonl``: a fourth pair, written blind by a fifth
  and a sixth author on the same terms (60 planted cases; 40 faithful summaries in ten styles no other set has,
  among them the shapes Claude Code's ``/compact``, Codex's handoff and OpenHands' condenser write).
- ``planted_real_heldout5.jsonl``: a fifth planted set (60 cases, 2 of each kind per real summary), written blind
  by a tenth author on the same terms, with no second-author half.

Transcripts fetched from public repositories are not committed here (only the shared one travels with the
project); a manifest entry whose file is absent reports ``present: False`` and the callers skip it.
"""

from __future__ import annotations

import collections
import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"
MANIFEST = DATA / "real" / "manifest.json"
LABELS = DATA / "real_labels.json"
PLANTED = DATA / "planted_real.jsonl"
SECOND_AUTHOR = DATA / "second_author.jsonl"
PLANTED_HELDOUT = DATA / "planted_real_heldout.jsonl"
SECOND_AUTHOR_HELDOUT = DATA / "second_author_heldout.jsonl"
PLANTED_HELDOUT2 = DATA / "planted_real_heldout2.jsonl"
SECOND_AUTHOR_HELDOUT2 = DATA / "second_author_heldout2.jsonl"
PLANTED_HELDOUT3 = DATA / "planted_real_heldout3.jsonl"
SECOND_AUTHOR_HELDOUT3 = DATA / "second_author_heldout3.jsonl"
PLANTED_HELDOUT4 = DATA / "planted_real_heldout4.jsonl"
SECOND_AUTHOR_HELDOUT4 = DATA / "second_author_heldout4.jsonl"
# sets 5 and 6: faithful summaries only (second and third new authors of this round), no planted set
SECOND_AUTHOR_HELDOUT5 = DATA / "second_author_heldout5.jsonl"
SECOND_AUTHOR_HELDOUT6 = DATA / "second_author_heldout6.jsonl"
SECOND_AUTHOR_HELDOUT7 = DATA / "second_author_heldout7.jsonl"
# planted set 5: a tenth author, no second-author half
PLANTED_HELDOUT5 = DATA / "planted_real_heldout5.jsonl"

PLANTED_KINDS = (
    "invented-quote",
    "invented-instruction",
    "false-completion",
    "invented-number",
    "invented-id",
    "swapped-pairing",
)
LABEL_VALUES = ("faithful", "unfaithful", "unverifiable")

__all__ = [
    "LABEL_VALUES",
    "PLANTED_KINDS",
    "labels",
    "plant",
    "planted_cases",
    "planted_heldout2_cases",
    "planted_heldout3_cases",
    "planted_heldout4_cases",
    "planted_heldout5_cases",
    "planted_heldout_cases",
    "real_transcripts",
    "resolve",
    "second_author_cases",
    "second_author_heldout2_cases",
    "second_author_heldout3_cases",
    "second_author_heldout4_cases",
    "second_author_heldout_cases",
    "seen_literals",
    "seen_text",
    "sha256_of",
    "summary_text",
]


def resolve(path: str) -> Path:
    """A data path (relative to the repository root, or absolute) as a filesystem path."""
    p = Path(path)
    return p if p.is_absolute() else (ROOT / p).resolve()


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def real_transcripts() -> list[dict]:
    """The manifest's transcripts, each with ``present`` (the file is on this machine) and ``file``
    (its resolved path) added."""
    entries = json.loads(MANIFEST.read_text(encoding="utf-8"))["transcripts"]
    out = []
    for entry in entries:
        entry = dict(entry)
        entry["file"] = str(resolve(entry["path"]))
        entry["present"] = Path(entry["file"]).is_file()
        out.append(entry)
    return out


def labels() -> dict:
    """``{transcript path: {"compaction_line", "claims": [...]}}`` as written."""
    return json.loads(LABELS.read_text(encoding="utf-8"))


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def planted_cases() -> list[dict]:
    return _jsonl(PLANTED)


def second_author_cases() -> list[dict]:
    return _jsonl(SECOND_AUTHOR)


def planted_heldout_cases() -> list[dict]:
    return _jsonl(PLANTED_HELDOUT)


def second_author_heldout_cases() -> list[dict]:
    return _jsonl(SECOND_AUTHOR_HELDOUT)


def planted_heldout2_cases() -> list[dict]:
    return _jsonl(PLANTED_HELDOUT2)


def second_author_heldout2_cases() -> list[dict]:
    return _jsonl(SECOND_AUTHOR_HELDOUT2)


def planted_heldout3_cases() -> list[dict]:
    return _jsonl(PLANTED_HELDOUT3)


def second_author_heldout3_cases() -> list[dict]:
    return _jsonl(SECOND_AUTHOR_HELDOUT3)


def planted_heldout4_cases() -> list[dict]:
    return _jsonl(PLANTED_HELDOUT4)


def planted_heldout5_cases() -> list[dict]:
    return _jsonl(PLANTED_HELDOUT5)


def second_author_heldout4_cases() -> list[dict]:
    """Empty until the fifth author's faithful summaries are written."""
    return _jsonl(SECOND_AUTHOR_HELDOUT4) if SECOND_AUTHOR_HELDOUT4.exists() else []


def second_author_heldout5_cases() -> list[dict]:
    return _jsonl(SECOND_AUTHOR_HELDOUT5) if SECOND_AUTHOR_HELDOUT5.exists() else []


def second_author_heldout6_cases() -> list[dict]:
    return _jsonl(SECOND_AUTHOR_HELDOUT6) if SECOND_AUTHOR_HELDOUT6.exists() else []


def second_author_heldout7_cases() -> list[dict]:
    return _jsonl(SECOND_AUTHOR_HELDOUT7) if SECOND_AUTHOR_HELDOUT7.exists() else []


def summary_text(path: str, compaction_line: int) -> str:
    """The text of the ``isCompactSummary`` line that follows the boundary at ``compaction_line``
    (1-based), exactly as the transcript stores it."""
    with resolve(path).open(encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            if number == compaction_line + 1:
                record = json.loads(raw)
                break
        else:
            raise ValueError(f"{path} has no line {compaction_line + 1}")
    if not record.get("isCompactSummary"):
        raise ValueError(f"{path}:{compaction_line + 1} is not a compaction summary")
    content = record["message"]["content"]
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


def seen_text(entry: dict, compaction_line: int) -> str:
    """Everything the summarizer of the compaction at ``compaction_line`` saw, lower-cased: every line of
    the main file before the boundary and every line of each compaction call's own transcript (its
    prompt, hook reminders, project context), each both as stored (JSON escapes) and decoded, so a
    literal counts as seen whichever way it is written."""
    raw = resolve(entry["path"]).read_text(encoding="utf-8").split("\n")[: compaction_line - 1]
    for call in entry["compaction_calls"]:
        raw += resolve(call).read_text(encoding="utf-8").split("\n")
    decoded = [json.dumps(json.loads(line), ensure_ascii=False) for line in raw if line.strip()]
    return ("\n".join(raw) + "\n" + "\n".join(decoded)).lower()


def seen_literals(entry: dict, compaction_line: int, literals: list[str], seen: str | None = None) -> list[str]:
    """The ``literals`` (case-insensitive) that occur in what the summarizer saw; a planted case's
    ``invented`` literals must give none. ``seen``: ``seen_text`` already computed for this compaction."""
    seen = seen_text(entry, compaction_line) if seen is None else seen
    return [literal for literal in literals if literal.lower() in seen]


def plant(summary: str, case: dict) -> str:
    """``summary`` with the case's sentence inserted right after its anchor ``after`` (which must occur
    exactly once), separated by the case's ``prefix`` (a space unless the case says otherwise, e.g. a
    new list item)."""
    anchor = case["after"]
    count = summary.count(anchor)
    if count != 1:
        raise ValueError(f"case {case.get('id')}: anchor occurs {count} times, expected exactly once")
    end = summary.index(anchor) + len(anchor)
    return summary[:end] + case.get("prefix", " ") + case["sentence"] + summary[end:]


def _main() -> None:
    for t in real_transcripts():
        print(f"{t['name']:<22} present={t['present']!s:<5} compactions={len(t['compactions'])} {t['path']}")
    print(f"labelled compactions: {len(labels())}, claims: {sum(len(v['claims']) for v in labels().values())}")
    sets = [
        ("", planted_cases, second_author_cases),
        ("held-out ", planted_heldout_cases, second_author_heldout_cases),
        ("held-out-2 ", planted_heldout2_cases, second_author_heldout2_cases),
        ("held-out-3 ", planted_heldout3_cases, second_author_heldout3_cases),
        ("held-out-4 ", planted_heldout4_cases, second_author_heldout4_cases),
        ("held-out-5 ", list, second_author_heldout5_cases),
        ("held-out-6 ", list, second_author_heldout6_cases),
        ("held-out-7 ", list, second_author_heldout7_cases),
        ("held-out-5 planted ", planted_heldout5_cases, list),
    ]
    for name, planted, second in sets:
        kinds = collections.Counter(case["kind"] for case in planted())
        print(f"{name}planted:", ", ".join(f"{k} {kinds[k]}" for k in PLANTED_KINDS))
        styles = collections.Counter(case["style"] for case in second())
        print(f"{name}second-author cases: {sum(styles.values())} in {len(styles)} styles")


if __name__ == "__main__":
    _main()
