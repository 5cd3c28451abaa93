"""OpenHands conversations: one JSON file per event.

- V0: ``sessions/<sid>/events/<id>.json`` (actions have ``action``/``args``, observations have
  ``observation``/``content``/``cause``; tool calls carry ``tool_call_metadata``);
- V1 (software-agent-sdk): ``<conversation>/events/event-<idx>-<id>.json`` with a ``kind``
  (``MessageEvent``, ``ActionEvent``, ``ObservationEvent``, ``Condensation``, ...).

The source is the conversation directory; a "line" is an event file, in event order. A condensation
(V0 ``CondensationAction``, V1 ``Condensation``) forgets events: without a summary they are pruned;
with one, they and the earlier condenser summaries still live (OpenHands' summarizing condenser
reads its previous summary: a summary of a summary) become one derived span written
``by="openhands:condenser"``, with ``summary_offset`` in meta.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import msgspec

from engine.importers.base import (
    MAX_META_ARGS,
    Checkpoint,
    Forget,
    Importer,
    Observe,
    ParseContext,
    clip,
    decode_error,
    meta_arguments,
)

__all__ = ["OpenHandsImporter", "IMPORTER"]

BY = "openhands:condenser"
_json = msgspec.json.Encoder()
_SKIP_V0_ACTIONS = ("change_agent_state", "condensation_request", "null", "recall", "pause", "resume")
_SKIP_V0_OBSERVATIONS = ("agent_state_changed", "null", "recall", "user_rejected", "condensation")
_SKIP_V1 = ("ConversationStateUpdateEvent", "PauseEvent", "CondensationRequest", "CondensationSummaryEvent",
            "TokenEvent", "StreamingDeltaEvent")


def _event_files(source: Path) -> list[Path]:
    events = source / "events"
    files = [p for p in events.glob("*.json") if p.is_file()] if events.is_dir() else []
    return sorted(files, key=_order_key)


def _order_key(p: Path) -> tuple:
    m = re.match(r"(?:event-)?(\d+)", p.stem)
    return (int(m.group(1)) if m else 1 << 62, p.name)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return content["text"]
        return _text(content.get("content"))
    parts = []
    if isinstance(content, list):
        for b in content:
            t = _text(b) if isinstance(b, (dict, str)) else ""
            if t:
                parts.append(t)
            elif isinstance(b, dict) and b.get("type") in ("image", "image_url"):
                parts.append("[image]")
    return "\n".join(parts)


class OpenHandsImporter(Importer):
    format = "openhands"

    def detect(self, path: Path) -> bool:
        sources = self.transcripts(path) if path.is_dir() else []
        for src in sources[:1]:
            files = _event_files(src)
            if not files:
                return False
            try:
                d = msgspec.json.decode(files[0].read_bytes())
            except msgspec.DecodeError:
                return False
            return isinstance(d, dict) and ("kind" in d or "action" in d or "observation" in d) and (
                "id" in d or "timestamp" in d)
        return False

    def transcripts(self, path: Path) -> list[Path]:
        if path.is_file():
            return []
        if (path / "events").is_dir():
            return [path]
        if path.name == "events" and _event_files(path.parent):
            return [path.parent]
        return sorted(p.parent for p in path.rglob("events") if p.is_dir() and _event_files(p.parent))

    def default_name(self, source: Path) -> str:
        return f"openhands:{source.name}"

    def session_info(self, source: Path) -> dict[str, Any]:
        files = _event_files(source)
        version = "v1" if files and files[0].name.startswith("event-") else "v0"
        return {"session_id": source.name, "version": version}

    def size(self, source: Path) -> int:
        return len(_event_files(source))

    def fingerprint(self, source: Path, offset: int) -> str:
        files = _event_files(source)[:offset]
        h = hashlib.sha256(str(offset).encode())
        for f in files[:2] + files[-2:]:
            h.update(f.name.encode())
            h.update(f.read_bytes())
        return h.hexdigest()[:32]

    def read(self, source: Path, start: Checkpoint | None, ctx: ParseContext, *, follow: bool):
        files = _event_files(source)
        begin = start.line if start else 0
        for i, f in enumerate(files[begin:], begin + 1):
            raw = f.read_bytes()
            ctx.report.lines += 1
            ctx.report.bytes += len(raw)
            try:
                d = msgspec.json.decode(raw)
                if not isinstance(d, dict):
                    raise msgspec.ValidationError("an event file must hold a JSON object")
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                if i == len(files) and (follow or not raw.rstrip().endswith(b"}")):
                    ctx.report.pending_tail = True  # the newest event is still being written
                    ctx.report.lines -= 1
                    ctx.report.bytes -= len(raw)
                    return
                d = _Bad(f.name, e)
            yield i, i, d

    def parse(self, records, ctx: ParseContext):
        for line, offset, d in records:
            if isinstance(d, _Bad):
                yield ctx.bad(line, f"{d.name} is not a JSON object ({decode_error(d.error)})")
                ctx.taken(line, offset)
                continue
            meta: dict[str, Any] = {"line": line, "event_id": d.get("id")}
            if d.get("timestamp"):
                meta["timestamp"] = d["timestamp"]
            try:
                if "kind" in d:
                    yield from self._v1(d, meta, ctx)
                elif "action" in d:
                    yield from self._v0_action(d, meta, ctx)
                elif "observation" in d:
                    yield from self._v0_observation(d, meta, ctx)
                else:
                    ctx.unknown("event without kind/action/observation")
            except _Malformed as e:
                yield ctx.bad(line, str(e))
            ctx.taken(line, offset)

    # -- V0 --------------------------------------------------------------------------------------

    def _v0_action(self, d: dict, meta: dict, ctx: ParseContext):
        action, args = d.get("action"), d.get("args") or {}
        if not isinstance(args, dict):
            raise _Malformed("an action's 'args' must be an object")
        source = d.get("source")
        if action == "condensation":
            yield _forget(args, meta)
            return
        if action in _SKIP_V0_ACTIONS:
            ctx.skip(f"action:{action}")
            return
        tool = d.get("tool_call_metadata")
        if action == "system":
            text = args.get("content") or d.get("message") or ""
            if text.strip():
                yield Observe(clip(text, meta), "system", "message", meta, "system")
            return
        if isinstance(tool, dict) and tool.get("tool_call_id"):
            if action in ("message",) and (args.get("content") or "").strip():
                yield Observe(clip(args["content"], dict(meta)), "assistant", "message", dict(meta), "assistant")
            thought = args.get("thought")
            if isinstance(thought, str) and thought.strip():
                m = {**meta, "type": "thought"}
                yield Observe(clip(thought, m), "assistant", "message", m, "assistant")
            yield _call(tool.get("function_name") or action, tool["tool_call_id"], args, meta)
            return
        if action == "message":
            text = args.get("content") or d.get("message") or ""
            if not text.strip():
                ctx.skip("action:message:empty")
                return
            if source == "user":
                yield Observe(clip(text, meta), "user", "message", meta, "user")
            else:
                yield Observe(clip(text, meta), "assistant", "message", meta, "assistant")
            return
        text = d.get("message") or _json.encode(args).decode()
        meta["action"] = action
        yield Observe(clip(str(text), meta), "assistant" if source == "agent" else "user", "message", meta,
                      "assistant" if source == "agent" else "user")

    def _v0_observation(self, d: dict, meta: dict, ctx: ParseContext):
        kind = d.get("observation")
        tool = d.get("tool_call_metadata")
        content = d.get("content")
        text = content if isinstance(content, str) else _text(content)
        if d.get("cause") is not None:
            meta["cause"] = d["cause"]
        if isinstance(tool, dict) and tool.get("tool_call_id"):
            meta["tool_call_id"] = tool["tool_call_id"]
            meta["observation"] = kind
            if not text.strip():
                text, meta["empty"] = "[empty tool result]", True
            yield Observe(clip(text, meta), "tool", "tool_result", meta, "tool_result")
            return
        if kind in _SKIP_V0_OBSERVATIONS or not text.strip():
            ctx.skip(f"observation:{kind}")
            return
        meta.update(observation=kind, harness="observation")
        yield Observe(clip(text, meta), "user", "message", meta, "harness")

    # -- V1 --------------------------------------------------------------------------------------

    def _v1(self, d: dict, meta: dict, ctx: ParseContext):
        kind = d.get("kind")
        if kind == "Condensation":
            yield _forget(d, meta)
        elif kind == "MessageEvent":
            msg = d.get("llm_message") or {}
            if not isinstance(msg, dict):
                raise _Malformed("a MessageEvent's 'llm_message' must be an object")
            role = msg.get("role") or ("user" if d.get("source") == "user" else "assistant")
            text = _text(msg.get("content"))
            if role not in ("user", "assistant", "system"):
                raise _Malformed(f"a MessageEvent with role {role!r}")
            if not text.strip():
                ctx.skip("MessageEvent:empty")
                return
            yield Observe(clip(text, meta), role, "message", meta, role)
        elif kind == "SystemPromptEvent":
            text = _text(d.get("system_prompt"))
            if text.strip():
                yield Observe(clip(text, meta), "system", "message", meta, "system")
            else:
                ctx.skip("SystemPromptEvent:empty")
        elif kind == "ActionEvent":
            reasoning = d.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning.strip():
                m = {**meta, "type": "thinking"}
                yield Observe(clip(reasoning, m), "assistant", "thinking", m, "thinking")
            thought = _text(d.get("thought"))
            if thought.strip():
                yield Observe(clip(thought, dict(meta)), "assistant", "message", dict(meta), "assistant")
            call_id, name = d.get("tool_call_id"), d.get("tool_name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise _Malformed("an ActionEvent needs 'tool_call_id' and 'tool_name'")
            action = d.get("action") or {}
            args = {k: v for k, v in action.items() if k != "kind"} if isinstance(action, dict) else action
            yield _call(name, call_id, args, meta)
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            call_id = d.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise _Malformed(f"a {kind} needs a 'tool_call_id'")
            if kind == "ObservationEvent":
                obs = d.get("observation") or {}
                text = _text(obs.get("content")) if isinstance(obs, dict) else _text(obs)
                if not text.strip() and isinstance(obs, dict):
                    text = _text(obs.get("output")) or _json.encode(
                        {k: v for k, v in obs.items() if k != "kind"}).decode()
            elif kind == "AgentErrorEvent":
                text = str(d.get("error") or "")
                meta["is_error"] = True
            else:
                text = str(d.get("rejection_reason") or "rejected by the user")
            meta.update(tool_call_id=call_id, observation=kind)
            if not text.strip():
                text, meta["empty"] = "[empty tool result]", True
            yield Observe(clip(text, meta), "tool", "tool_result", meta, "tool_result")
        elif kind in _SKIP_V1:
            ctx.skip(kind)
        elif isinstance(kind, str):
            ctx.unknown(kind)
        else:
            raise _Malformed("an event's 'kind' must be a string")


def _call(name: str, call_id: str, args: Any, meta: dict) -> Observe:
    meta = dict(meta)
    encoded = _json.encode(args).decode()
    meta.update(tool_call_id=call_id, name=name)
    if len(encoded) <= MAX_META_ARGS:
        meta["arguments"] = meta_arguments(args, encoded)
    return Observe(clip(f"{name}({encoded})", meta), "assistant", "tool_call", meta, "tool_call")


def _forget(d: dict, meta: dict) -> Forget:
    ids = d.get("forgotten_event_ids")
    if ids is None and d.get("forgotten_events_start_id") is not None:
        lo, hi = d.get("forgotten_events_start_id"), d.get("forgotten_events_end_id")
        if not isinstance(lo, int) or not isinstance(hi, int):
            raise _Malformed("forgotten_events_start_id/end_id must be integers")
        ids = range(lo, hi + 1)
    if not isinstance(ids, (list, range)):
        raise _Malformed("a condensation needs forgotten_event_ids (or a start/end id range)")
    summary = d.get("summary")
    if summary is not None and (not isinstance(summary, str) or not summary.strip()):
        summary = None
    meta = dict(meta)
    if d.get("summary_offset") is not None:
        meta["summary_offset"] = d["summary_offset"]
    if d.get("llm_response_id"):
        meta["llm_response_id"] = d["llm_response_id"]
    return Forget("event_id", set(ids), summary, BY, meta)


class _Bad:
    def __init__(self, name: str, error: Exception):
        self.name, self.error = name, error


class _Malformed(Exception):
    pass


IMPORTER = OpenHandsImporter()
