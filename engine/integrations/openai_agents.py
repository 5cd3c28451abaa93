"""A ctxledger session as the OpenAI Agents SDK's ``Session``: one changed line in an agent.

    from agents import Runner
    from engine.integrations.openai_agents import LedgerSession

    session = LedgerSession("user-42", url="sqlite:///ctxledger.db", compactor=Compactor(budget=60_000))
    result = await Runner.run(agent, "Where is my order?", session=session)

Every item the Runner adds becomes an observed span (the item itself kept in ``meta``, so it comes
back exactly); ``get_items`` gives back the LIVE buffer, so what compaction did is what the model
sees. Nothing is ever deleted: ``pop_item`` and ``clear_session`` prune, and the log keeps it all.
"""

from __future__ import annotations

import contextlib
from typing import Any

import msgspec

from engine.compaction import Compactor, StepResult
from engine.errors import ConcurrencyError, InvalidInputError, RewritePolicyError
from engine.ledger import Ledger
from engine.otel import live
from engine.session import Session
from engine.spans import Span
from engine.integrations._live_view import (
    Entry,
    LiveView,
    Observation,
    Shown,
    check_observations,
    fits_meta,
    open_session,
    require,
    to_json_text,
    write_observations,
)
from engine.render import derived_marker

require("agents", "openai-agents", "the OpenAI Agents SDK (openai-agents)")

__all__ = ["LedgerSession", "item_to_observation", "CALL_OUTPUT_TYPES"]

BY = "openai-agents"
OPAQUE_COMPACTION = "[a compaction encrypted by OpenAI (responses.compact): its text cannot be read or checked]"


class _Unmapped(Exception):
    """A compacted history that does not map onto the live spans."""

# Responses tool-call item types whose result is a separate item with the same call_id.
CALL_OUTPUT_TYPES = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
    "tool_search_call": "tool_search_output",
    "program": "program_output",
}
_OUTPUT_TYPES = frozenset(CALL_OUTPUT_TYPES.values())
# Calls whose result can be stood in for by a placeholder output carrying text.
_TEXT_OUTPUT = {"function_call": "function_call_output", "custom_tool_call": "custom_tool_call_output"}
_MESSAGE_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}

# meta keys (besides the tool-pairing contract's tool_call_id / name / arguments)
ITEM = "item"  # the original item, minus the field that is the span's text
ITEM_TEXT = "item_text"  # that field's name; "*" when the span text is the whole item as JSON

_encode = msgspec.json.encode
_decode_list = msgspec.json.Decoder(list).decode


# -- items in ----------------------------------------------------------------------------------------


def _parts_text(parts: list[Any]) -> str:
    """The text of a content list: its text parts, and a short stand-in for each other part."""
    out: list[str] = []
    for p in parts:
        if not isinstance(p, dict):
            continue
        t = p.get("type")
        if isinstance(p.get("text"), str):
            out.append(p["text"])
        elif isinstance(p.get("refusal"), str):
            out.append(p["refusal"])
        elif t == "input_file":
            out.append(f"[file {p.get('filename') or p.get('file_id') or ''}]".replace(" ]", "]"))
        else:
            out.append(f"[{t or 'part'}]")
    return "\n".join(out)


def _whole(item: dict, text: str, role: str, kind: str, meta: dict[str, Any]) -> Observation:
    """Keep ``item`` whole in meta (or, when too large for meta, as the span text in JSON)."""
    full = {**meta, ITEM: item}
    if fits_meta(full):
        return text, role, kind, full
    slim = {k: v for k, v in meta.items() if k != "arguments"}
    return to_json_text(item, "the item"), role, kind, {**slim, ITEM_TEXT: "*"}


def _text_field(item: dict, field: str, role: str, kind: str, meta: dict[str, Any], fallback: str) -> Observation:
    """The span text is ``item[field]`` when that is a non-blank str (kept once, not twice)."""
    value = item.get(field)
    if isinstance(value, str) and value.strip():
        # The field stays in place (as null) so the item comes back with its keys in their order.
        slim = {**meta, ITEM: {**item, field: None}, ITEM_TEXT: field}
        if fits_meta(slim):
            return value, role, kind, slim
        return _whole(item, value, role, kind, meta)
    if isinstance(value, list):
        fallback = _parts_text(value) or fallback
    return _whole(item, fallback if fallback.strip() else "[empty]", role, kind, meta)


def item_to_observation(item: Any, index: int = 0) -> Observation:
    """One Responses input item as (text, role, kind, meta) for ``Session.observe``.

    Raises ``InvalidInputError`` for a malformed item (not a dict, no ``type`` and no ``role``, a
    message without a known role or content, a tool call or output without its ``call_id``)."""
    where = f"item {index}"
    if not isinstance(item, dict):
        raise InvalidInputError(f"{where} is a {type(item).__name__}, not a Responses input item (a dict)")
    itype = item.get("type")
    role = item.get("role")
    if itype is None and role is None:
        raise InvalidInputError(f"{where} has neither 'type' nor 'role': not a Responses input item")
    if itype is not None and (not isinstance(itype, str) or not itype):
        raise InvalidInputError(f"{where}: 'type' must be a non-empty str, not {itype!r}")
    if itype is None or itype == "message":
        if role not in _MESSAGE_ROLES:
            raise InvalidInputError(
                f"{where}: a message's role must be one of {', '.join(_MESSAGE_ROLES)}; got {role!r}"
            )
        if "content" not in item:
            raise InvalidInputError(f"{where}: a {role} message has no 'content'")
        return _text_field(item, "content", _MESSAGE_ROLES[role], "message", {}, f"[{role} message]")
    if itype in CALL_OUTPUT_TYPES or itype in _OUTPUT_TYPES:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInputError(f"{where}: a {itype} item needs a 'call_id' (a non-empty str)")
        if itype in _OUTPUT_TYPES:
            meta = {"tool_call_id": call_id}
            if itype in ("function_call_output", "custom_tool_call_output"):
                return _text_field(item, "output", "tool", "tool_result", meta, "[tool output]")
            return _whole(item, to_json_text(item, where), "tool", "tool_result", meta)
        name = item.get("name")
        if itype in _TEXT_OUTPUT and (not isinstance(name, str) or not name):
            raise InvalidInputError(f"{where}: a {itype} item needs a 'name' (a non-empty str)")
        name = name if isinstance(name, str) and name else itype
        meta = {"tool_call_id": call_id, "name": name}
        if itype in _TEXT_OUTPUT:
            args = item.get("arguments", item.get("input"))
            args_text = args if isinstance(args, str) else to_json_text(args, where)
            meta["arguments"] = args_text
            return _whole(item, f"{name}({args_text})", "assistant", "tool_call", meta)
        return _whole(item, to_json_text(item, where), "assistant", "tool_call", meta)
    if itype == "reasoning":
        summary = item.get("summary")
        text = _parts_text(summary) if isinstance(summary, list) else ""
        return _whole(item, text if text.strip() else "[reasoning]", "assistant", "thinking", {})
    # A type this adapter does not know: kind "other", kept whole (its JSON is the text summaries
    # read), given back unchanged.
    text = to_json_text(item, where)
    return _whole(item, text, _MESSAGE_ROLES.get(role, "assistant"), "other", {})


# -- items out ---------------------------------------------------------------------------------------


def _plain_item(span: Span) -> dict[str, Any]:
    """An item for a span recorded without one (by the CLI, the context tools, another adapter)."""
    if span.kind == "tool_call":
        args = span.meta.get("arguments")
        return {
            "type": "function_call",
            "call_id": span.meta["tool_call_id"],
            "name": span.meta["name"],
            "arguments": args if isinstance(args, str) else to_json_text(args if args is not None else {}, "arguments"),
        }
    if span.kind == "tool_result":
        return {"type": "function_call_output", "call_id": span.meta["tool_call_id"], "output": span.text}
    return {"role": span.role, "content": span.text}


def span_item_bytes(span: Span) -> bytes:
    """The JSON of the item a live observed span was recorded from, exactly as it came in."""
    meta = span.meta
    field = meta.get(ITEM_TEXT)
    if field == "*":
        return span.text.encode()
    item = meta.get(ITEM)
    if item is None:
        if span.kind == "thinking":
            return b""  # another tool's record of a model's reasoning: not sent back as text
        return _encode(_plain_item(span))
    if field:
        item = {**item, field: span.text}
    return _encode(item)


def _item_type(span: Span) -> str | None:
    """The type of the item a span was recorded from (None: a message, or no item)."""
    field = span.meta.get(ITEM_TEXT)
    if field == "*":
        try:
            item = msgspec.json.decode(span.text)
        except msgspec.DecodeError:
            return None
        return item.get("type") if isinstance(item, dict) else None
    item = span.meta.get(ITEM)
    return item.get("type") if isinstance(item, dict) else None


def _can_placeholder(span: Span) -> bool:
    return (_item_type(span) or "function_call") in _TEXT_OUTPUT


def _entry_bytes(e: Entry) -> bytes:
    s = e.span
    if e.shown is Shown.SPAN:
        return span_item_bytes(s)
    if e.shown is Shown.DERIVED:
        if s.meta.get("opaque") and isinstance(s.meta.get(ITEM), dict):
            return _encode(s.meta[ITEM])  # a provider's encrypted compaction: only the item itself means anything
        return _encode({"role": s.role, "content": f"{derived_marker(s)}\n{s.text}"})
    if e.shown is Shown.MISSING_RESULT:
        output_type = _TEXT_OUTPUT[_item_type(s) or "function_call"]
        return _encode({"type": output_type, "call_id": s.meta["tool_call_id"], "output": e.text})
    if e.shown is Shown.LONE_CALL:
        head = f"[tool call {s.meta['tool_call_id']} ({s.meta['name']}); its output is not in the context: {e.text}]"
        return _encode({"role": "assistant", "content": f"{head}\n{s.text}"})
    return _encode({"role": "user", "content": e.text})  # LONE_RESULT: render's text names the call


def _tag(item: dict[str, Any], span_id: str) -> dict[str, Any]:
    """``[o17] `` before the item's text, where it has one a model reads."""
    tag = f"[{span_id}] "
    for field in ("content", "output"):
        value = item.get(field)
        if isinstance(value, str):
            item[field] = tag + value
            return item
        if isinstance(value, list):
            for part in value:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    part["text"] = tag + part["text"]
                    return item
    return item


# -- the session ---------------------------------------------------------------------------------------


class LedgerSession:
    """The Agents SDK ``Session`` protocol over a ctxledger session named ``session_id``.

    Give ``ledger=`` (an open ``Ledger``, left open) or ``url=`` (opened here, closed by ``close()``);
    with neither, ``$CTXLEDGER_URL`` or ``./ctxledger.db``. The session is created when missing, so a
    restarted process resumes it. ``compactor`` runs after every settled turn (the Runner's
    ``run_compaction`` hook). ``context_tools()`` gives the model its own context tools on this session;
    ``render_ids=True`` starts each message's and tool output's text with its span id (``[o17] ...``)
    so the model can name spans in them. ``ledger_session`` is the ctxledger ``Session`` underneath."""

    session_settings: Any = None

    def __init__(
        self,
        session_id: str,
        *,
        ledger: Ledger | None = None,
        url: str | None = None,
        compactor: Compactor | None = None,
        render_ids: bool = False,
        session_settings: Any = None,
    ):
        if ledger is not None and url is not None:
            raise InvalidInputError("give ledger= or url=, not both")
        if ledger is not None and not isinstance(ledger, Ledger):
            raise InvalidInputError(f"ledger must be a Ledger, not {type(ledger).__name__}")
        if compactor is not None and not callable(getattr(compactor, "step", None)):
            raise InvalidInputError(f"compactor must be a Compactor, not {type(compactor).__name__}")
        if not isinstance(render_ids, bool):
            raise InvalidInputError(f"render_ids must be a bool, not {type(render_ids).__name__}")
        self._owns_ledger = ledger is None
        self.ledger = ledger if ledger is not None else Ledger.open(url)
        try:
            self.ledger_session: Session = open_session(self.ledger, session_id)
        except BaseException:
            if self._owns_ledger:
                self.ledger.close()
            raise
        self.session_id = session_id
        self.compactor = compactor
        self.render_ids = render_ids
        self.session_settings = session_settings
        self.last_compaction: StepResult | None = None
        self._bytes: dict[str, tuple[int, bytes]] = {}  # span id -> (its position, its item's JSON)
        self._reasoning: set[str] = set()  # ids of spans recorded from reasoning items
        self._view = LiveView(self.ledger_session, can_placeholder=_can_placeholder, payload=self._item_bytes)

    def __repr__(self) -> str:
        return f"<LedgerSession {self.session_id!r} on {self.ledger!r}>"

    # the Session protocol --------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The live buffer as Responses input items, oldest first (the newest ``limit`` of them).
        Fresh copies: changing them changes nothing here."""
        return self.items(limit)

    async def add_items(self, items: list[dict[str, Any]]) -> None:
        """Observe every item, in one transaction; a malformed item raises ``InvalidInputError``
        and nothing of the call is written."""
        self.observe_items(items)
        live.recorded(self.ledger_session)  # OpenTelemetry live export (engine.otel.live): a no-op unless enabled

    async def pop_item(self) -> dict[str, Any] | None:
        """Prune the newest live item and return it (the log keeps it: ``restore`` brings it back)."""
        for last in reversed(self.ledger_session.spans()):
            data = self._item_bytes(Entry(Shown.DERIVED if last.derived else Shown.SPAN, last))
            if not data:
                continue  # not an item this session shows
            self._retry(lambda s: s.prune(last.id, by=BY, reason="pop_item: the Runner took the newest item back"))
            return self._decode([data])[0]
        return None

    async def clear_session(self) -> None:
        """Prune every live span. Nothing is deleted: the log keeps every item, and ``restore`` (or
        time travel with ``at()``) brings any of them back."""

        def clear(s: Session) -> None:
            with s.batch():
                for span in s.spans():
                    s.prune(span.id, by=BY, reason="clear_session")

        self._retry(clear)

    async def _atomic_replace_items(self, items: list[dict[str, Any]]) -> bool:
        """``OpenAIResponsesCompactionSession``'s replacement of the whole history by what
        ``responses.compact`` returned (the user messages it kept, then an encrypted ``compaction``
        item), as ONE recorded rewrite instead of a clear and an add: the items it kept stay the
        same spans, the ones it replaced become the sources of a derived span ``by="openai:compact"``
        (``meta["opaque"]``: the audit cannot read it), and the log keeps every original. Returns
        False (the SDK then clears and adds) for a history this cannot map."""
        compactions = [i for i in items if isinstance(i, dict) and i.get("type") == "compaction"]
        if len(compactions) != 1 or not isinstance(compactions[0].get("encrypted_content"), str):
            return False
        meta = {"opaque": True, ITEM: compactions[0]}
        if not fits_meta(meta):
            return False
        kept_items = [i for i in items if i is not compactions[0]]
        try:
            wanted = [item_to_observation(i, k)[:3] for k, i in enumerate(kept_items)]
        except InvalidInputError:
            return False

        def replace(s: Session) -> None:
            live_spans = [x for x in s.spans() if x.observed]
            kept: list[str] = []
            for text, role, kind in wanted:
                match = next((x for x in live_spans if x.id not in kept and (x.text, x.role, x.kind) == (text, role, kind)), None)
                if match is None:
                    raise _Unmapped
                kept.append(match.id)
            replaced = [x.id for x in s.spans() if x.id not in kept]
            if not replaced:
                raise _Unmapped
            with s.batch():
                try:
                    s.rewrite(replaced, OPAQUE_COMPACTION, by="openai:compact", role="assistant", meta=meta,
                              reason=f"responses.compact replaced {len(replaced)} items with an encrypted summary")
                except RewritePolicyError:  # a summary of a summary: refused (recorded); the history still changes
                    for span_id in replaced:
                        s.prune(span_id, by="openai:compact", reason="responses.compact replaced it")
                    s.observe(OPAQUE_COMPACTION, role="assistant", kind="other",
                              meta={**meta, "summary_refused": True}, by="openai:compact")

        try:
            self._retry(replace)
        except _Unmapped:
            return False
        live.recorded(self.ledger_session)
        return True

    async def run_compaction(self, args: dict[str, Any] | None = None) -> None:
        """The Runner's hook after a settled turn: one step of the configured ``Compactor`` (with its
        rewriter); every prune, rewrite and re-derivation is an event with ``by="compactor:..."``.
        Without a compactor nothing happens. ``args`` (response id, force, store) are not needed: the
        compactor decides from the live buffer's size."""
        if self.compactor is None:
            return
        self.last_compaction = self._retry(self.compactor.step)

    def context_tools(self, *, budget: int | None = None, by: str = "model") -> list[Any]:
        """The model's own context tools (``engine.tools``: list, search, recall, restore, prune,
        summarize, re-derive) on this session, as Agents SDK function tools: add them to the agent's
        ``tools`` and the model can compact its own context under the same rules. Its edits are
        events with ``by=by``; like a compaction, they shape what the model sees from the next
        ``Runner.run`` on (the Runner reads the session once per run). Pair with ``render_ids=True``
        so the model sees the span ids the tools take."""
        from agents import FunctionTool

        from engine.tools import ContextTools

        tools = ContextTools(self.ledger_session, budget=budget, by=by, ledger=self.ledger)

        def invoker(name: str) -> Any:
            async def invoke(ctx: Any, arguments: str) -> str:
                return tools.call(name, arguments).text

            return invoke

        return [
            FunctionTool(
                name=spec["function"]["name"],
                description=spec["function"]["description"],
                params_json_schema=spec["function"]["parameters"],
                on_invoke_tool=invoker(spec["function"]["name"]),
                strict_json_schema=False,
            )
            for spec in tools.schemas("openai")
        ]

    # the same, synchronously ------------------------------------------------------------------------

    def items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """``get_items`` without the event loop."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise InvalidInputError(f"limit must be a non-negative int or None; got {limit!r}")
        entries, parts = self._view.entries()
        if self._reasoning:
            parts = self._lone_reasoning(entries, parts)
        if b"" in parts:  # spans with nothing to show
            keep = [k for k, part in enumerate(parts) if part]
            entries, parts = [entries[k] for k in keep], [parts[k] for k in keep]
        if limit is not None:
            entries, parts = (entries[len(entries) - limit :], parts[len(parts) - limit :]) if limit else ([], [])
        return self._decode(parts, entries if self.render_ids else None)

    def observe_items(self, items: list[dict[str, Any]]) -> list[Span]:
        """``add_items`` without the event loop; returns the new spans."""
        if not isinstance(items, (list, tuple)):
            raise InvalidInputError(f"items must be a list of Responses input items, not {type(items).__name__}")
        records = check_observations(
            [item_to_observation(item, n) for n, item in enumerate(items)], lambda n: f"item {n}"
        )
        if not records:
            return []
        return self._retry(lambda s: write_observations(s, records, BY))

    def close(self) -> None:
        """Close the ledger if this session opened it."""
        if self._owns_ledger:
            self.ledger.close()

    def __enter__(self) -> LedgerSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # internals --------------------------------------------------------------------------------------

    def _item_bytes(self, e: Entry) -> bytes:
        if e.shown is not Shown.SPAN:
            return _entry_bytes(e)
        s = e.span
        hit = self._bytes.get(s.id)
        if hit is not None and hit[0] == s.position:
            return hit[1]
        data = span_item_bytes(s)
        self._bytes[s.id] = (s.position, data)
        if _item_type(s) == "reasoning":
            self._reasoning.add(s.id)
        return data

    def _lone_reasoning(self, entries: list[Entry], parts: list[bytes]) -> list[bytes]:
        """The Responses API refuses a reasoning item not followed by the item it led to: a live
        reasoning item whose next item (the next observation) is not live is shown as a message."""
        out = parts
        last = len(entries) - 1
        for k, e in enumerate(entries):
            if k == last or e.span.id not in self._reasoning or e.shown is not Shown.SPAN:
                continue
            nxt = entries[k + 1]
            if nxt.shown is Shown.SPAN and nxt.span.id == f"o{int(e.span.id[1:]) + 1}":
                continue
            if out is parts:
                out = list(parts)
            head = f"[reasoning {e.span.id}; the item it led to is not in the context]"
            out[k] = _encode({"role": "assistant", "content": f"{head}\n{e.span.text}"})
        return out

    def _decode(self, parts: list[bytes], entries: list[Entry] | None = None) -> list[dict[str, Any]]:
        items = _decode_list(b"[" + b",".join(parts) + b"]")
        if entries is not None:
            items = [_tag(item, e.span.id) if e.shown is Shown.SPAN else item for item, e in zip(items, entries, strict=True)]
        return items

    def _retry(self, command: Any) -> Any:
        """Run ``command(session)``; when another writer appended first, catch up and run it again."""
        try:
            return command(self.ledger_session)
        except ConcurrencyError:
            with contextlib.suppress(InvalidInputError):
                self.ledger_session.refresh()
            return command(self.ledger_session)
