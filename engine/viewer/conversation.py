"""The log as a conversation: turns as chat messages, each tool call with its result folded under it,
summaries marked with their sources and findings, edits as one-line notes, and per model call what
the recorder knew (model, latency, tokens, cost).

A page shows a window of the log ending at a position (``WINDOW`` events, read by range: a primary
key range scan whatever the session's length), each message with what had become of it at that
position (live, summarized in dN, pruned). Plain data; ``engine.viewer.views`` writes the HTML.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from engine.events import (
    Expanded,
    Marked,
    Observed,
    Pruned,
    Rederived,
    Restored,
    RewriteRefused,
    Rewritten,
    SessionStarted,
)
from engine.spans import Provenance
from engine.viewer.findings import Budget, audited, summary_findings

if TYPE_CHECKING:
    from engine.session import Session

__all__ = ["WINDOW", "call_info", "conversation", "event_time"]

WINDOW = 200  # events per conversation page
_TIME_KEYS = ("original_at", "original_time", "timestamp")  # the transcript's own time, when recorded


def event_time(ev: Any) -> dict[str, str]:
    """When an event happened: the transcript's own time when its meta records one (an import or
    a hook), else the event's ``at``; ``recorded`` is the event's own time when the two differ."""
    at = _fmt(ev.at)
    meta = getattr(ev, "meta", None) or {}
    for key in _TIME_KEYS:
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            original = _parse(value)
            if original:
                return {"time": original, "time_source": "original", "recorded": at}
    return {"time": at, "time_source": "recorded", "recorded": at}


def _fmt(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S") if at is not None else ""


def _parse(value: str) -> str:
    try:
        return _fmt(datetime.fromisoformat(value.strip().replace("Z", "+00:00")))
    except ValueError:
        return value.strip()[:40]


def _num(v: Any) -> int | float | None:
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None


def call_info(meta: dict[str, Any]) -> dict[str, Any] | None:
    """What the recorder knew of the model call that produced a span: model, latency (ms), input and
    output tokens, cache reads, cost; None when nothing is known. The proxy keeps these in
    ``meta["reply"]`` (the reply's ``model`` and ``usage``, its ``latency_ms``); the Claude Code
    importer keeps the usage counts flat (``input_tokens``, ``output_tokens``, ...)."""
    reply = meta.get("reply") if isinstance(meta.get("reply"), dict) else {}
    usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
    flat = {**usage, **{k: meta[k] for k in ("input_tokens", "output_tokens", "cache_read_input_tokens") if k in meta}}
    info = {
        "model": next((v for v in (reply.get("model"), meta.get("model")) if isinstance(v, str) and v), ""),
        "latency_ms": _num(reply.get("latency_ms", meta.get("latency_ms"))),
        "input_tokens": _num(flat.get("input_tokens", flat.get("prompt_tokens"))),
        "output_tokens": _num(flat.get("output_tokens", flat.get("completion_tokens"))),
        "cache_read_tokens": _num(flat.get("cache_read_input_tokens")),
        "cost": _num(reply.get("cost", meta.get("cost", meta.get("cost_usd")))),
        "call": str(reply.get("reply_id") or meta.get("message_id") or meta.get("msg") or ""),
    }
    known = {k: v for k, v in info.items() if v not in (None, "")}
    return info if set(known) - {"call"} else None


def _status(span_id: str, position: int, live: dict[str, Any], holders: dict[str, str]) -> str:
    current = live.get(span_id)
    if current is not None:
        return "live" if current.position == position else "replaced"
    if span_id in holders:
        return f"summarized in {holders[span_id]}"
    return "pruned" if span_id.startswith("o") else "gone"


def conversation(session: Session, at: int, *, window: int = WINDOW, fleet_row: Any = None,
                 checked: bool = True) -> dict[str, Any]:
    """The ``window`` events ending at ``at`` as conversation items (oldest first). Each item has a
    ``type``: ``message`` (an observation: role, kind, text, time, status at ``at``, ``call`` info,
    and for a tool call its ``results``), ``summary`` (a rewrite or re-derivation: sources, by,
    reason, ``findings``: see ``engine.viewer.findings``), ``refused``, ``edit`` (prune, restore, expand) or ``note`` (start, mark)."""
    start = max(1, at - window + 1)
    view = session.at(at)
    live = view.state.live
    holders = {src: s.id for s in live.values() if s.provenance is Provenance.DERIVED for src in s.sources}
    items: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}  # tool_call_id -> its item, for the results to fold under
    seen_calls: set[str] = set()
    budget = Budget()
    known = audited(session, fleet_row) if checked else None
    for ev in session.events(start, at):
        t = type(ev)
        p = ev.originator_version
        base = {"position": p, "by": ev.by, "reason": ev.reason, **event_time(ev)}
        if t is Observed:
            meta = ev.meta or {}
            item = {"type": "message", "span_id": ev.span_id, "role": ev.role, "kind": ev.kind, "text": ev.text,
                    "tokens": ev.tokens, "meta": meta, "status": _status(ev.span_id, p, live, holders), **base}
            info = call_info(meta)
            if info is not None and (not info["call"] or info["call"] not in seen_calls):
                item["call"] = info  # once per model call: a reply of several parts shares one
                seen_calls.add(info["call"])
            call_id = meta.get("tool_call_id")
            if ev.kind == "tool_result" and isinstance(call_id, str) and call_id in calls:
                calls[call_id]["results"].append(item)
                continue
            if ev.kind == "tool_call":
                item["results"] = []
                if isinstance(call_id, str):
                    calls[call_id] = item
            items.append(item)
        elif t is Rewritten or t is Rederived:
            sources = list(ev.sources) or list(getattr(ev, "inputs", ()))
            item = {"type": "summary", "span_id": ev.span_id, "role": ev.role, "kind": ev.kind, "text": ev.text,
                    "tokens": ev.tokens, "generation": ev.generation, "sources": sources,
                    "rederived": t is Rederived, "violation": bool(getattr(ev, "violation", False)),
                    "status": _status(ev.span_id, p, live, holders), **base}
            if checked:
                item["findings"] = summary_findings(session, ev, known, budget)
            items.append(item)
        elif t is RewriteRefused:
            items.append({"type": "refused", "command": ev.command, "inputs": list(ev.inputs), "text": ev.text,
                          "offending": list(ev.offending),
                          "findings": [f for f in ev.findings if isinstance(f, dict)][:20], **base})
        elif t is Pruned or t is Restored:
            items.append({"type": "edit", "action": "pruned" if t is Pruned else "restored", "span_id": ev.span_id, **base})
        elif t is Expanded:
            items.append({"type": "edit", "action": "expanded", "span_id": ev.span_id, "restored": list(ev.restored), **base})
        elif t is Marked:
            items.append({"type": "note", "text": f"mark {ev.label!r}", **base})
        elif t is SessionStarted:
            items.append({"type": "note", "text": f"session {ev.name!r} started", **base})
    return {"session": session.name, "at": at, "head": session.position, "start": start, "items": items,
            "earlier": start - 1 if start > 1 else None}
