"""``messages`` logs: a JSONL of successive OpenAI, Anthropic or OpenAI Responses request bodies.

Each line is the full request one call sent (``{"model", "messages": [...], ...}``; Anthropic's has a
top-level ``system``; a Responses API body has ``input`` items and ``instructions``, and one that
names a ``previous_response_id`` only adds to the history), or ``{"request": {...}, "response":
{...}}`` when the reply was logged too.
This module only reads the file and tells the two shapes apart; what changed between calls
(appended -> observed, dropped -> pruned, one new message where several were dropped -> a derived
span ``by="client"``) is ``engine.importers.messages.MessageRecorder``'s diff.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from engine.errors import ImportFormatError
from engine.importers.base import (
    Apply,
    Checkpoint,
    Importer,
    ParseContext,
    decode_error,
    jsonl_records,
)

__all__ = ["MessageLogImporter", "IMPORTER", "api_of"]

_ANTHROPIC_BLOCKS = ("tool_use", "tool_result", "thinking", "redacted_thinking")
_OPENAI_ROLES = ("system", "developer", "tool", "function")


def _decode(raw: bytes) -> Any:
    d = msgspec.json.decode(raw)
    if not isinstance(d, dict):
        raise msgspec.ValidationError("a line must be a JSON object (a request body)")
    return d


def api_of(body: dict[str, Any]) -> str:
    """``"anthropic"``, ``"openai"`` or ``"responses"``, from the shape of a request body."""
    if "input" in body and "messages" not in body:
        return "responses"
    if "system" in body or "anthropic_version" in body:
        return "anthropic"
    for m in body.get("messages") or ():
        if not isinstance(m, dict):
            continue
        if m.get("role") in _OPENAI_ROLES or "tool_calls" in m:
            return "openai"
        content = m.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in _ANTHROPIC_BLOCKS for b in content
        ):
            return "anthropic"
    return "openai"


class MessageLogImporter(Importer):
    format = "messages"

    def detect(self, path: Path) -> bool:
        if not path.is_file():
            return False
        try:
            with open(path, "rb") as f:
                d = msgspec.json.decode(f.readline())
        except (OSError, msgspec.DecodeError):
            return False
        if isinstance(d, dict) and isinstance(d.get("request"), dict):
            d = d["request"]
        return isinstance(d, dict) and (isinstance(d.get("messages"), list) or
                                        ("model" in d and isinstance(d.get("input"), (list, str))))

    def transcripts(self, path: Path) -> list[Path]:
        return [path] if path.is_file() else sorted(path.rglob("*.jsonl"))

    def default_name(self, source: Path) -> str:
        return f"messages:{source.stem}"

    def read(self, source: Path, start: Checkpoint | None, ctx: ParseContext, *, follow: bool):
        return jsonl_records(source, start, ctx, _decode, follow=follow)

    def parse(self, records, ctx: ParseContext):
        from engine.importers.messages import (
            MessageRecorder,
            canonical_message,
            system_message,
        )

        state: dict[str, Any] = {}

        def recorder(session) -> MessageRecorder:
            if state.get("session") is not session:
                state["session"], state["recorder"] = session, MessageRecorder(session, by="client")
            return state["recorder"]

        for line, offset, d in records:
            if isinstance(d, Exception):
                yield ctx.bad(line, f"not a request body ({decode_error(d)})")
                ctx.taken(line, offset)
                continue
            body, reply = (d["request"], d.get("response")) if isinstance(d.get("request"), dict) else (d, None)
            api = api_of(body)
            messages = body.get("input" if api == "responses" else "messages")
            if api == "responses" and isinstance(messages, str):
                messages = [{"role": "user", "content": messages}]
            if not isinstance(messages, list):
                yield ctx.bad(line, "a request body needs a 'messages' list (or a Responses API 'input')")
                ctx.taken(line, offset)
                continue
            system = body.get("system") if api == "anthropic" else body.get("instructions") if api == "responses" else None
            append = api == "responses" and isinstance(body.get("previous_response_id"), str)
            try:  # validate now, so a malformed message stops the import before anything is written
                system_message(system) if system is not None else None
                for i, m in enumerate(messages):
                    canonical_message(m, api, i)
            except ImportFormatError as e:
                yield ctx.bad(line, e.message)
                ctx.taken(line, offset)
                continue
            meta = {"line": line}
            if isinstance(body.get("model"), str):
                meta["model"] = body["model"]

            def record(session, report, messages=messages, api=api, system=system, append=append, reply=reply, meta=meta):
                rec = recorder(session)
                done = rec.record_request(messages, api=api, system=system, meta=meta, append=append)
                _count(session, report, done)
                if isinstance(reply, dict):
                    _count(session, report, rec.record_reply(reply, api=api, meta=meta))

            yield Apply(record)
            ctx.taken(line, offset)


def _count(session, report, rec) -> None:
    obs = report.observed
    if rec.observed:
        obs["message"] = obs.get("message", 0) + len(rec.observed)
        live = session.state.live
        report.tokens += sum(live[i].tokens for i in rec.observed if i in live)
    if rec.pruned:
        report.pruned += len(rec.pruned)
    report.compactions += len(rec.derived)
    report.violations += len(rec.violations)


IMPORTER = MessageLogImporter()
