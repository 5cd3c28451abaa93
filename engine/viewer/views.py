"""The HTML of the conversation view, the search results and the compare page (``pages`` holds the
scrubber's). Same rules as ``pages``: every value from a session goes through ``esc``/``esc_text``
(or ``markdown.render``, which escapes first), URLs through ``url``."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from engine.viewer.escape import esc, esc_text
from engine.viewer.markdown import render
from engine.viewer.pages import PREVIEW_CHARS, _badge, page, source_list, tool_call, url

__all__ = ["COLLAPSE_CHARS", "compare_page", "conversation_fragment", "search_fragment", "search_page"]

COLLAPSE_CHARS = 1_200  # longer texts are folded: a preview, more one click away
FOLD_CHARS = 4_000  # what the fold holds; the span panel shows the whole text
_ROLE_CLASS = {"user": "user", "assistant": "assistant", "tool": "tool", "system": "system"}


def _when(item: dict[str, Any]) -> str:
    if not item.get("time"):
        return ""
    original = item.get("time_source") == "original"
    title = f"the transcript's own time; recorded {item['recorded']}" if original else "when it was recorded"
    return f'<time class="when {"original" if original else "recorded"}" title="{esc(title)}">{esc(item["time"])}</time>'


def _pos(p: int) -> str:
    return f'<a href="?at={p}" data-at="{p}" class="pref">@{p:,}</a>'


def _call(info: dict[str, Any] | None) -> str:
    if not info:
        return ""
    parts = []
    if info.get("model"):
        parts.append(f'<span class="model">{esc(info["model"])}</span>')
    if info.get("latency_ms") is not None:
        parts.append(f"{info['latency_ms']:,.0f} ms")
    if info.get("input_tokens") is not None or info.get("output_tokens") is not None:
        i, o = info.get("input_tokens"), info.get("output_tokens")
        parts.append(f"{'?' if i is None else f'{i:,}'} in / {'?' if o is None else f'{o:,}'} out tokens")
    if info.get("cache_read_tokens"):
        parts.append(f"{info['cache_read_tokens']:,} cached")
    if info.get("cost") is not None:
        parts.append(f"${info['cost']:,.4f}")
    return f'<div class="callinfo">model call: {" · ".join(parts)}</div>' if parts else ""


def _folded(text: str, *, md: bool, span_id: str = "") -> str:
    """Text shown whole when short; else a preview and more of it folded in a ``<details>`` (up to
    ``FOLD_CHARS``: the span panel has the rest)."""
    if len(text) <= COLLAPSE_CHARS:
        return render(text) if md else f'<pre class="text full">{esc_text(text)}</pre>'
    lines = text.count("\n") + 1
    part = text[:FOLD_CHARS]
    whole = render(part) if md else f'<pre class="text full">{esc_text(part)}</pre>'
    if len(text) > FOLD_CHARS:
        whole += (f'<p class="meta">… {len(text) - FOLD_CHARS:,} more characters: '
                  f'<a href="#{esc(span_id)}" data-span="{esc(span_id)}" class="sref">open {esc(span_id)}</a></p>')
    return (f'<pre class="text">{esc_text(text[:PREVIEW_CHARS])}</pre><details class="long"><summary>{len(text):,} '
            f'characters, {lines:,} line{"s" if lines != 1 else ""}: show more</summary>{whole}</details>')


def _status(status: str) -> str:
    cls = "live" if status == "live" else ("summarized" if status.startswith("summarized") else "gone")
    return f'<span class="status {cls}">{esc(status)}</span>'


def _message(item: dict[str, Any]) -> str:
    role = item["role"]
    cls = _ROLE_CLASS.get(role, "other")
    head = (f'<div class="mh"><b class="who">{esc(role)}</b> <span class="rk">{esc(item["kind"])}</span> '
            f'<a href="#{esc(item["span_id"])}" data-span="{esc(item["span_id"])}" class="sref">{esc(item["span_id"])}</a> '
            f'{_pos(item["position"])} {_status(item["status"])} {_when(item)} '
            f'<span class="tok">{item["tokens"]:,} tok</span></div>')
    if item["kind"] == "tool_call":
        call = tool_call(item) or f'<pre class="text">{esc_text(item["text"][:COLLAPSE_CHARS])}</pre>'
        body = f'<pre class="text call-args">{call}</pre>' if not call.startswith("<pre") else call
        results = "".join(
            f'<details class="result"{" open" if len(r["text"]) <= 300 else ""}><summary>result '
            f'<a href="#{esc(r["span_id"])}" data-span="{esc(r["span_id"])}" class="sref">{esc(r["span_id"])}</a> '
            f'{_pos(r["position"])} {_status(r["status"])} {_when(r)} · {r["tokens"]:,} tok'
            f'{" · error" if (r.get("meta") or {}).get("is_error") else ""}</summary>{_folded(r["text"], md=False, span_id=r["span_id"])}</details>'
            for r in item.get("results", [])
        ) or '<p class="meta">no result up to this position (or before this page of the log)</p>'
        return f'<li class="msg {cls} toolcall">{head}{_call(item.get("call"))}{body}{results}</li>'
    md = item["kind"] == "message" and role in ("user", "assistant", "system")
    return f'<li class="msg {cls}">{head}{_call(item.get("call"))}{_folded(item["text"], md=md, span_id=item["span_id"])}</li>'


def _findings(found: dict[str, Any] | None, span_id: str) -> str:
    if found is None:
        return (f'<p class="meta findings-unchecked">findings: not checked here (its sources are long); '
                f'<a href="#{esc(span_id)}" data-span="{esc(span_id)}" class="sref">open {esc(span_id)}</a> for its grounding</p>')
    where = "the fleet view's audit" if found["source"] == "audit" else "checked against its sources"
    if not found["items"]:
        return f'<p class="ok findings-none">no findings ({esc(where)})</p>'
    lis = "".join(f'<li class="{esc(f["severity"])}">{esc(f["severity"])}: {esc(f["message"])}</li>' for f in found["items"])
    return f'<ul class="findings" title="{esc(where)}">{lis}</ul>'


def _summary(item: dict[str, Any]) -> str:
    g = item["generation"]
    verb = "re-derived from its originals" if item["rederived"] else "summary"
    flag = ' <b class="bad">VIOLATION: a summary of a summary</b>' if item["violation"] else ""
    by = f' by <b>{esc(item["by"])}</b>' if item["by"] else ""
    why = f' — “{esc(item["reason"])}”' if item["reason"] else ""
    return (f'<li class="msg derived"><div class="mh"><b class="who">derived</b> '
            f'{_badge({"generation": g, "provenance": "derived"})} {esc(verb)} '
            f'<a href="#{esc(item["span_id"])}" data-span="{esc(item["span_id"])}" class="sref">{esc(item["span_id"])}</a> '
            f'{_pos(item["position"])} {_status(item["status"])} {_when(item)}{by}{why}{flag}</div>'
            f'<div class="src">from {source_list(item["sources"])}</div>{_findings(item.get("findings"), item["span_id"])}'
            f'{_folded(item["text"], md=True, span_id=item["span_id"])}</li>')


def _refused(item: dict[str, Any]) -> str:
    findings = "".join(f"<li>{esc(f.get('message', ''))}</li>" for f in item["findings"])
    by = f' by <b>{esc(item["by"])}</b>' if item["by"] else ""
    return (f'<li class="msg refused"><div class="mh"><b class="bad">REFUSED</b> {esc(item["command"])} of '
            f'{source_list(item["inputs"])} {_pos(item["position"])} {_when(item)}{by}</div>'
            f'{f"<ul class=findings>{findings}</ul>" if findings else ""}'
            f'{_folded(item["text"], md=False) if item["text"] else ""}</li>')


def conversation_fragment(conv: dict[str, Any]) -> str:
    """``conversation.conversation``'s dict as a chat."""
    out = [f'<div id="conversation-data" data-at="{conv["at"]}" data-start="{conv["start"]}" '
           f'data-items="{len(conv["items"])}" hidden></div>']
    if conv["earlier"]:
        out.append(f'<p class="meta earlier">events {conv["start"]:,}–{conv["at"]:,} of {conv["head"]:,}: '
                   f'<a href="?at={conv["earlier"]}" data-at="{conv["earlier"]}" class="pref">earlier events</a></p>')
    out.append('<ol class="chat">')
    for item in conv["items"]:
        t = item["type"]
        if t == "message":
            out.append(_message(item))
        elif t == "summary":
            out.append(_summary(item))
        elif t == "refused":
            out.append(_refused(item))
        else:
            what = item["text"] if t == "note" else f'{item["action"]} {item["span_id"]}' + (
                f' into {", ".join(item["restored"][:12])}' if item.get("restored") else "")
            by = f" by {esc(item['by'])}" if item["by"] else ""
            why = f" — “{esc(item['reason'])}”" if item["reason"] else ""
            out.append(f'<li class="edit">{_pos(item["position"])} {esc(what)}{by}{why} {_when(item)}</li>')
    if not conv["items"]:
        out.append('<li class="none">Nothing in this window of the log.</li>')
    out.append("</ol>")
    return "\n".join(out)


def search_fragment(res: dict[str, Any]) -> str:
    hits = res["hits"]
    if not hits:
        unchecked = f' ({res["unchecked"]:,} matching summaries not checked here)' if res.get("unchecked") else ""
        return f'<p class="none" id="search-none">Nothing in the log matches “{esc(res["query"])}” with these filters{unchecked}.</p>'
    out = [f'<ol class="hits" data-count="{len(hits)}">']
    for h in hits:
        snippet = esc_text(h["snippet"]).replace("«", "<mark>").replace("»", "</mark>")
        findings = "".join(f'<li class="{esc(f["severity"])}">{esc(f["message"])}</li>' for f in h["findings"])
        out.append(
            f'<li class="hit {esc(h["provenance"])}"><a href="#{esc(h["span_id"])}" data-span="{esc(h["span_id"])}" '
            f'class="sref">{esc(h["span_id"])}</a> {esc(h["role"])}/{esc(h["kind"])} at {_pos(h["position"])} · '
            f'{esc(h["status"])}<br><span class="snip">{snippet}</span>'
            f'{f"<ul class=findings>{findings}</ul>" if findings else ""}</li>'
        )
    out.append("</ol>")
    if res.get("unchecked"):
        out.append(f'<p class="meta">{res["unchecked"]:,} matching summar{"y" if res["unchecked"] == 1 else "ies"} '
                   "not checked here (long sources): open them for their grounding</p>")
    if res["more"]:
        out.append('<p class="meta">the newest 200 matches were searched: add words to narrow it down</p>')
    return "\n".join(out)


ROLES = ("user", "assistant", "tool", "system")
KINDS = ("message", "tool_call", "tool_result", "summary")


def _select(name: str, label: str, values: tuple[str, ...], chosen: str, any_label: str) -> str:
    opts = "".join(f'<option{" selected" if v == chosen else ""}>{esc(v)}</option>' for v in values)
    return (f'<select name="{name}" id="all-{name}" aria-label="{label}"><option value="">{any_label}</option>'
            f"{opts}</select>")


def search_page(res: dict[str, Any] | None, *, error: str = "") -> str:
    """Search over every session of the store: a plain GET form, each hit linking to its session at
    its position (the span's panel opened)."""
    q = res or {"query": "", "role": "", "kind": "", "provenance": "", "findings_only": False}
    prov = "".join(f'<option value="{v}"{" selected" if v == q["provenance"] else ""}>{v}</option>'
                   for v in ("observed", "derived"))
    form = (f'<form id="all-search" action="/search" class="controls"><input name="q" id="all-q" type="search" required '
            f'value="{esc(q["query"])}" placeholder="words, e.g. 503 billing-api" autocomplete="off" maxlength="500"> '
            f'{_select("role", "role", ROLES, q["role"], "any role")} {_select("kind", "kind", KINDS, q["kind"], "any kind")} '
            f'<select name="provenance" id="all-provenance" aria-label="provenance"><option value="">observed or derived'
            f'</option>{prov}</select> <label><input type="checkbox" name="findings" value="1" id="all-findings"'
            f'{" checked" if q["findings_only"] else ""}> with findings only</label> <button>search</button></form>')
    if error:
        results = f'<p class="none" id="search-error">{esc(error)}</p>'
    elif res is None:
        results = '<p class="meta">every session of the store, the most recently active first</p>'
    elif not res["hits"]:
        results = (f'<p class="none" id="search-none">Nothing in {res["searched"]:,} session'
                   f'{"" if res["searched"] == 1 else "s"} matches “{esc(res["query"])}” with these filters.</p>')
    else:
        items = []
        for h in res["hits"]:
            snippet = esc_text(h["snippet"]).replace("«", "<mark>").replace("»", "</mark>")
            findings = "".join(f'<li class="{esc(f["severity"])}">{esc(f["message"])}</li>' for f in h["findings"])
            link = url("s", h["session"], at=h["position"]) + "#" + quote(h["span_id"], safe="")
            items.append(
                f'<li class="hit {esc(h["provenance"])}" data-session="{esc(h["session"])}">'
                f'<a href="{esc(link)}">{esc(h["session"])} · {esc(h["span_id"])} at {h["position"]:,}</a> '
                f'{esc(h["role"])}/{esc(h["kind"])} · {esc(h["status"])}<br><span class="snip">{snippet}</span>'
                f'{f"<ul class=findings>{findings}</ul>" if findings else ""}</li>')
        n = len(res["hits"])
        results = (f'<p class="meta" id="search-count">{n:,} match{"" if n == 1 else "es"} in {res["searched"]:,} '
                   f'session{"" if res["searched"] == 1 else "s"}</p><ol class="hits" id="all-hits" data-count="{n}">'
                   f'{"".join(items)}</ol>')
        if res["more"]:
            results += '<p class="meta">more matches than shown: add words or filters to narrow it down</p>'
    if res is not None and res.get("unreadable"):
        results += f'<p class="meta">{res["unreadable"]:,} unreadable session(s) skipped</p>'
    body = (f'<header class="bar"><a href="/" class="home">ctxledger</a> <h1>search</h1>'
            f'<span class="meta">text, role, kind, provenance and findings over every session\'s whole log</span></header>'
            f"{form}<section id=\"all-results\">{results}</section>")
    title = f"search {q['query']} · ctxledger" if q["query"] else "search · ctxledger"
    return page(title, body, page_id="search")


def _cell(spans: list[dict[str, Any]]) -> str:
    if not spans:
        return '<td class="empty">—</td>'
    parts = []
    for s in spans:
        text = s["text"]
        more = len(text) - 400
        src = f'<div class="src">from {source_list(s["sources"])}</div>' if s["sources"] else ""
        parts.append(f'<div class="cspan {esc(s["provenance"])}"><b>{esc(s["id"])}</b> {_badge(s)} '
                     f'<span class="rk">{esc(s["role"])}/{esc(s["kind"])}</span> <span class="tok">{s["tokens"]:,} tok</span>'
                     f'{src}<pre class="text">{esc_text(text[:400])}'
                     f'{f"<span class=more>… {more:,} more characters</span>" if more > 0 else ""}</pre></div>')
    return f'<td>{"".join(parts)}</td>'


def compare_page(cmp: dict[str, Any], sessions: list[str]) -> str:
    a, b = cmp["a"], cmp["b"]

    def head(side: dict[str, Any]) -> str:
        return (f'<a href="{esc(url("s", side["session"]))}?at={side["position"]}">{esc(side["session"])}</a> at '
                f'{side["position"]:,}: {side["spans"]:,} spans, {side["tokens"]:,} tokens, {side["derived"]:,} derived, '
                f'max generation {side["max_generation"]}')

    options = "".join(f'<option value="{esc(n)}">' for n in sessions[:500])
    form = (f'<form id="compare-form" action="/compare" class="controls">'
            f'<label>left <input name="a" list="session-names" value="{esc(a["session"])}" required></label> '
            f'<label>at <input name="at_a" value="{a["position"]}" size="8"></label> '
            f'<label>right <input name="b" list="session-names" value="{esc(b["session"])}" required></label> '
            f'<label>at <input name="at_b" value="{b["position"]}" size="8"></label> <button>compare</button>'
            f'<datalist id="session-names">{options}</datalist></form>'
            '<p class="meta">a position, a mark (e.g. cycle-9) or -1 for the head. Rows pair the same observations; '
            'a summary sits on the row of its earliest source; runs of identical rows are folded.</p>')
    rows = []
    run = 0

    def fold() -> None:
        nonlocal run
        if run:
            rows.append(f'<tr class="same-run"><td colspan="3">{run:,} identical row{"s" if run != 1 else ""}</td></tr>')
            run = 0

    for r in cmp["rows"]:
        if r["same"]:
            run += 1
            continue
        fold()
        turn = '<br><span class="turn">user turn</span>' if r["starts_turn"] else ""
        rows.append(f'<tr class="differ"><th>o{r["key"]}{turn}</th>{_cell(r["a"])}{_cell(r["b"])}</tr>')
    fold()
    note = '<p class="meta">only the first 2,000 rows are shown</p>' if cmp["truncated"] else ""
    body = (f'<header class="bar"><a href="/" class="home">ctxledger</a> <h1>compare</h1>'
            f'<span class="meta">{cmp["differ"]:,} rows differ</span></header>{form}'
            f'<div class="cmp-wrap"><table id="compare"><thead><tr><th></th><th>{head(a)}</th><th>{head(b)}</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>{note}')
    return page(f"compare {a['session']} and {b['session']} · ctxledger", body, page_id="compare")
