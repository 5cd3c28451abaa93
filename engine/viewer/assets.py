"""The viewer's style sheet and script, served by the app itself (``/_static/viewer.css`` and
``/_static/viewer.js``): no build step, nothing fetched from anywhere else.

The script never inserts session text as markup: fragments come from the server already escaped
(``engine.viewer.pages``), and everything the script writes itself goes through ``textContent``.
"""

from __future__ import annotations

__all__ = ["CSS", "JS"]

CSS = """
:root { --obs: #4c78a8; --der: #f58518; --bad: #b3261e; --ok: #1b7f3b; --warn: #a15c00; --ink: #1d1d1f;
  --muted: #6e6e73; --line: #e3e3e8; --bg: #fafafa;
  --Pruned: #9d9d9d; --Rewritten: #e45756; --Rederived: #54a24b; --RewriteRefused: #b279a2; --Restored: #72b7b2; --Expanded: #72b7b2; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); margin: 0; padding: 12px 18px; background: var(--bg); }
a { color: #1f5fbf; }
h1 { font-size: 20px; margin: 0; display: inline; } h2 { font-size: 15px; margin: 0 0 6px; } h3 { font-size: 13px; margin: 12px 0 4px; }
h4 { font-size: 12px; margin: 8px 0 2px; } small, .meta { color: var(--muted); font-weight: normal; }
header.bar { display: flex; gap: 14px; align-items: baseline; margin-bottom: 8px; flex-wrap: wrap; }
.home { font-weight: 600; text-decoration: none; }
.box { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; margin-bottom: 10px; min-width: 0; }
#scrubber { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 8px 12px; margin-bottom: 10px; }
#scrubber .row { display: flex; gap: 6px; align-items: center; flex-wrap: wrap; }
#slider { flex: 1; min-width: 240px; } #pos { width: 8em; }
button { font: inherit; padding: 2px 8px; cursor: pointer; }
#curve { margin: 6px 0 0; height: 200px; position: relative; } #curve svg { width: 100%; height: 200px; display: block; cursor: crosshair; }
#curve .loading { color: var(--muted); padding: 60px 0; text-align: center; }
.legend { color: var(--muted); font-size: 12px; margin: 2px 0 0; }
.sw, .mk { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 10px; vertical-align: -1px; }
.sw.obs { background: var(--obs); } .sw.der { background: var(--der); } .mk { width: 3px; height: 12px; }
.mk.Pruned { background: var(--Pruned); } .mk.Rewritten { background: var(--Rewritten); } .mk.Rederived { background: var(--Rederived); }
.mk.RewriteRefused { background: var(--RewriteRefused); } .mk.Restored { background: var(--Restored); }
.cols { display: grid; grid-template-columns: minmax(0, 3fr) minmax(300px, 2fr); gap: 12px; align-items: start; }
@media (max-width: 1000px) { .cols { grid-template-columns: 1fr; } }
aside { position: sticky; top: 8px; max-height: calc(100vh - 16px); overflow-y: auto; }
#buffer { list-style: none; padding: 0; margin: 0; }
.span { background: #fff; border: 1px solid var(--line); border-left: 5px solid var(--obs); border-radius: 6px; padding: 4px 8px;
  margin-bottom: 5px; cursor: pointer; }
.span.derived { border-left-color: var(--der); background: #fffaf3; }
.span.touched { box-shadow: 0 0 0 2px #1f5fbf55; } .span.selected { box-shadow: 0 0 0 2px #1f5fbf; }
.span:focus { outline: 2px solid #1f5fbf; }
.sh { font-size: 12px; color: var(--muted); } .sid { color: var(--ink); }
.badge { font-size: 11px; padding: 0 6px; border-radius: 8px; }
.badge.g0 { background: #e4edf7; color: #2d5b8a; } .badge.g1 { background: #fdebd8; color: #8a4b09; }
.badge.gbad { background: #fde7e7; color: var(--bad); font-weight: 600; }
pre { white-space: pre-wrap; word-break: break-word; margin: 2px 0; font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
pre.text { max-height: 9.5em; overflow: hidden; } pre.text.full { max-height: none; overflow: visible; }
.more { color: var(--muted); }
.event h2 .etype { font-family: ui-monospace, monospace; } pre.evtext { max-height: 8em; overflow: auto; }
.event.RewriteRefused { border-color: var(--RewriteRefused); } .event.Rewritten { border-color: var(--Rewritten); }
.bufhead { margin-top: 4px; }
.tag { font-size: 11px; color: var(--warn); }
.bad { color: var(--bad); } .ok { color: var(--ok); } .warn { color: var(--warn); }
mark.error { background: #fbd0cc; color: var(--bad); font-weight: 600; } mark.warning { background: #ffe9b8; }
mark.info { background: #eee; }
ol.grounding li.bad { border-left: 3px solid var(--bad); padding-left: 6px; } ol.grounding li.warn { border-left: 3px solid var(--warn); padding-left: 6px; }
ol.grounding .why { color: var(--muted); font-size: 12px; }
ul.tree, ul.tree ul { padding-left: 16px; } .snip { color: var(--muted); font-size: 12px; }
table#sessions { border-collapse: collapse; background: #fff; width: 100%; }
table#sessions th, table#sessions td { padding: 5px 10px; border-bottom: 1px solid var(--line); text-align: right; }
table#sessions th:first-child, table#sessions td:first-child, table#sessions td:last-child, table#sessions th:last-child { text-align: left; }
table#sessions th { cursor: pointer; user-select: none; } table#sessions th.asc::after { content: " ▲"; } table#sessions th.desc::after { content: " ▼"; }
tr.flagged td:first-child { border-left: 3px solid var(--bad); }
.controls { margin: 8px 0; }
.diff-wrap { max-width: 100%; overflow-x: auto; }
table.diff { border-collapse: collapse; font-size: 12px; width: 100%; table-layout: fixed; }
table.diff td:nth-child(1) { width: 1.5em; } table.diff td:nth-child(2) { width: 3.5em; } table.diff td:nth-child(3) { width: 8em; }
table.diff td:nth-child(4) { width: 4.5em; } table.diff td:nth-child(5) { width: 7em; }
table.diff td { overflow-wrap: anywhere; } table.diff td.snip { white-space: normal; }
.count { font-weight: 600; } p.ranges { overflow-wrap: anywhere; font-size: 12px; }
details.originals > summary { cursor: pointer; color: var(--muted); }
.call { font-weight: 600; } .arg { display: block; padding-left: 1em; } .arg .k { color: var(--muted); }
.arg .k::after { content: ":"; } li.leaves { overflow-wrap: anywhere; } table.diff td { padding: 2px 6px; border-bottom: 1px solid var(--line); vertical-align: top; }
tr.added td:first-child { color: var(--ok); } tr.removed td:first-child, tr.rewritten td:first-child { color: var(--bad); }
.unreadable { font-size: 12px; color: var(--bad); font-weight: 600; }
.integrity { border: 2px solid var(--bad); background: #fdecea; color: var(--bad); }
.tabs { display: flex; gap: 6px; align-items: center; margin-bottom: 6px; }
.tabs button[aria-selected="true"] { font-weight: 600; border-bottom: 2px solid #1f5fbf; }
.tabs .follow { margin-left: 12px; font-size: 12px; } #compare-link { margin-left: auto; font-size: 12px; }
ol.chat { list-style: none; padding: 0; margin: 0; }
.msg { background: #fff; border: 1px solid var(--line); border-radius: 10px; padding: 6px 10px; margin: 0 0 8px; max-width: 92%; }
.msg.user { margin-left: auto; background: #eef4fc; border-color: #cfe0f5; }
.msg.assistant { background: #fff; } .msg.system { background: #f4f4f6; font-size: 12px; }
.msg.tool, .msg.toolcall { background: #fbfbfd; max-width: 100%; }
.msg.derived { border: 2px dashed var(--der); background: #fffaf3; max-width: 100%; }
.msg.refused { border: 2px solid var(--RewriteRefused); max-width: 100%; }
.mh { font-size: 12px; color: var(--muted); } .mh .who { color: var(--ink); text-transform: capitalize; }
.callinfo { font-size: 11px; color: var(--muted); background: #f4f4f6; border-radius: 6px; padding: 1px 6px; display: inline-block; }
.callinfo .model { font-weight: 600; color: var(--ink); }
.status { font-size: 11px; border-radius: 6px; padding: 0 5px; } .status.live { background: #e3f4e8; color: var(--ok); }
.status.summarized { background: #fdebd8; color: #8a4b09; } .status.gone { background: #eee; color: var(--muted); }
time.when { font-size: 11px; } time.when.original { color: var(--ink); }
details.result { border-left: 3px solid var(--line); margin: 4px 0 0 8px; padding-left: 6px; }
details.result > summary, details.long > summary { cursor: pointer; font-size: 12px; color: var(--muted); }
li.edit { font-size: 12px; color: var(--muted); margin: 0 0 6px 12px; }
.md p { margin: 4px 0; } .md ul, .md ol { margin: 4px 0; padding-left: 22px; } .md blockquote { margin: 4px 0; padding-left: 8px; border-left: 3px solid var(--line); color: var(--muted); }
.md code { background: #f1f1f4; padding: 0 3px; border-radius: 3px; font-size: 12px; } .md-url { color: var(--muted); font-size: 12px; }
.md pre.md-code { background: #f6f6f8; padding: 6px; border-radius: 6px; } .md h4, .md h5, .md h6 { margin: 6px 0 2px; }
ul.findings li.error { color: var(--bad); } ul.findings li.warning { color: var(--warn); }
ol.hits li.hit mark { background: #ffe9b8; }
.cmp-wrap { overflow-x: auto; } table#compare { border-collapse: collapse; width: 100%; table-layout: fixed; background: #fff; }
table#compare th, table#compare td { border-bottom: 1px solid var(--line); vertical-align: top; padding: 4px 6px; text-align: left; }
table#compare thead th:first-child, table#compare tbody th { width: 5em; font-size: 12px; color: var(--muted); font-weight: normal; }
tr.same-run td { color: var(--muted); font-size: 12px; text-align: center; background: #f6f6f8; }
.cspan { border-left: 4px solid var(--obs); padding-left: 6px; margin-bottom: 4px; } .cspan.derived { border-left-color: var(--der); background: #fffaf3; }
td.empty { color: var(--muted); text-align: center; }
details.lost > summary { cursor: pointer; } details.lost.ok > summary { color: var(--ok); }
details.lost.bad > summary { color: var(--bad); } details.lost.warn > summary { color: var(--warn); }
details.lost ul { font-size: 12px; margin: 2px 0 6px; }
.error h1 { display: block; } #js-error { color: var(--bad); }
svg text { font: 10px system-ui, sans-serif; fill: var(--muted); }
"""

JS = r"""
(function () {
  "use strict";
  var root = document.documentElement;
  function fail(msg) {
    root.setAttribute("data-rendered", "error");
    var el = document.getElementById("js-error");
    if (el) { el.hidden = false; el.textContent = "The viewer failed: " + msg; }
  }
  window.addEventListener("error", function (e) { fail(e.message || String(e)); });
  window.addEventListener("unhandledrejection", function (e) { fail(String(e.reason)); });
  function $(id) { return document.getElementById(id); }
  function get(url, kind) {
    return fetch(url, { credentials: "same-origin", headers: { "Accept": kind === "json" ? "application/json" : "text/html" } })
      .then(function (r) {
        if (!r.ok) return r.text().then(function (t) { throw new Error(r.status + " " + t.slice(0, 200)); });
        return kind === "json" ? r.json() : r.text();
      });
  }

  // -- the sessions page: filter and sort ------------------------------------------------------
  function sessionsPage() {
    var table = $("sessions"), filter = $("filter"), flagged = $("only-flagged");
    var rows = Array.prototype.slice.call(table.tBodies[0].rows);
    function apply() {
      var q = filter.value.trim().toLowerCase(), only = flagged.checked;
      rows.forEach(function (tr) {
        var show = (!q || (tr.getAttribute("data-search") || "").indexOf(q) >= 0) && (!only || tr.getAttribute("data-flagged") === "1");
        tr.hidden = !show;
      });
    }
    filter.addEventListener("input", apply);
    flagged.addEventListener("change", apply);
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      function sort() {
        var asc = !th.classList.contains("asc"), num = th.getAttribute("data-type") === "num";
        Array.prototype.forEach.call(th.parentNode.cells, function (c) { c.classList.remove("asc", "desc"); });
        th.classList.add(asc ? "asc" : "desc");
        rows.sort(function (a, b) {
          var x = a.cells[col].getAttribute("data-v") || "", y = b.cells[col].getAttribute("data-v") || "";
          var c = num ? (Number(x) || 0) - (Number(y) || 0) : x.localeCompare(y);
          return asc ? c : -c;
        });
        rows.forEach(function (tr) { table.tBodies[0].appendChild(tr); });
      }
      th.addEventListener("click", sort);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(); });
    });
  }

  // -- the session page ------------------------------------------------------------------------
  function sessionPage() {
    var base = root.getAttribute("data-base");
    var head = Number(root.getAttribute("data-head"));
    var at = Number(root.getAttribute("data-at"));
    var seq = 0, curve = null, selected = null;
    var want = at;  // the last position asked for: keys pressed faster than the server answers add up
    var slider = $("slider"), pos = $("pos");

    var mode = /[?&]view=conversation/.test(location.search) ? "conversation" : "buffer";
    function setMode(m) {
      mode = m;
      $("tab-buffer").setAttribute("aria-selected", String(m === "buffer"));
      $("tab-conversation").setAttribute("aria-selected", String(m === "conversation"));
      $("state").hidden = m !== "buffer";
      $("conversation").hidden = m !== "conversation";
      root.setAttribute("data-view", m);
      return show(want, false);
    }
    function pageUrl(n) {
      return location.pathname + "?at=" + n + (mode === "conversation" ? "&view=conversation" : "") + (selected ? "#" + selected : "");
    }
    function show(n, push, since) {
      n = Math.max(1, Math.min(head, Math.round(n)));
      want = n;
      var mine = ++seq, t0 = since || performance.now();
      root.setAttribute("data-loading", String(n));
      var parts = [get(base + "/state?at=" + n, "html")];
      if (mode === "conversation") parts.push(get(base + "/conversation?at=" + n, "html"));
      return Promise.all(parts).then(function (got) {
        if (mine !== seq) return;
        $("state").innerHTML = got[0];
        if (got.length > 1) {
          var conv = $("conversation");
          conv.innerHTML = got[1];
          if (following) conv.lastElementChild && conv.lastElementChild.scrollIntoView({ block: "end" });
        }
        at = n;
        var cl = $("compare-link");
        if (cl) cl.href = "/compare?a=" + encodeURIComponent(root.getAttribute("data-session")) + "&at_a=" + n +
          "&b=" + encodeURIComponent(root.getAttribute("data-session")) + "&at_b=" + Math.max(1, n - 1);
        slider.value = n; pos.value = n;
        $("diff-b").value = n; $("diff-a").value = Math.max(1, n - 1);
        var u = pageUrl(n);
        if (push) history.pushState({ at: n }, "", u); else history.replaceState({ at: n }, "", u);
        document.title = document.title.replace(/ at \d+ · /, " at " + n + " · ");
        if (selected) { var el = document.getElementById(selected); if (el) el.classList.add("selected"); }
        drawCursor();
        // done when the new state has been laid out and the next frame starts: the step's whole cost
        requestAnimationFrame(function () {
          if (mine !== seq) return;
          root.setAttribute("data-step-ms", (performance.now() - t0).toFixed(1));
          root.setAttribute("data-at", String(n));
          root.removeAttribute("data-loading");
        });
      });
    }
    function seek(dir) {
      return get(base.replace(/^\/s\//, "/api/s/") + "/seek?from=" + want + "&dir=" + dir, "json").then(function (r) {
        if (r.position) return show(r.position, true);
        var note = $("event");
        if (note) { var p = document.createElement("p"); p.className = "meta"; p.textContent = r.message; note.appendChild(p); }
      });
    }
    function openSpan(id) {
      if (!/^[od][1-9][0-9]*$/.test(id)) return Promise.resolve();
      selected = id;
      Array.prototype.forEach.call(document.querySelectorAll(".span.selected"), function (e) { e.classList.remove("selected"); });
      var el = document.getElementById(id);
      if (el) el.classList.add("selected");
      history.replaceState(history.state, "", pageUrl(at));
      $("panel").setAttribute("data-loading", id);
      var shownAt = at;
      return get(base + "/span/" + id + "?at=" + at, "html").then(function (html) {
        $("panel").innerHTML = html;
        $("panel").removeAttribute("data-loading");
        $("panel").removeAttribute("data-lineage"); $("panel").removeAttribute("data-lost"); $("panel").removeAttribute("data-grounding");
        $("panel").setAttribute("data-span", id);
        var gBox = $("grounding-box");
        if (gBox && !gBox.getAttribute("data-done")) {  // long sources: the grounding arrives after the panel
          get(base + "/grounding/" + id + "?at=" + shownAt, "html").then(function (html) {
            if ($("panel").getAttribute("data-span") !== id || !$("grounding-box")) return;
            $("grounding-box").innerHTML = html;
            $("grounding-box").setAttribute("data-done", "1");
            $("panel").setAttribute("data-grounding", id);
          }, function (err) { if ($("grounding-box")) $("grounding-box").textContent = String(err.message || err); });
        } else if (gBox) { $("panel").setAttribute("data-grounding", id); }
        var lostBox = $("lost-box");
        if (lostBox) {  // what the compaction dropped: a fold over the originals, shown when it arrives
          get(base + "/lost/" + id + "?at=" + shownAt, "html").then(function (html) {
            if ($("panel").getAttribute("data-span") !== id || !$("lost-box")) return;
            $("lost-box").innerHTML = html;
            $("panel").setAttribute("data-lost", id);
          }, function (err) { if ($("lost-box")) $("lost-box").textContent = String(err.message || err); });
        }
        var box = $("lineage-box");
        if (!box || box.getAttribute("data-done")) { $("panel").setAttribute("data-lineage", id); return; }
        // the lineage is a fold over the log up to this position: shown when it arrives
        return get(base + "/lineage/" + id + "?at=" + shownAt, "html").then(function (lin) {
          if ($("panel").getAttribute("data-span") !== id || !$("lineage-box")) return;
          $("lineage-box").innerHTML = lin;
          $("panel").setAttribute("data-lineage", id);
        });
      }).catch(function (err) {
        $("panel").textContent = String(err.message || err);
        $("panel").removeAttribute("data-loading");
      });
    }
    // links inside fragments: positions and spans
    document.addEventListener("click", function (e) {
      var a = e.target.closest ? e.target.closest("a.pref, a.sref, .span") : null;
      if (!a) return;
      if (a.classList.contains("pref")) { e.preventDefault(); show(Number(a.getAttribute("data-at")), true); }
      else if (a.classList.contains("sref")) { e.preventDefault(); openSpan(a.getAttribute("data-span")); }
      else if (a.classList.contains("span") && !window.getSelection().toString()) { openSpan(a.getAttribute("data-id")); }
    });
    document.addEventListener("keydown", function (e) {
      var tag = (e.target.tagName || "").toLowerCase();
      if ((tag === "input" && e.target.type !== "range") || tag === "textarea" || tag === "select") return;
      if (e.key === "Enter" && e.target.classList && e.target.classList.contains("span")) { openSpan(e.target.getAttribute("data-id")); return; }
      var go = null;
      var t = e.timeStamp;  // the key press itself: a step is timed from here to the new state drawn
      if (e.key === "ArrowLeft") go = e.shiftKey ? function () { return seek(-1); } : function () { return show(want - 1, false, t); };
      else if (e.key === "ArrowRight") go = e.shiftKey ? function () { return seek(1); } : function () { return show(want + 1, false, t); };
      else if (e.key === "Home") go = function () { return show(1, true); };
      else if (e.key === "c" && !e.ctrlKey && !e.metaKey && !e.altKey) go = function () { return setMode("conversation"); };
      else if (e.key === "b" && !e.ctrlKey && !e.metaKey && !e.altKey) go = function () { return setMode("buffer"); };
      else if (e.key === "f" && !e.ctrlKey && !e.metaKey && !e.altKey) go = function () { $("follow").click(); return Promise.resolve(); };
      else if (e.key === "End") go = function () { return show(head, true); };
      if (!go) return;
      e.preventDefault();
      go();
    });
    var timer = null;
    slider.addEventListener("input", function () {
      clearTimeout(timer);
      var n = Number(slider.value);
      timer = setTimeout(function () { show(n); }, 40);
    });
    slider.addEventListener("keydown", function (e) { if (e.key.indexOf("Arrow") === 0 || e.key === "Home" || e.key === "End") e.stopPropagation(); });
    pos.addEventListener("change", function () { show(Number(pos.value), true); });
    $("first").addEventListener("click", function () { show(1, true); });
    $("last").addEventListener("click", function () { show(head, true); });
    $("prev").addEventListener("click", function () { show(want - 1); });
    $("next").addEventListener("click", function () { show(want + 1); });
    $("prev-c").addEventListener("click", function () { seek(-1); });
    $("next-c").addEventListener("click", function () { seek(1); });
    if ($("marks")) $("marks").addEventListener("change", function () { if (this.value) show(Number(this.value), true); });
    window.addEventListener("popstate", function (e) { if (e.state && e.state.at) show(e.state.at); });
    $("blame-form").addEventListener("submit", function (e) {
      e.preventDefault();
      var q = $("blame-q").value;
      $("blame-results").setAttribute("data-loading", "1");
      get(base + "/blame?at=" + at + "&q=" + encodeURIComponent(q), "html").then(function (html) {
        $("blame-results").innerHTML = html;
        $("blame-results").removeAttribute("data-loading");
        $("blame-results").setAttribute("data-query", q);
      }, function (err) { $("blame-results").textContent = String(err.message || err); $("blame-results").removeAttribute("data-loading"); });
    });
    $("tab-buffer").addEventListener("click", function () { setMode("buffer"); });
    $("tab-conversation").addEventListener("click", function () { setMode("conversation"); });
    $("search-form").addEventListener("submit", function (e) {
      e.preventDefault();
      var f = $("search-form"), q = [];
      ["q", "role", "kind", "provenance"].forEach(function (k) {
        var v = f.elements[k].value;
        if (v) q.push(k + "=" + encodeURIComponent(v));
      });
      if ($("search-findings").checked) q.push("findings=1");
      $("search-results").setAttribute("data-loading", "1");
      get(base + "/search?" + q.join("&"), "html").then(function (html) {
        $("search-results").innerHTML = html;
        $("search-results").removeAttribute("data-loading");
        $("search-results").setAttribute("data-query", f.elements.q.value);
      }, function (err) { $("search-results").textContent = String(err.message || err); $("search-results").removeAttribute("data-loading"); });
    });
    ["search-role", "search-kind", "search-provenance", "search-findings"].forEach(function (id) {
      $(id).addEventListener("change", function () { if ($("search-q").value) $("search-form").requestSubmit(); });
    });
    // following a session still being written: poll its head, keep the slider's range, stay at the head
    var following = false, poller = null;
    function poll() {
      return get(base.replace(/^\/s\//, "/api/s/") + "/head", "json").then(function (h) {
        root.setAttribute("data-polled", String(h.head));
        if (h.head <= head) return;
        var atHead = want >= head;
        head = h.head;
        root.setAttribute("data-head", String(head));
        slider.max = head; pos.max = head; $("diff-a").max = head; $("diff-b").max = head;
        if (following && atHead) return show(head, false);
      });
    }
    $("follow").addEventListener("change", function () {
      following = this.checked;
      root.setAttribute("data-follow", following ? "1" : "0");
      clearInterval(poller);
      if (following) { poll().then(function () { if (want < head) show(head, false); }); poller = setInterval(poll, 1500); }
    });
    $("diff-form").addEventListener("submit", function (e) {
      e.preventDefault();
      get(base + "/diff?a=" + Number($("diff-a").value) + "&b=" + Number($("diff-b").value), "html").then(function (html) {
        $("diff-results").innerHTML = html;
      }, function (err) { $("diff-results").textContent = String(err.message || err); });
    });

    // -- the live-token curve --------------------------------------------------------------
    var NS = "http://www.w3.org/2000/svg", W = 1000, H = 200, L = 46, R = 8, T = 8, PH = 104, DH = 30, LANE = 8;
    var LANES = { Pruned: 0, Rewritten: 1, Rederived: 2, RewriteRefused: 3, Restored: 4, Expanded: 4 };
    function el(name, attrs, parent) {
      var e = document.createElementNS(NS, name);
      for (var k in attrs) e.setAttribute(k, attrs[k]);
      if (parent) parent.appendChild(e);
      return e;
    }
    function X(p) { return L + (W - L - R) * (p - 1) / Math.max(1, head - 1); }
    function css(v) { return getComputedStyle(root).getPropertyValue(v).trim(); }
    function fmt(n) { return n >= 1000 ? Math.round(n / 1000) + "k" : String(n); }
    function drawCursor() {
      var c = document.getElementById("cursor");
      if (c) { var x = X(at).toFixed(1); c.setAttribute("x1", x); c.setAttribute("x2", x); }
    }
    function drawCurve(data) {
      curve = data;
      var box = $("curve"), pts = data.points;
      box.textContent = "";
      var svg = el("svg", { viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none", "data-points": pts.length,
                            "data-markers": data.markers.length, role: "img" });
      var ymax = 1;
      pts.forEach(function (p) { ymax = Math.max(ymax, p[1] + p[2]); });
      function Y(v) { return T + PH - PH * v / ymax; }
      [0, 0.5, 1].forEach(function (f) {
        var y = Y(ymax * f);
        el("line", { x1: L, x2: W - R, y1: y, y2: y, stroke: "#e3e3e8" }, svg);
        el("text", { x: L - 4, y: y + 3, "text-anchor": "end" }, svg).textContent = fmt(Math.round(ymax * f));
      });
      // steps, not slopes: the buffer changes at an event and holds until the next one
      function steps(value) {
        var out = [];
        pts.forEach(function (p, i) {
          var x = X(p[0]).toFixed(1);
          if (i) out.push(x + "," + Y(value(pts[i - 1])).toFixed(1));
          out.push(x + "," + Y(value(p)).toFixed(1));
        });
        return out;
      }
      if (pts.length) {
        var x0 = X(pts[0][0]).toFixed(1), x1 = X(pts[pts.length - 1][0]).toFixed(1);
        var obsTop = steps(function (p) { return p[1]; });
        var allTop = steps(function (p) { return p[1] + p[2]; });
        el("path", { d: "M" + x0 + "," + Y(0) + " L" + obsTop.join(" L") + " L" + x1 + "," + Y(0) + " Z",
                     fill: css("--obs"), "fill-opacity": "0.85", class: "area-observed" }, svg);
        el("path", { d: "M" + allTop.join(" L") + " L" + obsTop.slice().reverse().join(" L") + " Z",
                     fill: css("--der"), class: "area-derived" }, svg);
      }
      // derived tokens again on their own scale: summaries are small next to the observations
      var dmax = 1;
      pts.forEach(function (p) { dmax = Math.max(dmax, p[2]); });
      var dTop = T + PH + 6;
      function DY(v) { return dTop + DH - DH * v / dmax; }
      el("line", { x1: L, x2: W - R, y1: dTop + DH, y2: dTop + DH, stroke: "#e3e3e8" }, svg);
      el("text", { x: L - 4, y: dTop + 8, "text-anchor": "end" }, svg).textContent = fmt(dmax);
      el("text", { x: L + 4, y: dTop + 8 }, svg).textContent = "derived tokens (own scale)";
      if (pts.length) {
        var dd = "M" + X(pts[0][0]).toFixed(1) + "," + DY(0);
        pts.forEach(function (p, i) {
          if (i) dd += " L" + X(p[0]).toFixed(1) + "," + DY(pts[i - 1][2]).toFixed(1);
          dd += " L" + X(p[0]).toFixed(1) + "," + DY(p[2]).toFixed(1);
        });
        dd += " L" + X(pts[pts.length - 1][0]).toFixed(1) + "," + DY(0) + " Z";
        el("path", { d: dd, fill: css("--der"), class: "area-derived-own" }, svg);
      }
      var base = dTop + DH + 6;
      data.markers.forEach(function (m) {
        var r = el("rect", { x: (X(m[0]) - 1).toFixed(1), y: base + LANES[m[1]] * LANE, width: 2.5, height: LANE - 2,
                             fill: css("--" + m[1]), class: "marker marker-" + m[1], "data-at": m[0] }, svg);
        el("title", {}, r).textContent = m[1] + " " + m[2] + " at position " + m[0];
      });
      el("line", { id: "cursor", x1: X(at), x2: X(at), y1: T, y2: H, stroke: "#1d1d1f", "stroke-width": 1.5 }, svg);
      svg.addEventListener("click", function (e) {
        var t = e.target;
        if (t.getAttribute && t.getAttribute("data-at")) { show(Number(t.getAttribute("data-at")), true); return; }
        var rect = svg.getBoundingClientRect(), x = (e.clientX - rect.left) * W / rect.width;
        show(1 + (x - L) / (W - L - R) * (head - 1), true);
      });
      box.appendChild(svg);
      root.setAttribute("data-curve", String(pts.length));
    }
    // the hash chain's verdict (a whole-log walk, kept per head by the server): a broken chain is
    // said at the top of the page, whatever position is shown
    get(base.replace(/^\/s\//, "/api/s/") + "/integrity", "json").then(function (v) {
      root.setAttribute("data-integrity", v.ok ? "ok" : "broken");
      if (v.ok) return;
      var box = $("integrity");
      box.textContent = "Integrity: the hash chain breaks at position " + v.first_bad_position + " (" + v.reason +
        "). What this page shows from there on may have been altered or forged. Run: ctxledger verify " + v.session;
      box.hidden = false;
    }, function (err) { root.setAttribute("data-integrity", "error"); });
    get(base.replace(/^\/s\//, "/api/s/") + "/curve", "json").then(drawCurve, function (err) {
      $("curve").textContent = "The curve could not be loaded: " + (err.message || err);
    });
    var hash = location.hash.replace(/^#/, "");
    if (hash) openSpan(hash);
    if (mode === "conversation") setMode("conversation");
    history.replaceState({ at: at }, "", location.pathname + location.search + location.hash);
    root.setAttribute("data-at", String(at));
  }

  try {
    var kind = root.getAttribute("data-page");
    if (kind === "sessions") sessionsPage();
    else if (kind === "session") sessionPage();
    if (root.getAttribute("data-rendered") === "pending") root.setAttribute("data-rendered", "ok");
  } catch (e) {
    fail(e && e.message ? e.message : String(e));
  }
})();
"""
