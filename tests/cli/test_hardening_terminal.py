"""Issue 24, item 17: span text is hostile on a terminal too. Bidi controls (U+202E
RIGHT-TO-LEFT OVERRIDE and friends) and invisible characters are printed escaped by every command
that prints span text, as the viewer and the HTML report show them, never obeyed."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from engine import EstimateCounter, Ledger
from engine.cli import _app, main
from engine.escaping import BIDI_CONTROLS

HOSTILE = "rm -rf /tmp/x \u202e}txt.exe{ \u2066hidden\u2069 zero\u200bwidth \x1b[31mred"


def test_printable_escapes_every_bidi_control_the_viewer_escapes():
    for c in BIDI_CONTROLS + "\u200b\u200c\u200d\u2028\u2029\ufeff\x1b\x07":
        shown = _app.printable(f"a{c}b")
        assert c not in shown and shown == f"a\\{'u' if ord(c) > 0xff else 'x'}{ord(c):0{4 if ord(c) > 0xff else 2}x}b"
    assert _app.printable("plain text, é, 漢字") == "plain text, é, 漢字"


@pytest.mark.parametrize("args", [["show", "t"], ["log", "t"], ["blame", "t", "rm -rf"]])
def test_commands_print_hostile_text_escaped(tmp_path, args):
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with Ledger.open(url, token_counter=EstimateCounter()) as led:
        s = led.create_session("t")
        s.observe(HOSTILE)
        before = s.export()
    result = CliRunner().invoke(main, ["--db", url, *args])
    assert result.exit_code in (0, 1), result.output
    assert "rm -rf" in result.output or args[0] == "blame"
    for c in "\u202e\u2066\u2069\u200b\x1b":
        assert c not in result.output
    if args[0] != "blame":
        assert "\\u202e" in result.output
    with Ledger.open(url, token_counter=EstimateCounter()) as led:
        assert led.session("t").export() == before
