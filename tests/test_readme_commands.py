"""Every command of the ``ctxledger`` CLI is documented in README.md (sqlite-utils' habit: a command
nobody can find in the docs does not exist)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from engine.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.parametrize("name", sorted(main.commands))
def test_every_command_is_documented_in_the_readme(name):
    text = README.read_text(encoding="utf-8")
    assert re.search(rf"\bctxledger (?:--db \S+ )?{re.escape(name)}\b", text), (
        f"`ctxledger {name}` is not documented in README.md: add it, with an example and its real output"
    )


def test_the_forensics_section_shows_each_read_side_command_with_its_output():
    text = README.read_text(encoding="utf-8")
    section = text.split("<!-- section:forensics", 1)[1].split("<!-- /section:forensics -->", 1)[0]
    for name in ("audit", "blame", "lineage", "diff", "timeline"):
        # a shell example (a line starting with "$ ctxledger NAME") followed by its output
        assert re.search(rf"^\$ ctxledger (?:--db \S+ )?{name}\b.*\n(?!```)\S", section, re.M), name
