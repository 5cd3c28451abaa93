"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl``).

``response_item`` lines are Responses API items: messages (``developer`` speaks as ``system``),
function and custom tool calls and their outputs, reasoning summaries. ``event_msg``,
``turn_context`` and ``session_meta`` carry nothing the model sees twice: counted and skipped.

A ``compacted`` line is a compaction written ``by="codex:compact:local"`` or ``"codex:compact:remote"``:

- local (``payload.message`` holds the summary): the new history keeps the initial context and the
  most recent user messages (up to ~20k tokens); everything else live, earlier summaries included
  (Codex's summarizer read them: a summary of a summary), becomes the derived span;
- remote (``payload.replacement_history``): the items of the new history that were already live stay
  live, the rest are the sources; the provider's ``compaction`` item is opaque (encrypted), so the
  derived span says its text is unavailable. New items in the replacement history are observed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from engine.importers.base import (
    MAX_META_ARGS,
    Checkpoint,
    Compact,
    Importer,
    Observe,
    ParseContext,
    clip,
    decode_error,
    jsonl_records,
)

__all__ = ["CodexImporter", "IMPORTER", "KEEP_USER_TOKENS"]

KEEP_USER_TOKENS = 20_000  # Codex keeps about this many tokens of recent user messages
ENCRYPTED_SUMMARY = "[compaction summary encrypted by the provider: its text is not available to the client]"
_SUMMARY_PREFIXES = ("Another language model started to solve this problem",)
_HARNESS_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "<INSTRUCTIONS>",
    "# AGENTS.md instructions",
    "<turn_aborted>",
    "<user_shell_command>",
)
_SKIPPED = ("event_msg", "turn_context", "session_meta")


class _Line(msgspec.Struct):
    timestamp: Any = None
    type: Any = None
    payload: Any = None


_decode = msgspec.json.Decoder(_Line).decode
_json = msgspec.json.Encoder()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    if isinstance(content, list):
        for b in content:
            if isinstance(b, dict):
                t = b.get("text")
                if isinstance(t, str):
                    parts.append(t)
                elif b.get("type") in ("input_image", "image"):
                    parts.append("[image]")
    return "\n".join(parts)


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, dict):
        for key in ("content", "output"):
            if isinstance(output.get(key), str):
                return output[key]
        return _json.encode(output).decode()
    return _text(output)


def observations(item: Any, meta: dict[str, Any], ctx: ParseContext | None) -> list[Observe]:
    """The observed spans of one Responses API item (also used for replacement histories)."""
    if not isinstance(item, dict):
        raise _Malformed("a response item must be an object")
    t = item.get("type")
    meta = dict(meta)
    if item.get("id"):
        meta["item_id"] = item["id"]
    if t == "message" or (t is None and "role" in item):
        role = item.get("role")
        text = _text(item.get("content"))
        if not text.strip():
            if ctx:
                ctx.skip(f"message:{role}:empty")
            return []
        if role == "developer" or role == "system":
            meta["source_role"] = role
            return [Observe(clip(text, meta), "system", "message", meta, "system")]
        if role == "assistant":
            return [Observe(clip(text, meta), "assistant", "message", meta, "assistant")]
        if role == "user":
            if text.lstrip().startswith(_HARNESS_PREFIXES):
                meta["harness"] = text.lstrip().split(">", 1)[0].lstrip("<#").strip()[:40]
                return [Observe(clip(text, meta), "user", "message", meta, "harness")]
            return [Observe(clip(text, meta), "user", "message", meta, "user")]
        raise _Malformed(f"a message with role {role!r}")
    if t in ("function_call", "custom_tool_call", "local_shell_call"):
        call_id = item.get("call_id") or item.get("id")
        name = item.get("name") or ("local_shell" if t == "local_shell_call" else None)
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
            raise _Malformed(f"a {t} needs a 'call_id' and a 'name'")
        args = item.get("arguments", item.get("input", item.get("action", "")))
        encoded = args if isinstance(args, str) else _json.encode(args).decode()
        meta.update(tool_call_id=call_id, name=name)
        if len(encoded) <= MAX_META_ARGS:
            meta["arguments"] = encoded
        return [Observe(clip(f"{name}({encoded})", meta), "assistant", "tool_call", meta, "tool_call")]
    if t in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise _Malformed(f"a {t} needs a 'call_id'")
        meta["tool_call_id"] = call_id
        text = _output_text(item.get("output"))
        if not text.strip():
            text, meta["empty"] = "[empty tool result]", True
        return [Observe(clip(text, meta), "tool", "tool_result", meta, "tool_result")]
    if t == "reasoning":
        text = _text(item.get("summary")) or _text(item.get("content"))
        if not text.strip():
            if ctx:
                ctx.skip("reasoning:encrypted" if item.get("encrypted_content") else "reasoning:empty")
            return []
        meta["type"] = "reasoning"
        return [Observe(clip(text, meta), "assistant", "thinking", meta, "thinking")]
    if ctx:
        ctx.unknown(f"response_item:{t}")
    return []


def _key(span_or_obs: Any) -> tuple:
    meta = span_or_obs.meta
    if span_or_obs.kind in ("tool_call", "tool_result"):
        return (span_or_obs.kind, meta.get("tool_call_id"))
    return (span_or_obs.role, span_or_obs.text)


class CodexImporter(Importer):
    format = "codex"

    def detect(self, path: Path) -> bool:
        files = self.transcripts(path) if path.is_dir() else [path]
        for f in files[:1]:
            try:
                with open(f, "rb") as fh:
                    first = fh.readline()
                d = msgspec.json.decode(first)
            except (OSError, msgspec.DecodeError):
                return False
            return isinstance(d, dict) and "payload" in d and d.get("type") in (
                "session_meta", "response_item", "turn_context", "event_msg", "compacted")
        return False

    def transcripts(self, path: Path) -> list[Path]:
        if path.is_file():
            return [path]
        return sorted(path.rglob("*.jsonl"))

    def default_name(self, source: Path) -> str:
        return f"codex:{self._session_id(source) or source.stem}"

    def session_info(self, source: Path) -> dict[str, Any]:
        return {"session_id": self._session_id(source)}

    def _session_id(self, source: Path) -> str:
        try:
            with open(source, "rb") as f:
                for _ in range(5):
                    raw = f.readline()
                    if not raw:
                        break
                    d = _decode(raw)
                    if d.type == "session_meta" and isinstance(d.payload, dict):
                        sid = d.payload.get("id") or d.payload.get("session_id")
                        if isinstance(sid, str):
                            return sid
        except (OSError, msgspec.DecodeError, msgspec.ValidationError):
            pass
        return ""

    def read(self, source: Path, start: Checkpoint | None, ctx: ParseContext, *, follow: bool):
        return jsonl_records(source, start, ctx, _decode, follow=follow)

    def parse(self, records, ctx: ParseContext):
        for line, offset, d in records:
            if isinstance(d, Exception):
                yield ctx.bad(line, f"not a JSON object ({decode_error(d)})")
                ctx.taken(line, offset)
                continue
            t = d.type
            meta: dict[str, Any] = {"line": line}
            if d.timestamp:
                meta["timestamp"] = d.timestamp
            try:
                if t == "response_item":
                    yield from observations(d.payload, meta, ctx)
                elif t == "compacted":
                    yield from self._compacted(d.payload, meta, ctx)
                elif t in _SKIPPED:
                    sub = d.payload.get("type") if isinstance(d.payload, dict) else None
                    ctx.skip(f"{t}:{sub}" if t == "event_msg" and sub else t)
                elif isinstance(t, str) and t:
                    ctx.unknown(t)
                else:
                    yield ctx.bad(line, "a rollout line needs a string 'type'")
            except _Malformed as e:
                yield ctx.bad(line, str(e))
            ctx.taken(line, offset)

    def _compacted(self, payload: Any, meta: dict[str, Any], ctx: ParseContext):
        if not isinstance(payload, dict):
            raise _Malformed("a compacted line needs a 'payload' object")
        message = payload.get("message") or ""
        history = payload.get("replacement_history")
        for key in ("window_number", "window_id", "previous_window_id", "compaction_response_id"):
            if key in payload:
                meta[key] = payload[key]
        if not isinstance(message, str):
            raise _Malformed("compacted.message must be a str")
        summary = message
        for prefix in _SUMMARY_PREFIXES:
            if message.startswith(prefix) and "\n" in message:
                head, summary = message.split("\n", 1)
                meta["harness_preface"] = head
        if isinstance(history, list):
            kept: list[Observe] = []
            opaque = False
            for item in history:
                if isinstance(item, dict) and item.get("type") == "compaction":
                    opaque = True
                    continue
                for obs in observations(item, {"line": meta["line"], "replacement_history": True}, None):
                    if summary and obs.text.strip().endswith(summary.strip()[-200:]):
                        continue  # the summary itself, as the new history's user message
                    kept.append(obs)
            keys = {_key(o) for o in kept}
            text = summary.strip() or (ENCRYPTED_SUMMARY if opaque else None)
            if opaque and not summary.strip():
                meta["encrypted"] = True
            by = "codex:compact:remote" if opaque or not summary.strip() else "codex:compact:local"

            def keep(spans, keys=keys) -> set[str]:
                return {sp.id for sp in spans if _key(sp) in keys}

            # items of the new history not live before: observed after the summary
            def fresh(spans, kept=kept):
                live = {_key(sp) for sp in spans}
                return [o for o in kept if _key(o) not in live]

            yield Compact(text, by, meta, keep, fresh)
            return
        if not summary.strip():
            raise _Malformed("a compacted line with neither a message nor a replacement_history")
        yield Compact(summary.strip(), "codex:compact:local", meta, _keep_recent_user_messages)


def _keep_recent_user_messages(spans) -> set[str]:
    """Codex's local compaction keeps the initial context (system/developer and harness messages)
    and the most recent real user messages, newest first, up to KEEP_USER_TOKENS."""
    kept, budget = set(), KEEP_USER_TOKENS
    for sp in spans:
        if sp.provenance.value == "observed" and (sp.role == "system" or "harness" in sp.meta):
            kept.add(sp.id)
    for sp in reversed(spans):
        if sp.provenance.value == "observed" and sp.role == "user" and sp.kind == "message" \
                and "harness" not in sp.meta and not sp.meta.get("summary_without_sources"):
            if sp.tokens > budget:
                break
            budget -= sp.tokens
            kept.add(sp.id)
    return kept


class _Malformed(Exception):
    pass


IMPORTER = CodexImporter()
