"""How the viewer shows text: ANSI sequences dropped, tool arguments as the text they are, source
lists as ranges with a count, Markdown rendered into a fixed set of tags, list numbers kept with
their sentence in the grounding view."""

from __future__ import annotations

import html.parser
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from engine import EstimateCounter, Ledger
from engine.viewer import data, markdown, pages
from engine.viewer.app import create_app
from engine.viewer.escape import esc_text, strip_ansi

HOSTILE = '<script>alert(1)</script> "><img src=x onerror=alert(2)> \u202e <!-- </pre> [x](javascript:alert(3))'


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


def _tags(fragment: str) -> _Tags:
    p = _Tags()
    p.feed(fragment)
    p.close()
    return p


def test_ansi_sequences_are_dropped_and_a_lone_escape_is_shown():
    assert strip_ansi("\x1b[1mok\x1b[22m \x1b[38;5;196mred\x1b[0m") == "ok red"
    assert strip_ansi("\x1b]0;title\x07done") == "done"
    assert esc_text("\x1b[22m<b>") == "&lt;b&gt;"
    assert "U+001B" in esc_text("a lone \x1b here")


def test_the_buffer_shows_terminal_output_without_its_escape_sequences(tmp_path):
    ledger = Ledger.open(f"sqlite:///{tmp_path / 't.db'}", token_counter=EstimateCounter())
    s = ledger.create_session("term")
    s.observe("pytest -q", role="assistant", kind="tool_call", meta={"tool_call_id": "c1", "name": "Bash",
              "arguments": {"command": "pytest -q\necho \"done\"", "timeout": 30}})
    s.observe("\x1b[32m5 passed\x1b[0m in 0.2s", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
    c = TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1")
    state = c.get("/s/term/state").text
    assert "5 passed" in state and "U+001B" not in state and "[32m" not in state
    # the call's arguments as the text they are: a real line break, quotes unescaped once
    assert '<span class="call">Bash</span>' in state
    assert "pytest -q\necho &quot;done&quot;" in state and '\\"done\\"' not in state and "\\n" not in state
    assert '<span class="k">timeout</span> 30' in state
    ledger.close()


def test_a_tool_call_with_hostile_arguments_stays_text():
    span = {"kind": "tool_call", "meta": {"name": HOSTILE, "arguments": {HOSTILE: HOSTILE, "n": [1, HOSTILE]}}}
    out = pages.tool_call(span)
    assert out is not None and {t for t, _ in _tags(out).tags} == {"span"}
    assert pages.tool_call({"kind": "tool_call", "meta": {"name": "x", "arguments": "not a dict"}}) is None


def test_hundreds_of_sources_are_a_count_and_ranges():
    ids = [f"o{i}" for i in range(1, 201)] + [f"o{i}" for i in range(202, 410)]
    out = pages.source_list(ids)
    assert out.startswith('<span class="count">408 sources:</span>') and "o1–o200, o202–o409" in out
    assert pages.source_list(["o1", "o3"]) == "o1, o3"
    many = [f"o{i}" for i in range(1, 60, 2)]  # 30 ranges of one
    assert pages.source_list(many).endswith("…") and pages.source_list(many, most=None).endswith("o59")


def test_a_summary_of_408_observations_keeps_its_panel_short(tmp_path):
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'big.db'}", token_counter=EstimateCounter())
    s = ledger.create_session("big")
    with s.batch():
        ids = [s.observe(f"line {i}: service-{i} answered 200", role="tool", kind="tool_result",
                         meta={"tool_call_id": f"c{i}"}).id for i in range(408)]
    d = s.rewrite(ids, "All 408 services answered 200.", by="model-x")
    c = TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1")
    panel = c.get(f"/s/big/span/{d.id}").text
    assert "408 sources:" in panel and "o1–o408" in panel
    assert panel.count("<li><b>o") == 50 and "<details class=\"originals\">" in panel  # folded, not open
    lineage = c.get(f"/s/big/lineage/{d.id}").text
    assert lineage.count('class="sref"') < 20 and "o1–o408" in lineage
    state = c.get("/s/big/state").text
    assert "408 sources:" in state
    ledger.close()


def test_list_numbers_are_not_sentences_in_the_grounding_view():
    text = "Summary:\n1. billing-api returned 503 at 10:02.\n2. auth-service returned 500. It recovered.\na) one more"
    parts = [text[a:b] for a, b in data.sentence_bounds(text)]
    assert parts == ["Summary:", "1. billing-api returned 503 at 10:02.", "2. auth-service returned 500.",
                     "It recovered.", "a) one more"]
    sentences = data.grounding_sentences(text, ["billing-api returned 503 at 10:02", "auth-service returned 500"])
    assert [s["text"] for s in sentences] == parts


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["1.", "2)", "a.", "-", "Done.", "it failed at 10:02.", "\n", " ", "ok;", "x"]), max_size=14))
def test_sentence_bounds_cover_the_text_in_order_and_no_bound_is_a_bare_number(words):
    text = " ".join(words)
    bounds = data.sentence_bounds(text)
    assert all(a < b or text.strip() == "" for a, b in bounds)
    assert all(b1 <= a2 for (_, b1), (a2, _) in zip(bounds, bounds[1:]))
    covered = "".join(text[a:b] for a, b in bounds)
    assert "".join(covered.split()) == "".join(text.split())
    for a, b in bounds[:-1]:
        assert not data._LIST_MARKER.fullmatch(text[a:b]) or "\n" in text[b : bounds[bounds.index((a, b)) + 1][0]]


ALLOWED = {"div": {"class"}, "p": set(), "br": set(), "b": set(), "i": set(), "code": set(), "ul": set(),
           "ol": {"start"}, "li": set(), "blockquote": set(), "pre": {"class"}, "h4": set(), "h5": set(),
           "h6": set(), "hr": set(), "span": {"class"}}


def test_markdown_renders_the_common_forms():
    out = markdown.render("# Plan\n1. **check** the `api`\n2. *retry*\n\n- a\n- b\n\n> quoted\n\n```\n<b>x</b>\n```")
    assert "<h4>Plan</h4>" in out and '<ol start="1"><li><b>check</b> the <code>api</code></li><li><i>retry</i></li></ol>' in out
    assert "<ul><li>a</li><li>b</li></ul>" in out and "<blockquote>quoted</blockquote>" in out
    assert '<pre class="md-code">&lt;b&gt;x&lt;/b&gt;</pre>' in out
    link = markdown.render("[docs](https://example.com/a)")
    assert "<a" not in link and "https://example.com/a" in link


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["# ", "**", "*", "_", "`", "```", "\n", "1. ", "- ", "> ", "[a](b)", HOSTILE,
                                 "<b>", "&amp;", '"', "\u202e", "\x1b[1m", "text"]), max_size=20))
def test_markdown_never_emits_a_tag_or_attribute_outside_its_set(parts):
    out = markdown.render("".join(parts))
    for tag, attrs in _tags(out).tags:
        assert tag in ALLOWED, (tag, out)
        assert {k for k, _ in attrs} <= ALLOWED[tag], (tag, attrs, out)
    assert "\u202e" not in out and "\x1b" not in out


def test_tool_call_json_is_not_escaped_twice():
    args = {"command": 'grep -n "x" a.py\nls'}
    span = {"kind": "tool_call", "meta": {"name": "Bash", "arguments": args}, "text": f"Bash({json.dumps(args)})"}
    out = pages.tool_call(span)
    assert 'grep -n &quot;x&quot; a.py\nls' in out


def test_a_summary_of_long_sources_gets_its_grounding_by_a_request_of_its_own(tmp_path):
    ledger = Ledger.open(f"sqlite:///{tmp_path / 'long.db'}", token_counter=EstimateCounter())
    s = ledger.create_session("long")
    with s.batch():
        ids = [s.observe(f"line {i}: billing-api answered 503 at 10:{i % 60:02d} " + "x" * 400, role="tool",
                         kind="tool_result", meta={"tool_call_id": f"c{i}"}).id for i in range(120)]
    d = s.rewrite(ids, "billing-api answered 503 at 10:01; it recovered at 14:02.", by="model-x")
    c = TestClient(create_app(ledger, fleet=False), base_url="http://127.0.0.1")
    panel = c.get(f"/s/long/span/{d.id}").text
    assert 'id="grounding-box" data-span="d1"' in panel and "<ol class=\"grounding\">" not in panel
    assert c.get(f"/api/s/long/span/{d.id}").json()["grounding_deferred"] is True
    g = c.get(f"/s/long/grounding/{d.id}").text
    assert "<ol class=\"grounding\">" in g and "14:02" in g and "1 unsupported" in g
    want = data.grounding_sentences(d.text, [o.text for o in s.originals(d.id)])
    assert g == pages.grounding_fragment(want)
    assert c.get("/s/long/grounding/o1").status_code == 404
    short = Ledger.open("memory://", token_counter=EstimateCounter()).create_session("short")
    a = short.observe("billing-api answered 503 at 10:01", role="user")
    short.rewrite([a.id], "billing-api answered 503 at 10:01.", by="m")
    assert data.span_detail(short, short.position, "d1")["grounding"] is not None  # short sources: inline
    ledger.close()
