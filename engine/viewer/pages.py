"""The viewer's HTML: the sessions page, the session page and the fragments the script swaps in.

Plain strings. Every value that comes from a session goes through ``esc`` (markup, quotes and
direction-changing characters), URLs through ``url`` first; numbers are formatted here. The page
loads its one script and one style sheet from the server itself (the Content-Security-Policy
forbids everything else, inline scripts included).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from engine.spans import id_ranges
from engine.viewer.escape import esc, esc_text

__all__ = [
    "PREVIEW_CHARS",
    "blame_fragment",
    "diff_fragment",
    "error_page",
    "page",
    "session_page",
    "source_list",
    "tool_call",
    "sessions_page",
    "span_fragment",
    "lineage_fragment",
    "lost_fragment",
    "grounding_fragment",
    "state_fragment",
    "url",
]

PREVIEW_CHARS = 600  # span text shown in the buffer; the span panel shows all of it


def url(*parts: Any, **query: Any) -> str:
    """A path from parts (each percent-encoded, slashes included) and a query string."""
    path = "/" + "/".join(quote(str(p), safe="") for p in parts)
    q = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in query.items() if v is not None)
    return path + ("?" + q if q else "")


def page(title: str, body: str, *, page_id: str, data: dict[str, Any] | None = None) -> str:
    attrs = "".join(f' data-{k}="{esc(v)}"' for k, v in (data or {}).items())
    return (
        "<!doctype html>\n"
        f'<html lang="en" data-page="{page_id}" data-rendered="pending"{attrs}>\n<head>\n'
        '<meta charset="utf-8">\n<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n<link rel="icon" href="data:,">\n'
        f"<title>{esc(title)}</title>\n"
        '<link rel="stylesheet" href="/_static/viewer.css">\n'
        '<script src="/_static/viewer.js" defer></script>\n'
        f"</head>\n<body>\n{body}\n<pre id=\"js-error\" hidden></pre>\n</body>\n</html>\n"
    )


def _num(n: Any) -> str:
    return f"{n:,}" if isinstance(n, int) else "–"


# -- the sessions page ---------------------------------------------------------------------------


def sessions_page(rows: list[dict[str, Any]], *, fleet_note: str) -> str:
    head = (
        "<header><h1>ctxledger</h1><p class=meta>every session of the store; click one to replay it. "
        f"{esc(fleet_note)}</p></header>"
    )
    controls = (
        '<p class="controls"><label>filter <input id="filter" type="search" placeholder="session name or finding" '
        'autocomplete="off"></label> <label><input id="only-flagged" type="checkbox"> only sessions with drift or '
        "refusals</label></p>"
        '<form id="search-all" action="/search" class="controls"><input name="q" type="search" required '
        'placeholder="search every session: words, e.g. 503 billing-api" autocomplete="off" maxlength="500" size="40"> '
        "<button>search</button></form>"
    )
    cols = [
        ("name", "session", "text"),
        ("events", "events", "num"),
        ("live_spans", "live spans", "num"),
        ("tokens", "live tokens", "num"),
        ("derived", "derived", "num"),
        ("max_generation", "max gen", "num"),
        ("refusals", "refusals", "num"),
        ("drift", "drift findings", "num"),
        ("last", "last activity", "text"),
    ]
    th = "".join(f'<th data-key="{k}" data-type="{t}" tabindex="0">{label}</th>' for k, label, t in cols)
    body = []
    for r in rows:
        drift = r["drift"] if r["drift"] is not None else r["violations"]
        bad = r.get("unreadable", "")
        flagged = bool(drift or r["refusals"] or r["max_generation"] > 1 or bad)
        v = {k: ("" if r[k] is None else r[k]) for k in ("live_spans", "tokens", "derived")}
        kinds = ", ".join(r["findings"])
        body.append(
            f'<tr class="{"flagged" if flagged else ""}" data-flagged="{int(flagged)}" '
            f'data-search="{esc((r["name"] + " " + kinds).casefold())}">'
            f'<td data-v="{esc(r["name"])}"><a href="{esc(url("s", r["name"]))}">{esc(r["name"])}</a>'
            f'{"" if r["strict"] else " <span class=tag>permissive</span>"}'
            f'{f" <span class=unreadable title={chr(34)}{esc(bad)}{chr(34)}>unreadable: {esc(bad)}</span>" if bad else ""}</td>'
            f'<td data-v="{r["events"]}">{_num(r["events"])}</td>'
            f'<td data-v="{v["live_spans"]}">{_num(r["live_spans"])}</td>'
            f'<td data-v="{v["tokens"]}">{_num(r["tokens"])}</td>'
            f'<td data-v="{v["derived"]}">{_num(r["derived"])}</td>'
            f'<td data-v="{r["max_generation"]}" class="{"bad" if r["max_generation"] > 1 else ""}">{r["max_generation"]}</td>'
            f'<td data-v="{r["refusals"]}">{_num(r["refusals"])}</td>'
            f'<td data-v="{drift}" class="{"bad" if drift else ""}">{_num(drift)}'
            f'{f" <small>{esc(kinds)}</small>" if kinds else ""}</td>'
            f'<td data-v="{esc(r["last"])}">{esc(r["last"])}</td></tr>'
        )
    if not rows:
        body.append('<tr><td colspan="9" class="none">No sessions in this store yet: try <code>ctxledger demo</code>.</td></tr>')
    table = f'<table id="sessions"><thead><tr>{th}</tr></thead><tbody>{"".join(body)}</tbody></table>'
    if rows:  # the first two sessions side by side; the compare page's form picks any others
        pair = url("compare", a=rows[0]["name"], b=rows[min(1, len(rows) - 1)]["name"])
        controls = controls.replace("</p>", f' · <a id="compare-sessions" href="{esc(pair)}">compare two sessions</a></p>', 1)
    return page("ctxledger sessions", head + controls + table, page_id="sessions")


# -- the session page ------------------------------------------------------------------------------


def session_page(name: str, at: int, head: int, state_html: str, marks: dict[str, int]) -> str:
    marks_html = "".join(
        f'<option value="{p}">{esc(label)} (position {p:,})</option>' for label, p in sorted(marks.items(), key=lambda m: m[1])
    )
    body = f"""
<header class="bar"><a href="/" class="home">ctxledger</a> <h1>{esc(name)}</h1>
<span class="meta">{head:,} events · ←/→ one event · Shift+←/→ previous/next compaction · Home/End</span></header>
<section id="integrity" class="box integrity" hidden role="alert"></section>
<section id="scrubber" aria-label="position in the log">
  <div class="row">
    <button id="first" title="first event (Home)">|◀</button>
    <button id="prev-c" title="previous compaction (Shift+←)">◀◀</button>
    <button id="prev" title="previous event (←)">◀</button>
    <input id="slider" type="range" min="1" max="{head}" value="{at}" aria-label="position">
    <button id="next" title="next event (→)">▶</button>
    <button id="next-c" title="next compaction (Shift+→)">▶▶</button>
    <button id="last" title="the head (End)">▶|</button>
    <label>position <input id="pos" type="number" min="1" max="{head}" value="{at}"></label>
    {f'<select id="marks" aria-label="jump to a mark"><option value="">marks…</option>{marks_html}</select>' if marks else ''}
  </div>
  <figure id="curve" aria-label="live tokens over the log"><div class="loading">drawing the live-token curve…</div></figure>
  <p class="legend"><span class="sw obs"></span>observed tokens <span class="sw der"></span>derived tokens
  <span class="mk Pruned"></span>prune <span class="mk Rewritten"></span>rewrite <span class="mk Rederived"></span>re-derive
  <span class="mk RewriteRefused"></span>refused <span class="mk Restored"></span>restore/expand · click a marker or the curve to jump</p>
</section>
<div class="cols">
  <main>
    <nav class="tabs" role="tablist" aria-label="view">
      <button id="tab-buffer" role="tab" aria-selected="true" data-view="buffer" title="the live buffer at this position (b)">Buffer</button>
      <button id="tab-conversation" role="tab" aria-selected="false" data-view="conversation"
        title="the log as a chat, up to this position (c)">Conversation</button>
      <label class="follow" title="poll the session and follow its head while it is being written (f)"><input id="follow" type="checkbox"> follow live</label>
      <a id="compare-link" href="{esc(url("compare", a=name, at_a=at, b=name, at_b=max(1, at - 1)))}">compare…</a>
    </nav>
    <div id="state" aria-live="polite">{state_html}</div>
    <div id="conversation" hidden></div>
  </main>
  <aside>
    <section class="box"><h2>Search the log</h2>
      <form id="search-form" action="{esc(url("s", name, "search"))}"><input name="q" id="search-q" type="search" required
        placeholder="words, e.g. 503 billing-api" autocomplete="off"> <button>search</button><br>
        <select name="role" id="search-role" aria-label="role"><option value="">any role</option><option>user</option>
        <option>assistant</option><option>tool</option><option>system</option></select>
        <select name="kind" id="search-kind" aria-label="kind"><option value="">any kind</option><option>message</option>
        <option>tool_call</option><option>tool_result</option><option>summary</option></select>
        <select name="provenance" id="search-provenance" aria-label="provenance"><option value="">observed or derived</option>
        <option>observed</option><option>derived</option></select>
        <label><input type="checkbox" name="findings" value="1" id="search-findings"> with findings only</label></form>
      <div id="search-results"></div></section>
    <section id="panel" class="box"><h2>Span</h2><p class="meta">Click a span to see where it came from.</p></section>
    <section class="box"><h2>Blame</h2>
      <form id="blame-form" action="{esc(url("s", name, "blame"))}"><input name="q" id="blame-q" type="search" required
        placeholder="text to trace, e.g. completed at 10:39" autocomplete="off"> <button>blame</button></form>
      <div id="blame-results"></div></section>
    <section class="box"><h2>Diff</h2>
      <form id="diff-form" action="{esc(url("s", name, "diff"))}">from <input name="a" id="diff-a" type="number" min="1"
        max="{head}" value="{max(1, at - 1)}"> to <input name="b" id="diff-b" type="number" min="1" max="{head}" value="{at}">
        <button>diff</button></form>
      <div id="diff-results"></div></section>
  </aside>
</div>"""
    return page(f"{name} at {at} · ctxledger", body, page_id="session",
                data={"session": name, "at": at, "head": head, "base": url("s", name)})


def _badge(span: dict[str, Any]) -> str:
    g = span["generation"]
    cls = "g0" if g == 0 else ("g1" if g == 1 else "gbad")
    return f'<span class="badge {cls}" title="generation {g}">{esc(span["provenance"])} · g{g}</span>'


def state_fragment(view: dict[str, Any]) -> str:
    """The part of the session page that changes with the position: the event that produced it
    and the live buffer. ``view`` is ``data.buffer_json``'s dict."""
    ev = view["event"]
    touched = ev.get("span_id", "")
    spans = view["spans"]
    derived = sum(1 for s in spans if s["provenance"] == "derived")
    who = f' by <b>{esc(ev["by"])}</b>' if ev["by"] else ""
    why = f' — “{esc(ev["reason"])}”' if ev["reason"] else ""
    text = f'<pre class="evtext">{esc_text(ev["text"])}</pre>' if ev.get("text") else ""
    findings = "".join(f"<li>{esc(f)}</li>" for f in ev.get("findings", []))
    out = [
        f'<div id="state-data" data-at="{view["position"]}" data-head="{view["head"]}" data-tokens="{view["tokens"]}" '
        f'data-spans="{len(spans)}" hidden></div>',
        f'<section class="box event {esc(ev["type"])}" id="event"><h2>Position {view["position"]:,} of {view["head"]:,}: '
        f'<span class="etype">{esc(ev["type"])}</span></h2>'
        f'<p>{esc(ev["what"])}{who}{why} <span class="meta" title="recorded {esc(ev["at"])}">{esc(ev.get("time") or ev["at"])}'
        f'{" (transcript time)" if ev.get("time_source") == "original" else ""}</span></p>{text}'
        f'{f"<ul class=findings>{findings}</ul>" if findings else ""}</section>',
        f'<h2 class="bufhead">Live buffer: {len(spans):,} spans, {view["tokens"]:,} tokens '
        f'<small>({derived} derived)</small></h2>',
        '<ol id="buffer">',
    ]
    for s in spans:
        text = s["text"]
        more = len(text) - PREVIEW_CHARS
        preview = (tool_call(s) if s["kind"] == "tool_call" else None) or (
            esc_text(text[:PREVIEW_CHARS]) + (f'<span class="more">… {more:,} more characters</span>' if more > 0 else ""))
        sources = f' <span class="src">← {source_list(s["sources"])}</span>' if s["sources"] else ""
        cls = f'span {s["provenance"]}{" touched" if s["id"] == touched else ""}'
        out.append(
            f'<li class="{cls}" id="{esc(s["id"])}" data-id="{esc(s["id"])}" tabindex="0">'
            f'<div class="sh"><b class="sid">{esc(s["id"])}</b> {_badge(s)} <span class="rk">{esc(s["role"])}/{esc(s["kind"])}</span> '
            f'<span class="tok">{s["tokens"]:,} tok</span>{sources}</div>'
            f'<pre class="text">{preview}</pre></li>'
        )
    if not spans:
        out.append('<li class="none">The buffer is empty at this position.</li>')
    out.append("</ol>")
    return "\n".join(out)


def tool_call(span: dict[str, Any]) -> str | None:
    """A tool call shown as its name and its arguments, each string argument as the text it is
    (not JSON with its quotes and ``\\n`` escaped once more); None when the call's arguments are
    not in its meta."""
    meta = span.get("meta") or {}
    args = meta.get("arguments")
    name = meta.get("name")
    if not isinstance(name, str) or not isinstance(args, dict):
        return None
    rows = []
    for k, v in list(args.items())[:20]:
        value = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, indent=None, default=str)
        more = len(value) - PREVIEW_CHARS
        shown = esc_text(value[:PREVIEW_CHARS]) + (f'<span class="more">… {more:,} more characters</span>' if more > 0 else "")
        rows.append(f'<span class="arg"><span class="k">{esc_text(k)}</span> {shown}</span>')
    return f'<span class="call">{esc_text(name)}</span>' + "".join(rows)  # each argument a block of its own


def _highlight(sentence: str, findings: list[dict[str, Any]]) -> str:
    """A sentence with each unsupported value marked (errors and warnings), everything escaped."""
    marks: list[tuple[int, int, dict[str, Any]]] = []
    for f in findings:
        value = f.get("value") or ""
        start = f.get("offset", -1)
        if not value or start < 0 or sentence[start : start + len(value)] != value:
            start = sentence.find(value) if value else -1
        if start < 0 or any(a < start + len(value) and start < b for a, b, _ in marks):
            continue
        marks.append((start, start + len(value), f))
    out, pos = [], 0
    for a, b, f in sorted(marks, key=lambda m: m[0]):
        out.append(esc(sentence[pos:a]))
        out.append(f'<mark class="{esc(f["severity"])}" title="{esc(f["message"])}">{esc(sentence[a:b])}</mark>')
        pos = b
    out.append(esc(sentence[pos:]))
    return "".join(out)


def source_list(ids: list[str], most: int | None = 8) -> str:
    """Span ids as a count and ranges (``408 sources: o1–o200, o202–o409``), escaped; with ``most``,
    at most that many ranges are written out."""
    if len(ids) <= 3:
        return esc(", ".join(ids))
    ranges = id_ranges(ids, sep="\x00").split("\x00")
    shown = ranges if most is None or len(ranges) <= most else ranges[:most] + ["…"]
    return f'<span class="count">{len(ids):,} sources:</span> {esc(", ".join(shown))}'


def _tree(node: dict[str, Any], depth: int = 0, limit: list[int] | None = None) -> str:
    limit = limit if limit is not None else [60]
    if limit[0] <= 0:
        return ""
    limit[0] -= 1
    by = f" by {esc(node['by'])}" if node["by"] else ""
    children = node["children"]
    if len(children) > 8 and all(not c["children"] for c in children):  # hundreds of leaves: one line of ranges
        kids = f'<li class="leaves">{source_list([c["id"] for c in children], most=None)}</li>'
    else:
        kids = "".join(_tree(c, depth + 1, limit) for c in children)
    return (
        f'<li><a href="#{esc(node["id"])}" data-span="{esc(node["id"])}" class="sref">{esc(node["id"])}</a> '
        f'<span class="meta">{esc(node["provenance"])}, g{node["generation"]}, position {node["position"]:,}{by}</span> '
        f'<span class="snip">{esc_text(node["text"])}</span>{f"<ul>{kids}</ul>" if kids else ""}</li>'
    )


def span_fragment(d: dict[str, Any]) -> str:
    """The span panel: ``data.span_detail``'s dict."""
    sid = d["id"]
    out = [f'<h2>Span <span id="panel-span">{esc(sid)}</span> <small>{"live" if d["live"] else "not live"} at position {d["at"]:,}</small></h2>']
    span = d.get("span")
    if span is not None:
        out.append(f'<p>{_badge(span)} {esc(span["role"])}/{esc(span["kind"])} · {span["tokens"]:,} tokens · '
                   f'put here at position {span["position"]:,}</p>')
        made = d.get("made_by")
        if made:
            who = f' by <b>{esc(made["by"])}</b>' if made["by"] else ""
            why = f', reason “{esc(made["reason"])}”' if made["reason"] else ""
            out.append(f'<p class="who">{esc(made["what"])}{who}{why} <span class="meta">{esc(made["at"])}</span></p>')
        if d.get("grounding") is not None:
            out.append(f'<section id="grounding-box" data-done="1">{grounding_fragment(d["grounding"])}</section>')
        elif d.get("grounding_deferred"):  # long sources: checked by a request of its own, swapped in by the script
            out.append(f'<section id="grounding-box" data-span="{esc(sid)}"><h3>Grounding, sentence by sentence</h3>'
                       '<p class="meta">checking the text against its originals…</p></section>')
        out.append(f'<h3>Text</h3><pre class="text full">{esc_text(span["text"])}</pre>')
    if d.get("originals"):
        originals = d["originals"]
        # a summary of hundreds of observations: their ids as ranges, the texts folded (the first 50)
        out.append(f'<h3>Original observations <small>{len(originals):,}, read back from the log</small></h3>'
                   f'<p class="ranges">{source_list([o["id"] for o in originals], most=None)}</p>'
                   f'<details class="originals"{" open" if len(originals) <= 3 else ""}><summary>their texts'
                   f'{f" (the first 50 of {len(originals):,})" if len(originals) > 50 else ""}</summary><ol class="originals">')
        for o in originals[:50]:
            out.append(f'<li><b>{esc(o["id"])}</b> <span class="meta">{esc(o["role"])}/{esc(o["kind"])}, position {o["position"]:,}, '
                       f'{o["tokens"]:,} tok</span><pre class="text">{esc_text(o["text"][:1200])}</pre></li>')
        out.append("</ol></details>")
    if sid.startswith("d"):  # projections.lost: a fold over every original, fetched after the panel
        out.append(f'<section id="lost-box" data-span="{esc(sid)}"><h3>What this compaction dropped</h3>'
                   '<p class="meta">reading the originals…</p></section>')
    lin = d.get("lineage")
    if lin:
        out.append(f'<section id="lineage-box" data-done="1">{lineage_fragment(lin)}</section>')
    else:  # a fold over the log up to this position: the script fetches it after the panel is shown
        out.append(f'<section id="lineage-box" data-span="{esc(sid)}"><h3>Lineage</h3><p class="meta">reading the log…</p></section>')
    return "\n".join(out)


def grounding_fragment(grounding: list[dict[str, Any]]) -> str:
    """``data.grounding_sentences``: each sentence with its unsupported values marked."""
    bad = sum(1 for s in grounding for f in s["findings"] if f["severity"] == "error")
    out = [f'<h3>Grounding, sentence by sentence <small>{bad} unsupported</small></h3><ol class="grounding">']
    for s in grounding:
        cls = "ok" if not s["findings"] else ("bad" if any(f["severity"] == "error" for f in s["findings"]) else "warn")
        notes = "".join(f"<li>{esc(f['message'])}</li>" for f in s["findings"])
        out.append(f'<li class="{cls}"><span class="sent">{_highlight(s["text"], s["findings"])}</span>'
                   f'{f"<ul class=why>{notes}</ul>" if notes else ""}</li>')
    out.append("</ol>")
    return "".join(out)


def lost_fragment(d: dict[str, Any]) -> str:
    """``data.lost_json``: per category kept / total, and what was dropped (each with its span)."""
    _names = {"user_messages": "user messages", "instructions": "instructions", "paths": "paths",
              "commands": "commands", "errors": "errors", "numbers": "numbers", "ids": "ids"}
    rows = []
    for c in d["categories"]:
        if not c["total"]:
            continue
        dropped = "".join(
            f'<li><a href="#{esc(x["span_id"])}" data-span="{esc(x["span_id"])}" class="sref">{esc(x["span_id"])}</a> '
            f'{esc_text(x["text"][:200])}</li>' for x in c["dropped"])
        more = f'<li class="meta">… {c["more"]:,} more</li>' if c["more"] else ""
        cls = "ok" if c["kept"] == c["total"] else ("bad" if c["name"] in ("instructions", "user_messages", "errors") else "warn")
        rows.append(f'<details class="lost {cls}"><summary>{esc(_names.get(c["name"], c["name"]))}: kept {c["kept"]:,} of '
                    f'{c["total"]:,}</summary><ul>{dropped}{more}</ul></details>')
    body = "".join(rows) or '<p class="meta">its originals hold nothing of these kinds</p>'
    return (f'<h3>What this compaction dropped <small>{d["sources"]:,} original'
            f'{"s" if d["sources"] != 1 else ""}, projections.lost</small></h3>{body}')


def lineage_fragment(lin: dict[str, Any]) -> str:
    """A span's lineage (``data.lineage_json``): the tree it came from and what became of it."""
    out = [f'<h3>Lineage <small>{esc(lin["status"])}</small></h3><ul class="tree">{_tree(lin["came_from"])}</ul>']
    if lin["became"]:
        out.append('<h4>What became of it</h4><ul class="became">')
        for b in lin["became"][-20:]:
            by = f" by {esc(b['by'])}" if b["by"] else ""
            out.append(f'<li><a href="?at={b["position"]}" data-at="{b["position"]}" class="pref">@{b["position"]:,}</a> '
                       f'{esc(b["action"])}{by}</li>')
        out.append("</ul>")
    return "\n".join(out)


def blame_fragment(query: str, hits: list[Any]) -> str:
    if not hits:
        return f'<p class="none" id="blame-none">No span holds or held “{esc(query)}” up to this position.</p>'
    out = [f'<ol class="hits" data-count="{len(hits)}">']
    for h in hits[:30]:
        state = "live" if h.live else "gone"
        mark = '<span class="ok">grounded</span>' if h.grounded else '<span class="bad">NOT GROUNDED</span>'
        out.append(
            f'<li class="{state}"><a href="#{esc(h.span_id)}" data-span="{esc(h.span_id)}" class="sref">{esc(h.span_id)}</a> '
            f'{state} · {esc(h.event_type)} at <a href="?at={h.position}" data-at="{h.position}" class="pref">{h.position:,}</a>'
            f'{f" by {esc(h.by)}" if h.by else ""} · {mark}<br><span class="msg">{esc(h.message)}</span>'
            f'<pre class="text">{esc_text(h.text)}</pre></li>'
        )
    out.append("</ol>")
    return "\n".join(out)


def diff_fragment(d: Any) -> str:
    out = [f'<p class="stat">{esc(d.stat())}</p><div class="diff-wrap"><table class="diff"><tbody>']
    sign = {"added": "+", "removed": "−", "rewritten": "→", "rederived": "↻", "changed": "~"}
    for e in d.entries[:200]:
        why = f'<a href="?at={e.position}" data-at="{e.position}" class="pref">@{e.position:,}</a> {esc(e.event_type)}' if e.position else ""
        into = f" into {esc(e.into)}" if e.into else ""
        out.append(
            f'<tr class="{esc(e.change)}"><td>{sign.get(e.change, "?")}</td>'
            f'<td><a href="#{esc(e.span_id)}" data-span="{esc(e.span_id)}" class="sref">{esc(e.span_id)}</a></td>'
            f'<td>{esc(e.change)}{into}</td><td class="num">{e.tokens:+,}</td><td>{why}</td>'
            f'<td class="snip">{esc_text(e.text)}</td></tr>'
        )
    out.append("</tbody></table></div>")
    if len(d.entries) > 200:
        out.append(f'<p class="meta">{len(d.entries) - 200:,} more changes: <code>ctxledger diff {esc(d.session)} {d.a} {d.b}</code></p>')
    return "\n".join(out)


def error_page(status: int, message: str) -> str:
    body = (f'<header class="bar"><a href="/" class="home">ctxledger</a></header>'
            f'<section class="box error"><h1>{status}</h1><p id="error-message">{esc(message)}</p>'
            '<p><a href="/">all sessions</a></p></section>')
    return page(f"{status} · ctxledger", body, page_id="error")
