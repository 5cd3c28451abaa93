"""Every finding the lexical checker gives on the benchmark sets, written to files for byte comparison.

    python benchmarks/_findings_snapshot.py OUT_DIR [--no-xsum] [--comps PICKLE]

Writes OUT_DIR/dev.jsonl (real compactions, planted dev, second author dev, the drift set, XSumFaith)
and OUT_DIR/heldout.jsonl (planted and second-author held-out: compare it with ``cmp``, never read
it). Each line is one case under one way of calling the checker: the whole result (every field of
every finding, specifics, coverage) as JSON. A change that only makes the checker faster must
leave both files byte-identical.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import quality  # noqa: E402
import quality_real  # noqa: E402
import real_data  # noqa: E402

from projections.grounding import Source, SourceIndex, check, gate_findings  # noqa: E402
from projections.grounding.checker import LEXICAL, run_checker  # noqa: E402


def _dump(out, tag: str, result) -> None:
    out.write(json.dumps({"case": tag, "findings": result.findings, "specifics": result.specifics,
                          "source_specifics": result.source_specifics, "dropped": result.dropped},
                         sort_keys=True, ensure_ascii=False) + "\n")


def _dump_list(out, tag: str, findings: list[dict]) -> None:
    out.write(json.dumps({"case": tag, "findings": findings}, sort_keys=True, ensure_ascii=False) + "\n")


def _dump_planted(out, prefix: str, cases: list[dict], comps: list) -> None:
    """Every planted case whose transcript is here, checked against its compaction's sources."""
    by_path = {c.path: c for c in comps}
    for case in cases:
        c = by_path.get(case["transcript"])
        if c is None:
            continue
        try:
            planted = real_data.plant(c.summary, case)
        except ValueError:
            continue
        _dump(out, f"{prefix}/{case['id']}", check(planted, c.sources, index=c.index))


def _dump_second(out, prefix: str, cases: list[dict]) -> None:
    for case in cases:
        sources = [Source(s["text"], s.get("role", ""), call=s.get("call", "")) for s in case["sources"]]
        _dump(out, f"{prefix}/{case['id']}", check(case["summary"], sources))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--no-xsum", action="store_true")
    ap.add_argument("--comps", type=Path, help="pickled real compactions (quality_real.real_compactions())")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.process_time()
    if args.comps:
        comps = pickle.load(args.comps.open("rb"))
    else:
        comps = quality_real.real_compactions()
    for c in comps:
        c.index = SourceIndex.build([s.text for s in c.sources])
    with (args.out / "dev.jsonl").open("w", encoding="utf-8") as out:
        for c in comps:
            _dump(out, f"real/{c.name}/check", check(c.summary, c.sources))
            _dump(out, f"real/{c.name}/indexed", check(c.summary, c.sources, index=c.index, with_coverage=False))
            _dump(out, f"real/{c.name}/literals", check(c.summary, c.sources, with_claims=False))
            _dump(out, f"real/{c.name}/lexical", run_checker(LEXICAL, c.summary, c.sources))
            _dump_list(out, f"real/{c.name}/gate", gate_findings(c.summary, [s.text for s in c.sources]))
        print(f"real {time.process_time() - t0:.1f}s", flush=True)
        _dump_planted(out, "planted", real_data.planted_cases(), comps)
        print(f"planted {time.process_time() - t0:.1f}s", flush=True)
        _dump_second(out, "second", real_data.second_author_cases())
        print(f"second {time.process_time() - t0:.1f}s", flush=True)
        drift = [json.loads(line) for line in quality.DRIFT.read_text(encoding="utf-8").splitlines() if line.strip()]
        for case in drift:
            roles = case.get("roles")
            sources = [Source(t, r) for t, r in zip(case["sources"], roles)] if roles else case["sources"]
            _dump(out, f"drift/{case['id']}", check(case["derived"], sources))
        print(f"drift {time.process_time() - t0:.1f}s", flush=True)
        if not args.no_xsum and quality.XSUM.exists():
            records = quality.load_xsum(quality.XSUM)
            vocabulary = quality.learn_vocabulary([r for r in records if r["summac_xsumfaith"]["cut"] == "val"])
            for i, r in enumerate(records):
                _dump(out, f"xsum/{i}", check(r["summary"], [r["source"]]))
                _dump(out, f"xsum/{i}/vocab", check(r["summary"], [r["source"]], with_coverage=False,
                                                   lowercase_vocabulary=vocabulary))
            print(f"xsum {time.process_time() - t0:.1f}s", flush=True)
    with (args.out / "heldout.jsonl").open("w", encoding="utf-8") as out:
        _dump_planted(out, "planted-heldout", real_data.planted_heldout_cases(), comps)
        _dump_second(out, "second-heldout", real_data.second_author_heldout_cases())
    print(f"total {time.process_time() - t0:.1f}s cpu")


if __name__ == "__main__":
    main()
