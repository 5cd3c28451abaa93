"""``ctxledger report`` with hostile session text: script tags, attribute breakers, an HTML comment
opener and Unicode bidi overrides in span texts, meta, authors, reasons, marks and the session
name. The HTML must carry all of it as inert text: no element or attribute comes from the log, the
inline JSON cannot close its script element, and direction overrides are shown, not obeyed."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner

from engine import EstimateCounter, Ledger
from engine.cli import main
from engine.report import build_report

HOSTILE = '<script>alert(1)</script> "><img src=x onerror=alert(2)> \'\u202egnp.exe\u202c <!-- </pre>'
NAME = 'evil"><script>alert(3)</script>\u202e'


def _hostile(url: str) -> None:
    ledger = Ledger.open(url, token_counter=EstimateCounter())
    s = ledger.create_session(NAME, strict=False)
    a = s.observe("billing-api 503 at 10:02 " + HOSTILE, role="tool", kind="tool_result",
                  meta={"tool_call_id": HOSTILE, HOSTILE: HOSTILE}, by=HOSTILE)
    b = s.observe("auth-service 500 at 10:07 " + HOSTILE, role="user", by=HOSTILE)
    s.mark(HOSTILE)
    d = s.rewrite([a.id, b.id], "completed at 14:02 " + HOSTILE, by=HOSTILE, reason=HOSTILE)
    s.observe("next " + HOSTILE, role="user")
    s.rewrite([d.id, "o3"], "again at 15:55 " + HOSTILE, by=HOSTILE, reason=HOSTILE)  # a violation: findings
    s.prune("d2", reason=HOSTILE)
    s.restore("d2", reason=HOSTILE)
    ledger.close()


def _markup_outside_data(html: str) -> str:
    """The document with the inline JSON element cut out (checked separately)."""
    return re.sub(r'<script type="application/json" id="report-data">.*?</script>', "", html, flags=re.DOTALL)


def test_report_of_hostile_text_is_inert(tmp_path):
    url = f"sqlite:///{tmp_path / 'hostile.db'}"
    _hostile(url)
    out = tmp_path / "report.html"
    r = CliRunner().invoke(main, ["--db", url, "report", NAME, "-o", str(out)])
    assert r.exit_code == 0, r.output
    html = out.read_text()
    body = _markup_outside_data(html)
    assert body.count("<script") == 1  # the report's own inline script, nothing from the log
    assert "<img" not in body and "onerror=alert" not in body.replace("onerror=alert(2)&gt;", "")
    assert "<!-- </pre>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body  # shown as text
    # bidi controls never reach the markup as characters; they are shown as visible markers
    assert "\u202e" not in body and "\u202c" not in body
    assert "⟨U+202E⟩" in body
    # the inline JSON: no '<' at all, so no '</script>' or '<!--', and it round-trips exactly
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, flags=re.DOTALL)
    assert m and "<" not in m.group(1)
    data = json.loads(m.group(1))
    assert data["sessions"][0]["name"] == NAME
    # mark labels are drawn as chart text by the script: their bidi controls are already made visible
    labels = [label for label, _ in data["sessions"][0]["marks"]]
    assert labels and all("\u202e" not in label and "⟨U+202E⟩" in label for label in labels)


def test_build_report_escapes_every_field(tmp_path):
    url = f"sqlite:///{tmp_path / 'hostile.db'}"
    _hostile(url)
    ledger = Ledger.open(url)
    html = build_report([ledger.session(NAME)], title=HOSTILE)
    body = _markup_outside_data(html)
    assert "<title>&lt;script&gt;" in body and body.count("<script") == 1
    assert "\u202e" not in body
    findings = re.findall(r'<li class="(\w+)"><details>', body)
    assert findings and set(findings) <= {"error", "warning"}  # the finding list was drawn, escaped
    ledger.close()
