"""A self-contained HTML report of one session, or up to four side by side.

``build_report([reader, ...])`` reads everything through the read side — ``timeline()``,
``audit()``, ``blame()``, ``lineage()`` — and returns one HTML document with inline CSS, an inline
script and the data as inline JSON: no network, no external library. The script draws each chart as
SVG (live tokens by provenance over the log, with markers for prunes, rewrites, re-derivations and
refusals) and then sets ``data-rendered="ok"`` on ``<html>`` (``"error"`` and a visible message if
anything failed), so a headless browser can tell that the page really rendered.

Text from the log (span texts, findings) is escaped on the way in; the JSON is embedded with every
``<`` escaped, so no log content can close the script element.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import msgspec

from engine.text_clip import clip
from engine.escaping import esc, visible
from engine.spans import ordinal
from projections.lineage import lineage

if TYPE_CHECKING:
    from engine.reading import LogReader

__all__ = ["build_report", "collect", "esc", "MAX_POINTS", "MAX_FINDINGS"]

MAX_POINTS = 3000  # area samples per chart; markers are kept separately
MAX_MARKERS = 4000
MAX_FINDINGS = 40  # findings shown with blame and lineage (errors first); the rest are counted
MARKER_TYPES = ("Pruned", "Rewritten", "Rederived", "RewriteRefused", "Restored", "Expanded")

_enc = msgspec.json.Encoder(enc_hook=str)


# Session text is hostile until escaped: ``esc`` (engine.escaping) shows markup, quotes, bidi
# controls and invisible characters as what they are, never obeyed.



def _count(n: int, word: str) -> str:
    """``1 error``, ``2 errors``."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"



def _ranges(ids: list[str]) -> str:
    """o3, o4, o5, o9 -> o3–o5, o9"""
    nums = sorted(ordinal(i) for i in ids if i[:1] == "o" and i[1:].isdigit())
    out: list[str] = []
    start = prev = None
    for n in nums:
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            out.append(f"o{start}" if start == prev else f"o{start}–o{prev}")
            start = prev = n
    if start is not None:
        out.append(f"o{start}" if start == prev else f"o{start}–o{prev}")
    return ", ".join(out)


def _lineage_lines(node: Any, limit: int = 14) -> list[str]:
    """A came-from tree as lines: each derived span with its derived inputs and its observations."""
    lines: list[str] = []

    def walk(n: Any) -> None:
        if len(lines) >= limit:
            return
        derived = [c for c in n.children if c.provenance == "derived"]
        observed = [c.span_id for c in n.children if c.provenance == "observed"]
        parts = [c.span_id for c in derived]
        if observed:
            parts.append(f"{len(observed)} observation{'s' if len(observed) != 1 else ''} ({clip(_ranges(observed), 60)})")
        by = f" by {n.by}" if n.by else ""
        lines.append(f"{n.span_id} (generation {n.generation}, position {n.position}{by}) ← {', '.join(parts) or 'nothing recorded'}")
        for c in derived:
            walk(c)

    if node.provenance == "observed":
        return [f"{node.span_id}: observed at position {node.position}"]
    walk(node)
    return lines


class _EventMemo:
    """The reader, with each event read once however many lineages ask for it: the report draws the
    lineage of every finding's summary, and the summaries of one session share their history
    (events never change, so a kept one is the one the log holds)."""

    def __init__(self, reader: LogReader):
        self._reader = reader
        self._events: dict[int, Any] = {}

    BLOCK = 512  # a lineage reads a summary's sources, mostly one run of the log: read in blocks

    def event(self, position: int) -> Any:
        ev = self._events.get(position)
        if ev is None:
            last = min(self._reader.position, position + self.BLOCK - 1)
            if 1 <= position <= last:
                for e in self._reader.events(position, last):
                    self._events.setdefault(e.originator_version, e)
            ev = self._events.get(position)
            if ev is None:  # out of range: the reader says why
                ev = self._events[position] = self._reader.event(position)
        return ev

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


def collect(reader: LogReader) -> dict[str, Any]:
    """Everything the report shows about one session (at the reader's position), as plain data."""
    tl = reader.timeline()
    points = tl.points
    step = max(1, len(points) // MAX_POINTS)
    area = [[p.position, p.observed_tokens, p.derived_tokens] for i, p in enumerate(points) if i % step == 0 or i == len(points) - 1]
    markers = [[p.position, p.event_type, p.span_id] for p in points if p.event_type in MARKER_TYPES]
    if len(markers) > MAX_MARKERS:
        keep = max(1, len(markers) // MAX_MARKERS)
        important = [m for m in markers if m[1] != "Pruned"]
        markers = important[:MAX_MARKERS] + [m for i, m in enumerate(markers) if m[1] == "Pruned" and i % keep == 0]
    counts: dict[str, int] = {}
    for p in points:
        counts[p.event_type] = counts.get(p.event_type, 0) + 1
    state = reader.state
    live = list(state.live.values())
    report = reader.audit()
    findings = []
    shown = [f for f in report.findings if f.severity in ("error", "warning")][:MAX_FINDINGS]
    lineage_cache: dict[str, list[str]] = {}
    memo = _EventMemo(reader)
    blame_cache: dict[str, list[dict[str, Any]]] = {}
    for f in shown:
        item: dict[str, Any] = {
            "kind": f.kind,
            "severity": f.severity,
            "message": f.message,
            "value": f.value,
            "span_ids": list(f.span_ids),
            "positions": list(f.positions),
            "blame": [],
            "lineage": [],
        }
        if f.value and len(f.value) <= 200:
            if f.value not in blame_cache:
                try:
                    hits = reader.blame(f.value)
                except Exception as e:  # blame refuses some inputs; the report says so and goes on
                    blame_cache[f.value] = [{"span_id": "", "message": f"blame failed: {e}"}]
                else:
                    blame_cache[f.value] = [
                        {
                            "span_id": h.span_id,
                            "live": h.live,
                            "position": h.position,
                            "origin_position": h.origin_position,
                            "origin_kind": h.origin_kind,
                            "grounded": h.grounded,
                            "message": h.message,
                        }
                        for h in hits[:4]
                    ]
            item["blame"] = blame_cache[f.value]
        span_id = next((s for s in f.span_ids if s[:1] == "d"), f.span_ids[0] if f.span_ids else "")
        if span_id:
            if span_id not in lineage_cache:
                try:
                    lin = lineage(memo, span_id)
                    lines = _lineage_lines(lin.came_from)
                    lines += [f"@{b.position} {b.action}" + (f" by {b.by}" if b.by else "") for b in lin.became[-6:]]
                    lineage_cache[span_id] = lines
                except Exception as e:
                    lineage_cache[span_id] = [f"lineage failed: {e}"]
            item["lineage_of"] = span_id
            item["lineage"] = lineage_cache[span_id]
        findings.append(item)
    return {
        "name": reader.name,
        "position": reader.position,
        "strict": reader.strict,
        "live_spans": len(live),
        "live_tokens": reader.tokens,
        "derived_spans": sum(1 for s in live if s.derived),
        "derived_tokens": sum(s.tokens for s in live if s.derived),
        "max_generation": max((s.generation for s in live), default=0),
        "violations": state.violations,
        "refusals": state.refusals,
        "counts": counts,
        "model_edits": _model_edits(reader),
        # mark labels are drawn by the script as chart text: bidi controls shown there too, never obeyed
        "marks": sorted(([visible(label), pos] for label, pos in reader.marks().items() if pos <= reader.position), key=lambda m: m[1]),
        "area": area,
        "markers": markers,
        "audit": {
            "ok": report.ok,
            "errors": report.errors,
            "warnings": report.warnings,
            "infos": report.infos,
            "derived_checked": report.derived_checked,
            "chain_ok": report.chain_ok,
            "hidden": max(0, report.errors + report.warnings - len(shown)),
        },
        "findings": findings,
    }


def _model_edits(reader: Any) -> int:
    """Edits (and refused rewrites) made by a model through its context tools: ``by`` names a model.
    Only those events are read (by topic, where the store can), not the whole log again."""
    from engine.events import Expanded, Pruned, Rederived, Restored, RewriteRefused, Rewritten

    kinds = (Pruned, Rewritten, Rederived, RewriteRefused, Restored, Expanded)
    store = getattr(reader, "_store", None)
    unsaved = getattr(reader, "_unsaved", None)
    if store is not None and unsaved is not None and not unsaved()[1]:
        events = store.events_of_types(reader.id, kinds, reader.position)
    else:
        events = [ev for ev in reader.events() if type(ev) in kinds]
    return sum(1 for ev in events if ev.by.startswith("model:"))


def build_report(readers: list[LogReader], *, title: str | None = None) -> str:
    """The HTML document for one session, or up to four side by side."""
    data = [collect(r) for r in readers]
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    title = title or ("ctxledger report: " + " vs ".join(d["name"] for d in data))
    payload = _enc.encode({"sessions": data, "generated": generated}).decode().replace("<", "\\u003c")
    body = [
        f"<header><h1>{esc(title)}</h1>",
        f"<p class=meta>generated {esc(generated)} · every number below is read back from the event log "
        "(timeline, audit, blame, lineage); nothing here needs a network connection</p></header>",
    ]
    if len(data) >= 2:
        body.append(_comparison(data))
    body.append(f'<main class="cols cols-{len(data)}">')
    for i, d in enumerate(data):
        body.append(_section(d, i))
    body.append("</main>")
    return _PAGE.format(
        title=esc(title),
        css=_CSS,
        body="\n".join(body),
        data=payload,
        script=_SCRIPT,
    )


def _comparison(data: list[dict[str, Any]]) -> str:
    """The side-by-side table: one column per session (two to four)."""
    rows = [
        ("events in the log", "position"),
        ("live spans", "live_spans"),
        ("live tokens", "live_tokens"),
        ("derived spans live", "derived_spans"),
        ("derived tokens live", "derived_tokens"),
        ("max generation live", "max_generation"),
        ("summary-of-summary violations", "violations"),
        ("rewrites refused", "refusals"),
    ]
    cells = []
    for label, key in rows:
        cells.append(f"<tr><th>{label}</th>" + "".join(f"<td>{d[key]:,}</td>" for d in data) + "</tr>")
    for label, key in (("rewrites", "Rewritten"), ("re-derivations", "Rederived"), ("prunes", "Pruned")):
        cells.append(f"<tr><th>{label}</th>" + "".join(f"<td>{d['counts'].get(key, 0):,}</td>" for d in data) + "</tr>")
    if any(d.get("model_edits") for d in data):
        cells.append(
            "<tr><th>edits by the model itself (context tools)</th>"
            + "".join(f"<td>{d.get('model_edits', 0):,}</td>" for d in data)
            + "</tr>"
        )

    def verdict(d: dict[str, Any]) -> str:
        au = d["audit"]
        cls = "ok" if au["ok"] else "bad"
        word = "ok" if au["ok"] else "drift"
        return f'<span class="{cls}">{word}</span> ({_count(au["errors"], "error")}, {_count(au["warnings"], "warning")})'

    cells.append("<tr><th>audit</th>" + "".join(f"<td>{verdict(d)}</td>" for d in data) + "</tr>")
    names = "".join(f"<th>{esc(d['name'])}</th>" for d in data)
    return (
        '<section class="compare"><h2>Side by side</h2><table id="comparison">'
        f"<thead><tr><th></th>{names}</tr></thead>"
        f"<tbody>{''.join(cells)}</tbody></table></section>"
    )


def _section(d: dict[str, Any], i: int) -> str:
    au = d["audit"]
    mode = "strict" if d["strict"] else "permissive (violations recorded, not refused)"
    status = "ok" if au["ok"] else "drift"
    out = [
        f'<section class="session" id="session-{i}">',
        f'<h2>{esc(d["name"])} <span class="badge {"ok" if au["ok"] else "bad"}">audit: {status}</span></h2>',
        f'<p class=meta>{mode} · {d["position"]:,} events · {d["live_spans"]:,} live spans · '
        f'{d["live_tokens"]:,} live tokens ({d["derived_tokens"]:,} derived) · max generation {d["max_generation"]}</p>',
        f'<figure><div class="chart" data-index="{i}" role="img" '
        f'aria-label="live tokens by provenance over the log of {esc(d["name"])}"></div>',
        '<figcaption class="legend"><span class="sw obs"></span>observed tokens <span class="sw der"></span>derived tokens '
        '<span class="mk prune"></span>prune <span class="mk rewrite"></span>rewrite '
        '<span class="mk rederive"></span>re-derive <span class="mk refused"></span>refused '
        '<span class="mk other"></span>restore/expand</figcaption></figure>',
        f'<h3>Audit findings <small>{_count(au["errors"], "error")} · {_count(au["warnings"], "warning")} · '
        f'{_count(au["infos"], "note")} · {_count(au["derived_checked"], "derived span")} checked · hash chain {"ok" if au["chain_ok"] else "BROKEN"}</small></h3>',
    ]
    if not d["findings"]:
        out.append('<p class="none">No errors or warnings: every live summary is grounded in its original observations.</p>')
    out.append('<ol class="findings">')
    for f in d["findings"]:
        where = ", ".join(str(p) for p in f["positions"][:6])
        spans = ", ".join(f["span_ids"][:6])
        out.append(f'<li class="{f["severity"]}"><details><summary><b>{esc(f["kind"])}</b> '
                   f'<span class="sev">{f["severity"]}</span> {esc(clip(f["message"], 220))}</summary>')
        out.append(f'<p class=meta>spans {esc(spans) or "–"} · positions {esc(where) or "–"}'
                   + (f' · value <code>{esc(f["value"])}</code>' if f["value"] else "") + "</p>")
        if f["blame"]:
            out.append("<h4>blame</h4><ul>")
            for h in f["blame"]:
                mark = "grounded" if h.get("grounded") else "not grounded"
                out.append(f'<li><code>{esc(h.get("span_id", ""))}</code> <i>{mark}</i> — {esc(clip(h["message"], 300))}</li>')
            out.append("</ul>")
        if f["lineage"]:
            out.append(f'<h4>lineage of {esc(f.get("lineage_of", ""))}</h4><pre>')
            out.append(esc("\n".join(f["lineage"])))
            out.append("</pre>")
        out.append("</details></li>")
    out.append("</ol>")
    if au["hidden"]:
        out.append(f'<p class=meta>{au["hidden"]} more findings: <code>ctxledger audit {esc(d["name"])}</code></p>')
    out.append("</section>")
    return "\n".join(out)


_PAGE = """<!doctype html>
<html lang="en" data-rendered="pending">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
{body}
<pre id="js-error" hidden></pre>
<script type="application/json" id="report-data">{data}</script>
<script>{script}</script>
</body>
</html>
"""

_CSS = """
:root { --obs: #4c78a8; --der: #f58518; --prune: #9d9d9d; --rewrite: #e45756; --rederive: #54a24b;
  --refused: #b279a2; --other: #72b7b2; --ink: #1d1d1f; --muted: #6e6e73; --line: #e3e3e8; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); margin: 0; padding: 24px; background: #fafafa; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 0 0 4px; } h3 { font-size: 15px; margin: 18px 0 6px; }
h3 small { font-weight: normal; color: var(--muted); } h4 { margin: 10px 0 4px; font-size: 13px; }
.meta { color: var(--muted); margin: 2px 0 10px; }
.cols { display: grid; gap: 20px; } .cols-2, .cols-3, .cols-4 { grid-template-columns: 1fr 1fr; }
@media (max-width: 1100px) { .cols-2, .cols-3, .cols-4 { grid-template-columns: 1fr; } }
section.session, section.compare { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 16px; margin-bottom: 20px; min-width: 0; }
.badge { font-size: 12px; padding: 2px 8px; border-radius: 10px; vertical-align: middle; }
.badge.ok, .ok { color: #1b7f3b; } .badge.ok { background: #e3f5e8; } .badge.bad { background: #fde7e7; } .bad { color: #b3261e; }
figure { margin: 0; } .chart svg { width: 100%; height: auto; display: block; }
.legend { color: var(--muted); font-size: 12px; margin-top: 4px; }
.sw, .mk { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 10px; vertical-align: -1px; }
.sw.obs { background: var(--obs); } .sw.der { background: var(--der); }
.mk { width: 3px; height: 12px; } .mk.prune { background: var(--prune); } .mk.rewrite { background: var(--rewrite); }
.mk.rederive { background: var(--rederive); } .mk.refused { background: var(--refused); } .mk.other { background: var(--other); }
table { border-collapse: collapse; } #comparison th, #comparison td { padding: 4px 12px; border-bottom: 1px solid var(--line); text-align: right; }
#comparison th:first-child { text-align: left; font-weight: normal; color: var(--muted); }
ol.findings { padding-left: 22px; } ol.findings li { margin: 4px 0; }
li.error > details > summary .sev { color: #b3261e; } li.warning > details > summary .sev { color: #a15c00; }
summary { cursor: pointer; } .sev { font-size: 12px; text-transform: uppercase; margin: 0 4px; }
pre { background: #f4f4f6; padding: 8px; overflow-x: auto; font-size: 12px; }
code { font-size: 12px; background: #f4f4f6; padding: 0 3px; }
#js-error { color: #b3261e; }
.none { color: #1b7f3b; }
svg text { font: 10px system-ui, sans-serif; fill: var(--muted); }
"""

_SCRIPT = r"""
(function () {
  "use strict";
  var root = document.documentElement;
  function fail(msg) {
    root.setAttribute("data-rendered", "error");
    var el = document.getElementById("js-error");
    el.hidden = false;
    el.textContent = "The chart could not be drawn: " + msg;
  }
  window.addEventListener("error", function (e) { fail(e.message || String(e)); });
  var NS = "http://www.w3.org/2000/svg";
  var COLORS = { Pruned: "--prune", Rewritten: "--rewrite", Rederived: "--rederive", RewriteRefused: "--refused",
                 Restored: "--other", Expanded: "--other" };
  var LANES = { Pruned: 0, Rewritten: 1, Rederived: 2, RewriteRefused: 3, Restored: 4, Expanded: 4 };
  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function css(v) { return getComputedStyle(root).getPropertyValue(v).trim(); }
  function fmt(n) { return n >= 1000 ? Math.round(n / 1000) + "k" : String(n); }
  function draw(box, s, ymax, dmax) {
    var W = 760, H = 348, L = 64, R = 12, T = 10, plotH = 190, gap = 18, dH = 50, lane = 11;
    var area = s.area;
    if (!area.length) { box.textContent = "empty log"; return 0; }
    var xmax = Math.max(2, s.position);
    var svg = el("svg", { viewBox: "0 0 " + W + " " + H, "data-points": area.length, "data-markers": s.markers.length });
    function X(p) { return L + (W - L - R) * (p - 1) / (xmax - 1); }
    function Y(v) { return T + plotH - plotH * v / ymax; }
    var dTop = T + plotH + gap;
    function DY(v) { return dTop + dH - dH * v / dmax; }
    // grid and y axis
    for (var i = 0; i <= 4; i++) {
      var v = ymax * i / 4, y = Y(v);
      el("line", { x1: L, x2: W - R, y1: y, y2: y, stroke: "#e3e3e8" }, svg);
      el("text", { x: L - 6, y: y + 4, "text-anchor": "end" }, svg).textContent = fmt(Math.round(v));
    }
    el("text", { x: L + 4, y: T + 11 }, svg).textContent = "live tokens (observed + derived)";
    // cycle marks
    var marks = s.marks, every = Math.max(1, Math.ceil(marks.length / 10));
    marks.forEach(function (m, j) {
      var x = X(m[1]);
      el("line", { x1: x, x2: x, y1: T, y2: dTop + dH, stroke: "#f0f0f3" }, svg);
      if (j % every === 0) {
        var t = el("text", { x: x, y: T + plotH + 12, "text-anchor": "middle" }, svg);
        t.textContent = m[0].replace(/^cycle-/, "c");
      }
    });
    // stacked areas: observed below, derived on top
    var obs = "M" + X(area[0][0]) + "," + Y(0);
    area.forEach(function (p) { obs += " L" + X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1); });
    obs += " L" + X(area[area.length - 1][0]) + "," + Y(0) + " Z";
    var top = area.map(function (p) { return X(p[0]).toFixed(1) + "," + Y(p[1] + p[2]).toFixed(1); });
    var bottom = area.slice().reverse().map(function (p) { return X(p[0]).toFixed(1) + "," + Y(p[1]).toFixed(1); });
    el("path", { d: obs, fill: css("--obs"), "fill-opacity": "0.85", class: "area-observed" }, svg);
    el("path", { d: "M" + top.join(" L") + " L" + bottom.join(" L") + " Z", fill: css("--der"), "fill-opacity": "0.9",
                 class: "area-derived" }, svg);
    // derived tokens on their own scale (summaries are small next to the observations)
    el("line", { x1: L, x2: W - R, y1: DY(0), y2: DY(0), stroke: "#e3e3e8" }, svg);
    el("text", { x: L - 6, y: DY(dmax) + 8, "text-anchor": "end" }, svg).textContent = fmt(dmax);
    el("text", { x: L - 6, y: DY(0), "text-anchor": "end" }, svg).textContent = "0";
    el("text", { x: L + 4, y: dTop + 9 }, svg).textContent = "derived tokens (own scale)";
    var d = "M" + X(area[0][0]).toFixed(1) + "," + DY(0);
    area.forEach(function (p) { d += " L" + X(p[0]).toFixed(1) + "," + DY(p[2]).toFixed(1); });
    d += " L" + X(area[area.length - 1][0]).toFixed(1) + "," + DY(0) + " Z";
    el("path", { d: d, fill: css("--der"), "fill-opacity": "0.6", stroke: css("--der"), class: "area-derived-own" }, svg);
    // markers in lanes under the plots
    var base = dTop + dH + 10;
    s.markers.forEach(function (m) {
      var ln = LANES[m[1]], x = X(m[0]);
      var r = el("rect", { x: x - 1, y: base + ln * lane, width: 2, height: lane - 2, fill: css(COLORS[m[1]]),
                           class: "marker marker-" + m[1] }, svg);
      el("title", {}, r).textContent = m[1] + " " + m[2] + " at position " + m[0];
    });
    ["prune", "rewrite", "re-derive", "refused", "restore"].forEach(function (name, k) {
      el("text", { x: L - 6, y: base + k * lane + lane - 3, "text-anchor": "end" }, svg).textContent = name;
    });
    el("line", { x1: L, x2: L, y1: T, y2: T + plotH, stroke: "#999" }, svg);
    el("text", { x: W - R, y: H - 2, "text-anchor": "end" }, svg).textContent = "position in the log (" + s.position + " events)";
    box.appendChild(svg);
    return area.length;
  }
  try {
    var data = JSON.parse(document.getElementById("report-data").textContent);
    var ymax = 1;
    data.sessions.forEach(function (s) { s.area.forEach(function (p) { ymax = Math.max(ymax, p[1] + p[2]); }); });
    ymax = Math.ceil(ymax * 1.05 / 1000) * 1000;
    var dmax = 1;
    data.sessions.forEach(function (s) { s.area.forEach(function (p) { dmax = Math.max(dmax, p[2]); }); });
    dmax = dmax > 1000 ? Math.ceil(dmax * 1.1 / 500) * 500 : Math.ceil(dmax * 1.1 / 50) * 50 || 50;
    var drawn = 0;
    document.querySelectorAll(".chart").forEach(function (box) {
      drawn += draw(box, data.sessions[Number(box.getAttribute("data-index"))], ymax, dmax) > 0 ? 1 : 0;
    });
    root.setAttribute("data-charts", String(drawn));
    if (root.getAttribute("data-rendered") === "pending") root.setAttribute("data-rendered", "ok");
  } catch (e) {
    fail(e && e.message ? e.message : String(e));
  }
})();
"""
