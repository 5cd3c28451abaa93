"""Claude Code transcripts (``~/.claude/projects/<project>/<session-id>.jsonl``).

Every model-visible line becomes an observed span in file order: user text, queued user text
(``queue-operation`` enqueue), assistant text, thinking, tool calls and their results, with the
line's ``uuid`` and ``timestamp``, the API ``message_id`` (one assistant message is often written a
content block per line; ``message_id`` groups them) and the provider's usage counts
(``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``) in meta. Harness text (``isMeta``
lines, ``<local-command-caveat>``, ``<command-name>``, ``<system-reminder>``...) is kept, marked
``meta["harness"]``.

A ``compact_boundary`` and the ``isCompactSummary`` line after it become one derived span written
``by="claude-code:compact:<trigger>"`` from every live span (a partial compaction's preserved
segment stays live). The fixed preface goes to the derived span's ``meta["harness_preface"]``; the
pointer to the transcript file and "Please continue..." follow it as an observed harness span. A
second compaction reads the first summary: in the permissive import session that is recorded as
a violation with its generation.

Sidechain lines (``isSidechain``) go to the session ``<name>/sidechain``; subagent transcripts
(``<session-id>/subagents/agent-*.jsonl``) import first, as ``<name>/agent-<id>``, and the summary a
compaction call (``agent-acompact-*``) produced names it in ``meta["compaction_transcript"]``.
"""

from __future__ import annotations

import re
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
    meta_arguments,
)

__all__ = ["ClaudeCodeImporter", "IMPORTER", "split_summary"]

_HARNESS_TAGS = (
    "<local-command-caveat>",
    "<command-name>",
    "<command-message>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<task-notification>",
    "<system-reminder>",
    "<user-prompt-submit-hook>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
)
_PREFACE_START = "This session is being continued from a previous conversation"
_TRAILER_MARKERS = (
    "If you need specific details from before compaction",
    "read the full transcript at:",
    "Please continue the conversation from where we left",
)
_BOOKKEEPING = ("progress", "file-history-snapshot")
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens")


class _Line(msgspec.Struct):
    """The fields of a transcript line the importer reads; every other field is skipped unread."""

    type: Any = None
    uuid: Any = None
    isSidechain: Any = False
    isMeta: Any = False
    timestamp: Any = None
    sessionId: Any = None
    subtype: Any = None
    message: Any = None
    operation: Any = None
    content: Any = None
    compactMetadata: Any = None
    isCompactSummary: Any = False
    agentId: Any = None


_decode = msgspec.json.Decoder(_Line).decode
_json = msgspec.json.Encoder()


def split_summary(text: str) -> tuple[str, str, str]:
    """``(preface, summary, trailer)`` of a compact summary message: the harness's fixed preface,
    the model's summary, and the harness's pointer / "Please continue..." text after it."""
    preface = ""
    body = text
    if text.startswith(_PREFACE_START):
        cut = text.find("\n\n")
        if cut > 0:
            preface, body = text[:cut], text[cut + 2 :]
    cut = len(body)
    for marker in _TRAILER_MARKERS:
        i = body.find(marker)
        if 0 <= i < cut:
            cut = body.rfind("\n", 0, i) + 1
    summary, trailer = body[:cut].strip(), body[cut:].strip()
    if not summary:  # nothing but harness text: keep it all as the summary rather than lose it
        return preface, body.strip(), ""
    return preface, summary, trailer


def _harness_tag(text: str) -> str:
    head = text.lstrip()[:40]
    for tag in _HARNESS_TAGS:
        if head.startswith(tag):
            return tag.strip("<>")
    return ""


def _block_text(content: Any) -> str:
    """A tool result's content (a str or a list of blocks) as text."""
    if isinstance(content, str):
        return content
    parts = []
    if isinstance(content, list):
        for b in content:
            if isinstance(b, dict):
                if b.get("type") == "text" and isinstance(b.get("text"), str):
                    parts.append(b["text"])
                elif b.get("type") == "image":
                    parts.append("[image]")
                else:
                    parts.append(f"[{b.get('type', 'block')}]")
            elif isinstance(b, str):
                parts.append(b)
    return "\n".join(parts)


class ClaudeCodeImporter(Importer):
    format = "claude-code"

    # -- where the transcripts are -------------------------------------------------------------

    def detect(self, path: Path) -> bool:
        files = self.transcripts(path) if path.is_dir() else [path]
        for f in files[:1]:
            for _, _, raw in _head(f):
                try:
                    d = msgspec.json.decode(raw)
                except msgspec.DecodeError:
                    return False
                if not isinstance(d, dict):
                    return False
                if d.get("type") in ("user", "assistant", "system", "progress", "summary",
                                     "file-history-snapshot", "queue-operation") and (
                    "sessionId" in d or "uuid" in d or "leafUuid" in d or "messageId" in d
                ):
                    return True
        return False

    def transcripts(self, path: Path) -> list[Path]:
        if path.is_file():
            return [path]
        found = [p for p in path.rglob("*.jsonl") if "subagents" not in p.parts]
        mains = {p for p in found if not _agent_part(p)}
        # a flat "<stem>_agent-<id>.jsonl" imports with its main transcript; one whose main file is
        # not there is a transcript of its own rather than something silently left out
        orphans = {p for p in found if p not in mains and _parent_stem(p) not in {m.stem for m in mains if m.parent == p.parent}}
        return sorted(mains | orphans)

    def default_name(self, source: Path) -> str:
        sid = self._session_id(source) or source.stem
        part = _agent_part(source)
        return f"claude-code:{sid}" + (f"/{part}" if part else "")

    def session_info(self, source: Path) -> dict[str, Any]:
        info: dict[str, Any] = {"session_id": self._session_id(source)}
        if _agent_part(source):
            info["kind"] = "compaction-call" if "acompact" in source.stem else "subagent"
        return info

    def children(self, source: Path, name: str) -> list[tuple[Path, str, dict[str, Any]]]:
        found = list((source.parent / source.stem / "subagents").glob("agent-*.jsonl"))
        found += source.parent.glob(f"{glob_escape(source.stem)}_agent-*.jsonl")
        out = []
        for f in sorted(set(found)):
            part = _agent_part(f)
            kind = "compaction-call" if "acompact" in f.stem else "subagent"
            out.append((f, f"{name}/{part}", {"session_id": self._session_id(f), "parent": name, "kind": kind}))
        return out

    def links(self, child: Path, child_name: str) -> dict[str, str]:
        """The compaction call's reply holds ``<summary>...</summary>``: its opening words appear in
        the summary the parent transcript received."""
        if "acompact" not in child.stem:
            return {}
        last = ""
        for _, _, raw in _lines(child):
            try:
                d = _decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if d.type == "assistant" and isinstance(d.message, dict):
                text = _block_text(d.message.get("content"))
                if "<summary>" in text:
                    last = text
        m = re.search(r"<summary>\s*(.{20,200}?)\s*(?:\n|</summary>)", last, re.S)
        return {m.group(1).strip(): child_name} if m else {}

    def _session_id(self, source: Path) -> str:
        for _, _, raw in _head(source, 50):
            try:
                d = _decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if isinstance(d.sessionId, str) and d.sessionId:
                return d.sessionId
        return ""

    # -- reading ---------------------------------------------------------------------------------

    def read(self, source: Path, start: Checkpoint | None, ctx: ParseContext, *, follow: bool):
        return jsonl_records(source, start, ctx, _decode, follow=follow)

    def parse(self, records, ctx: ParseContext):
        sidechain_file = ctx.info.get("kind") in ("compaction-call", "subagent")
        boundary: tuple[_Line, int] | None = None
        # A compaction read up to its summary, held while the ``/compact`` command's echo that
        # Claude Code writes after the summary is read: the user's instruction is one of its inputs.
        held: tuple[Compact, int, int] | None = None
        for line, offset, d in records:
            if isinstance(d, Exception):
                if held is not None:
                    yield held[0]
                    held = None
                yield ctx.bad(line, f"not a JSON object ({decode_error(d)})")
                if boundary is None:
                    ctx.taken(line, offset)
                continue
            t = d.type
            if t in _BOOKKEEPING:
                ctx.skip(t)
                if boundary is None and held is None:
                    ctx.taken(line, offset)
                continue
            stream = "sidechain" if d.isSidechain is True and not sidechain_file else ""
            if held is not None:
                echo = self._command_echo(d, line, held[0]) if stream == held[0].stream else None
                if echo is not None:
                    held[0].inputs.append(echo)
                    held = (held[0], line, offset)
                    continue
                yield held[0]
                held = None
            if boundary is not None and not (t == "user" and d.isCompactSummary is True):
                # A boundary without its summary line: the compaction left nothing readable.
                yield self._compaction(boundary[0], None, boundary[1], ctx, stream)
                boundary = None
            try:
                if t == "assistant":
                    yield from self._assistant(d, line, ctx, stream)
                elif t == "user":
                    if d.isCompactSummary is True:
                        compaction = self._compaction(boundary[0] if boundary else None, d, line, ctx, stream)
                        boundary = None
                        if compaction.text is not None:
                            held = (compaction, line, offset)
                            continue  # taken with the command echo that follows it
                        yield compaction
                    else:
                        yield from self._user(d, line, ctx, stream)
                elif t == "system":
                    if d.subtype == "compact_boundary":
                        boundary = (d, line)
                        continue  # not taken until its summary is: a checkpoint never splits them
                    ctx.skip(f"system:{d.subtype or '?'}")
                elif t == "summary":
                    ctx.skip("summary (session title)")
                elif t == "queue-operation":
                    yield from self._queued(d, line, ctx, stream)
                elif isinstance(t, str) and t:
                    ctx.unknown(t)
                else:
                    yield ctx.bad(line, "a transcript line needs a string 'type'")
            except _Malformed as e:
                yield ctx.bad(line, str(e))
            ctx.taken(line, offset)
        if held is not None:
            yield held[0]
            ctx.taken(held[1], held[2])

    # -- line types ------------------------------------------------------------------------------

    @staticmethod
    def _meta(d: _Line, line: int) -> dict[str, Any]:
        meta: dict[str, Any] = {"line": line}
        if d.uuid:
            meta["uuid"] = d.uuid
        if d.timestamp:
            meta["timestamp"] = d.timestamp
        return meta

    def _assistant(self, d: _Line, line: int, ctx: ParseContext, stream: str):
        msg = d.message
        if not isinstance(msg, dict):
            raise _Malformed("an assistant line needs a 'message' object")
        content = msg.get("content")
        base = self._meta(d, line)
        if msg.get("id"):
            base["message_id"] = msg["id"]
        usage = msg.get("usage")
        if isinstance(usage, dict):  # the provider's own token counts for the call, as recorded (flat keys)
            for key in _USAGE_KEYS:
                v = usage.get(key)
                if type(v) is int and 0 <= v < 1 << 63:
                    base[key] = v
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise _Malformed("an assistant message needs 'content' (a list of blocks)")
        for block in content:
            if not isinstance(block, dict):
                ctx.unknown("assistant content (not an object)")
                continue
            bt = block.get("type")
            meta = dict(base)
            if bt == "text":
                text = block.get("text")
                if isinstance(text, str) and text.strip():
                    yield Observe(clip(text, meta), "assistant", "message", meta, "assistant", stream)
                else:
                    ctx.skip("assistant:empty text")
            elif bt == "thinking":
                text = block.get("thinking")
                if isinstance(text, str) and text.strip():
                    meta["type"] = "thinking"
                    yield Observe(clip(text, meta), "assistant", "thinking", meta, "thinking", stream)
                else:
                    ctx.skip("assistant:empty thinking")
            elif bt == "redacted_thinking":
                ctx.skip("assistant:redacted_thinking")
            elif bt in ("tool_use", "server_tool_use"):
                call_id, tool = block.get("id"), block.get("name")
                if not isinstance(call_id, str) or not call_id or not isinstance(tool, str) or not tool:
                    raise _Malformed("a tool_use block needs an 'id' and a 'name'")
                args = block.get("input", {})
                encoded = _json.encode(args).decode()
                meta.update(tool_call_id=call_id, name=tool)
                if len(encoded) <= MAX_META_ARGS:
                    meta["arguments"] = meta_arguments(args, encoded)
                yield Observe(clip(f"{tool}({encoded})", meta), "assistant", "tool_call", meta, "tool_call", stream)
            else:
                ctx.unknown(f"assistant block:{bt}")

    def _user(self, d: _Line, line: int, ctx: ParseContext, stream: str):
        msg = d.message
        if not isinstance(msg, dict):
            raise _Malformed("a user line needs a 'message' object")
        content = msg.get("content")
        base = self._meta(d, line)
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise _Malformed("a user message needs 'content' (a str or a list of blocks)")
        for block in content:
            if not isinstance(block, dict):
                ctx.unknown("user content (not an object)")
                continue
            bt = block.get("type")
            meta = dict(base)
            if bt == "tool_result":
                call_id = block.get("tool_use_id")
                if not isinstance(call_id, str) or not call_id:
                    raise _Malformed("a tool_result block needs a 'tool_use_id'")
                meta["tool_call_id"] = call_id
                if block.get("is_error"):
                    meta["is_error"] = True
                text = _block_text(block.get("content"))
                if not text.strip():
                    text, meta["empty"] = "[empty tool result]", True
                yield Observe(clip(text, meta), "tool", "tool_result", meta, "tool_result", stream)
            elif bt in ("text", "image", "document"):
                text = block.get("text") if bt == "text" else f"[{bt}]"
                if not isinstance(text, str) or not text.strip():
                    ctx.skip("user:empty text")
                    continue
                tag = _harness_tag(text) or ("meta" if d.isMeta is True else "")
                if tag:
                    meta["harness"] = tag
                yield Observe(clip(text, meta), "user", "message", meta, "harness" if tag else "user", stream)
            else:
                ctx.unknown(f"user block:{bt}")

    def _queued(self, d: _Line, line: int, ctx: ParseContext, stream: str):
        if d.operation == "enqueue" and isinstance(d.content, str) and d.content.strip():
            meta = self._meta(d, line)
            meta["queued"] = True
            tag = _harness_tag(d.content)
            if tag:
                meta["harness"] = tag
            yield Observe(clip(d.content, meta), "user", "message", meta, "harness" if tag else "queued", stream)
        else:
            ctx.skip(f"queue-operation:{d.operation or '?'}")

    def _command_echo(self, d: _Line, line: int, compaction: Compact) -> Observe | None:
        """A line of the ``/compact`` command's echo that Claude Code writes after the summary: the
        caveat and the command with its arguments (the user's instruction to the compaction, dated
        before the boundary), and its output when it reports what PreCompact hooks printed (that
        output is part of the compaction prompt). They are inputs of the compaction; None for any
        other line."""
        if d.type != "user" or d.isCompactSummary is True:
            return None
        text = _echo_text(d)
        tag = _harness_tag(text)
        if tag not in _ECHO_TAGS:
            return None
        if tag == "local-command-stdout":
            if "PreCompact" not in text:
                return None
        elif tag == "command-name" and not text.lstrip().startswith("<command-name>/compact<"):
            return None
        meta = self._meta(d, line)
        meta["harness"] = tag
        return Observe(clip(text, meta), "user", "message", meta, "harness", compaction.stream)

    def _call_inputs(self, ctx: ParseContext, child: str, meta: dict[str, Any]) -> list[Observe]:
        """The compaction call's inputs (see ``_compaction_call_inputs``), found beside the main
        transcript where Claude Code writes it."""
        part = child.rsplit("/", 1)[-1]
        source = ctx.source
        for path in (source.parent / source.stem / "subagents" / f"{part}.jsonl",
                     source.parent / f"{source.stem}_{part}.jsonl"):
            if path.is_file():
                inputs, problem = _compaction_call_inputs(path, part)
                if problem:
                    ctx.report.notes.append(f"line {meta.get('line')}: {problem}")
                return inputs
        return []

    def _compaction(self, boundary: _Line | None, summary: _Line | None, line: int, ctx: ParseContext,
                    stream: str) -> Compact:
        info = boundary.compactMetadata if boundary is not None and isinstance(boundary.compactMetadata, dict) else {}
        trigger = info.get("trigger") if isinstance(info.get("trigger"), str) else ""
        by = f"claude-code:compact:{trigger}" if trigger else "claude-code:compact"
        meta: dict[str, Any] = {"line": line}
        if boundary is not None:
            meta["boundary_uuid"] = boundary.uuid
            meta["timestamp"] = boundary.timestamp
            for key in ("trigger", "preTokens", "postTokens", "durationMs"):
                if key in info:
                    meta[key] = info[key]
        keep = None
        segment = info.get("preservedSegment")
        if isinstance(segment, dict) and segment.get("headUuid"):
            meta["preserved_segment"] = segment
            keep = _preserved(segment.get("headUuid"), segment.get("tailUuid") or segment.get("anchorUuid"))
        if summary is None:
            ctx.report.notes.append(f"line {line}: a compact boundary without its summary line; its spans were pruned")
            return Compact(None, by, meta, keep, stream=stream)
        msg = summary.message if isinstance(summary.message, dict) else {}
        text = _block_text(msg.get("content"))
        if not text.strip():
            raise _Malformed("a compact summary line without text")
        preface, body, trailer = split_summary(text)
        meta.update(self._meta(summary, line))
        if preface:
            meta["harness_preface"] = preface
        inputs: list[Observe] = []
        for snippet, child in ctx.links.items():
            if snippet in body:
                meta["compaction_transcript"] = child
                inputs = self._call_inputs(ctx, child, meta)
                for obs in inputs:
                    obs.stream = stream
        after = []
        if trailer:
            tmeta = {"line": line, "uuid": summary.uuid, "timestamp": summary.timestamp, "harness": "compact-trailer"}
            after.append(Observe(trailer, "user", "message", tmeta, "harness", stream))
        return Compact(clip(body, meta), by, meta, keep, after, stream, inputs=inputs)


_ECHO_TAGS = ("local-command-caveat", "command-name", "command-message", "command-args", "local-command-stdout")


def _echo_text(d: _Line) -> str:
    msg = d.message if isinstance(d.message, dict) else {}
    content = msg.get("content")
    return content if isinstance(content, str) else _block_text(content) if isinstance(content, list) else ""


def _compaction_call_inputs(path: Path, part: str) -> tuple[list[Observe], str]:
    """What the compacting model was given, read from the compaction call's transcript: its prompt
    (the compaction instructions, the user's ``/compact`` arguments, the output of PreCompact
    hooks) and the context Claude Code injected as ``isMeta`` lines (hook output, system
    reminders). Every user-side line before the model's reply, as harness observations; and a note
    when the transcript is unreadable or holds no reply (a truncated call: nothing is used)."""
    out: list[Observe] = []
    replied = False
    try:
        for number, _, raw in _lines(path):
            try:
                d = _decode(raw)
            except (msgspec.DecodeError, msgspec.ValidationError):
                return [], f"{path.name} line {number} is not JSON; the compaction call's inputs were not used"
            if d.type == "assistant":
                replied = True
                continue
            if d.type != "user" or replied:
                continue
            msg = d.message if isinstance(d.message, dict) else {}
            content = msg.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list):
                continue
            for block in blocks:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text":
                    text = block.get("text")
                elif block.get("type") == "tool_result":
                    text = _block_text(block.get("content"))
                else:
                    continue
                if not isinstance(text, str) or not text.strip():
                    continue
                meta = {"line": number, "harness": "compaction-prompt" if not out else "compaction-input",
                        "compaction_call": part}
                if d.timestamp:
                    meta["timestamp"] = d.timestamp
                out.append(Observe(clip(text, meta), "user", "message", meta, "harness"))
    except OSError as e:
        return [], f"{path.name} could not be read ({e.strerror}); the compaction call's inputs were not used"
    if not replied:
        return [], f"{path.name} holds no reply (a truncated compaction call); its inputs were not used"
    return out, ""


def _preserved(head: Any, tail: Any):
    def keep(spans) -> set[str]:
        ids, inside = set(), False
        for sp in spans:
            uuid = sp.meta.get("uuid")
            if uuid == head:
                inside = True
            if inside:
                ids.add(sp.id)
            if inside and tail is not None and uuid == tail:
                # every span of the tail line (one line can hold several blocks) stays too
                inside = "tail"
            elif inside == "tail" and uuid != tail:
                ids.discard(sp.id)
                break
        return ids

    return keep


class _Malformed(Exception):
    pass


def _agent_part(path: Path) -> str:
    stem = path.stem
    i = stem.find("agent-")
    if i == 0 or (i > 0 and stem[i - 1] == "_"):
        return stem[i:]
    return ""


def _parent_stem(path: Path) -> str:
    """The main transcript's stem of a flat ``<stem>_agent-<id>.jsonl`` (empty for any other file)."""
    stem = path.stem
    i = stem.find("_agent-")
    return stem[:i] if i > 0 else ""


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _lines(path: Path):
    with open(path, "rb") as f:
        for i, raw in enumerate(f, 1):
            if raw.strip():
                yield i, 0, raw


def _head(path: Path, n: int = 5):
    for i, off, raw in _lines(path):
        if i > n:
            return
        yield i, off, raw


IMPORTER = ClaudeCodeImporter()
