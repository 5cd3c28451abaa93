"""Long source lists print as ranges (``o2–o184``), in the CLI and in lineage."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.spans import id_ranges


def _expand(text: str) -> list[str]:
    out: list[str] = []
    for part in text.split(","):
        if "–" in part:
            first, last = part.split("–")
            out.extend(f"{first[0]}{n}" for n in range(int(first[1:]), int(last[1:]) + 1))
        elif part:
            out.append(part)
    return out


def test_runs_of_three_or_more_become_ranges():
    assert id_ranges([f"o{i}" for i in range(2, 185)]) == "o2–o184"
    assert id_ranges(["o2", *[f"o{i}" for i in range(3, 46)], "o47"]) == "o2–o45,o47"
    assert id_ranges(["o1", "o2"]) == "o1,o2"
    assert id_ranges(["d1", "o5", "o6", "o7", "d2", "d3"]) == "o5–o7,d1–d3"
    assert id_ranges([]) == ""


@given(st.sets(st.integers(1, 300)), st.sets(st.integers(1, 40)))
def test_ranges_expand_back_to_the_same_ids(obs, der):
    ids = [f"o{n}" for n in obs] + [f"d{n}" for n in der]
    assert _expand(id_ranges(ids)) == [f"o{n}" for n in sorted(obs)] + [f"d{n}" for n in sorted(der)]


def test_show_prints_a_long_source_list_as_a_range(tmp_path):
    from click.testing import CliRunner

    from engine import EstimateCounter, Ledger
    from engine.cli import main

    url = f"sqlite:///{tmp_path / 'r.db'}"
    with Ledger.open(url, token_counter=EstimateCounter()) as led:
        s = led.create_session("long")
        with s.batch():
            for i in range(200):
                s.observe(f"line {i}: status 200")
        s.rewrite([f"o{i}" for i in range(2, 185)], "lines 1 to 183 all answered 200", by="t")
    out = CliRunner().invoke(main, ["--db", url, "show", "long"]).output
    assert "o2–o184" in out and "o3,o4" not in out
    log = CliRunner().invoke(main, ["--db", url, "log", "long", "--type", "Rewritten"]).output
    assert "d1 <- o2–o184" in log
