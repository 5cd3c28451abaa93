"""The simulated model as the editor of its own context: the demo's model-driven policy.

``SimulatedEditor`` is a ``ChatModel`` for ``engine.agent``: the agent loop records the budget
nudge, renders the buffer with span ids and offers the context tools; the editor answers with
tool calls, which the loop executes through ``ContextTools.call`` — the same path a real model's
calls take — and records as observations. Its summaries are written by the study's
``DriftingModel`` (same drop, merge and invent rates as the other policies).

Its habits, in the order it works through a nudge:

1. **Summarize, folding in its earlier summaries** (the bad habit every framework has): it calls
   ``context_summarize`` on the oldest run of observations *plus the live summaries in front of
   it*. The ledger refuses (recorded as ``RewriteRefused``), and the result names the two legal
   moves. It learns for the rest of that nudge — and tries again at the next one.
2. It then summarizes the observations alone; an oversized summary it meets is re-derived
   (``context_recall`` of its originals, ``context_rederive``, then it prunes the recall).
3. When the grounding gate refuses a summary, it drops the lines stating what the error names and
   sends it again; if nothing is left to drop it leaves that run alone.
4. Still above the low-water mark: it prunes old tool exchanges (call and output leave together),
   then its oldest summaries.
5. It answers in one line when the buffer is at the target, or when it has nothing left to do.

What it cannot parse from text it reads from the session directly (which spans are live, the text
of a recalled original): a real model reads the same things from its rendered context and the
recall's result. Every edit it makes goes through the tools.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Protocol

from engine.agent import NUDGE_META, Reply, ToolCall
from engine.compaction import turn_starts
from engine.demo.simmodel import DriftingModel
from engine.spans import Span

if TYPE_CHECKING:
    from engine.session import Session

__all__ = ["SimulatedEditor", "EditorLimits"]

_QUOTED = re.compile(r"'([^'\n]{1,80})'|\"([^\"\n]{1,80})\"")
MIN_RUN_TOKENS = 1_600  # a run smaller than twice a summary saves nothing


class EditorLimits(Protocol):
    """The numbers the editor works to, read-only (the study's ``StudyConfig`` has them all)."""

    @property
    def low_tokens(self) -> int: ...  # edit until the buffer is at or below this

    @property
    def keep_last_turns(self) -> int: ...  # the newest turns are never summarized or pruned

    @property
    def summary_tokens(self) -> int: ...  # budget of one summary of a run of observations

    @property
    def max_input_tokens(self) -> int: ...  # largest run summarized at once

    @property
    def derived_max_tokens(self) -> int: ...  # a summary above this is re-derived from its originals...

    @property
    def derived_target_tokens(self) -> int: ...  # ...to about this size


class SimulatedEditor:
    """A scripted-by-habit model for ``engine.agent.Agent`` (``format = "openai"``)."""

    format = "openai"

    def __init__(self, model: DriftingModel, config: EditorLimits, session: Session):
        self.model = model
        self.config = config
        self.session = session
        self.name = model.name
        self.calls = 0  # model turns (respond calls)
        self.tool_calls = 0
        self._n = 0
        self._sent: dict[str, dict[str, Any]] = {}  # call id -> what it meant
        self._episode = -1
        self._learned = False
        self._skip: set[str] = set()
        self._tried: set[str] = set()  # derived spans it already tried to shrink this nudge
        self._queue: list[Any] = []  # the next turns: a list of calls, or a function that plans them

    def __repr__(self) -> str:
        return f"SimulatedEditor({self.model!r})"

    # -- the ChatModel protocol ---------------------------------------------------------------------

    def respond(self, rendered: Any, tools: list[dict[str, Any]]) -> Reply:
        self.calls += 1
        offered = {(t.get("function") or {}).get("name") or t.get("name") for t in tools}
        if "context_summarize" not in offered:
            return Reply(text="I have no tools to edit my context with.")
        self._new_nudge()
        self._read_results(rendered)
        batch = self._queue.pop(0) if self._queue else self._plan()
        if callable(batch):
            batch = batch()
        if not batch:
            return Reply(text=f"Context edited: {self.session.tokens:,} tokens live now.")
        self.tool_calls += len(batch)
        return Reply(tool_calls=tuple(batch))

    # -- state --------------------------------------------------------------------------------------

    def _new_nudge(self) -> None:
        """A fresh nudge (the newest one in the buffer) starts a new episode: habits come back."""
        newest = next(
            (s.id for s in reversed(self.session.spans()) if s.observed and s.meta.get("ctxledger") == NUDGE_META), None
        )
        if newest != self._episode:
            self._episode = newest
            self._learned = False
            self._skip.clear()
            self._tried.clear()
            self._queue.clear()

    def _call(self, name: str, intent: dict[str, Any], **arguments: Any) -> ToolCall:
        self._n += 1
        cid = f"sim_{self._n:05d}"
        self._sent[cid] = {"name": name, **intent, "arguments": arguments}
        return ToolCall(cid, name, json.dumps(arguments))

    def _read_results(self, rendered: Any) -> None:
        """React to the results of its previous calls (the tool messages at the end)."""
        results: dict[str, str] = {}
        for m in reversed(rendered):
            if m.get("role") != "tool":
                break
            results[m.get("tool_call_id", "")] = m.get("content") or ""
        for cid, text in results.items():
            sent = self._sent.pop(cid, None)
            if sent is None:
                continue
            if not self._failed(cid):
                continue
            if sent["name"] == "context_summarize":
                self._summarize_refused(sent, text)
            elif sent["name"] == "context_rederive":
                self._rederive_refused(sent, text)
            else:
                self._skip.update(sent.get("spans", ()))

    def _failed(self, call_id: str) -> bool:
        for s in reversed(self.session.spans()):
            if s.kind == "tool_result" and s.meta.get("tool_call_id") == call_id:
                return bool(s.meta.get("is_error"))
        return False

    def _summarize_refused(self, sent: dict[str, Any], text: str) -> None:
        ids = sent["arguments"]["span_ids"]
        derived = [i for i in ids if i.startswith("d")]
        if derived:
            # The ledger refused a summary of its own summaries: it learns (for this nudge) and
            # takes one of the two legal moves the refusal names: it re-derives the largest of
            # them from its originals, to the size a re-derived summary should have.
            self._learned = True
            live = self.session.state.live
            candidates = [live[i] for i in derived if i in live and i not in self._tried and i not in self._skip]
            if candidates:
                largest = max(candidates, key=lambda sp: sp.tokens)
                if largest.tokens > self.config.derived_target_tokens:
                    self._tried.add(largest.id)
                    self._queue[0:0] = self._shrink(largest)
            return
        fixed = _without(sent["arguments"]["summary"], _values(text))
        if fixed is None or sent.get("retried"):
            self._skip.update(ids)
            return
        args = dict(sent["arguments"], summary=fixed)
        self._queue.insert(0, [self._call("context_summarize", {"retried": True, "spans": ids}, **args)])

    def _rederive_refused(self, sent: dict[str, Any], text: str) -> None:
        span_id = sent["arguments"]["span_id"]
        fixed = _without(sent["arguments"]["summary"], _values(text))
        if fixed is None or sent.get("retried"):
            self._skip.add(span_id)
            return
        args = dict(sent["arguments"], summary=fixed)
        self._queue.insert(0, [self._call("context_rederive", {"retried": True, "spans": [span_id]}, **args)])

    # -- planning -----------------------------------------------------------------------------------

    def _plan(self) -> list[ToolCall]:
        cfg = self.config
        s = self.session
        if s.tokens <= cfg.low_tokens:
            return []
        spans = s.spans()
        protect = _protect_from(spans, cfg.keep_last_turns)
        old = [sp for sp in spans[:protect] if not (sp.observed and sp.role == "system")]
        # an oversized summary: recall its originals, re-derive it smaller, prune the recall
        for sp in old:
            if sp.derived and sp.tokens > cfg.derived_max_tokens and sp.id not in self._tried and sp.id not in self._skip:
                self._tried.add(sp.id)
                first, *rest = self._shrink(sp)
                self._queue.extend(rest)
                return first
        run, before = self._run(old, protect, spans)
        if run:
            ids = [sp.id for sp in run]
            fold = [] if self._learned else [d.id for d in before]
            inputs = [s.span(i) for i in fold] + run
            summary = self.model.rewrite(inputs, max_tokens=cfg.summary_tokens)
            why = (
                f"over the high-water mark: {len(run)} old observations ({sum(x.tokens for x in run):,} tokens)"
                + (f" and my earlier summaries {', '.join(fold)}" if fold else "")
                + " into one summary"
            )
            return [self._call("context_summarize", {"spans": fold + ids}, span_ids=fold + ids, summary=summary, reason=why)]
        return self._prunes(old)

    def _shrink(self, span: Span) -> list[Any]:
        """Two turns: recall the originals; then re-derive from them and prune the recall."""
        cfg = self.config
        recall = self._call("context_recall", {"spans": [span.id]}, span_id=span.id)

        def then() -> list[ToolCall]:
            originals = self.session.originals(span.id)  # what the recall returned, as spans
            text = self.model.rewrite(originals, max_tokens=cfg.derived_target_tokens)
            batch = [
                self._call(
                    "context_rederive",
                    {"spans": [span.id]},
                    span_id=span.id,
                    summary=text,
                    reason=(
                        f"{span.id} is {span.tokens:,} tokens; re-derived from its {len(originals)} original "
                        f"observations to about {cfg.derived_target_tokens}"
                    ),
                )
            ]
            shown = self._span_of_call(recall.id)
            if shown:
                batch.append(self._call("context_prune", {"spans": [shown]}, span_ids=[shown], reason="done with the recall"))
            return batch

        return [[recall], then]

    def _span_of_call(self, call_id: str) -> str:
        for sp in reversed(self.session.spans()):
            if sp.kind == "tool_call" and sp.meta.get("tool_call_id") == call_id:
                return sp.id
        return ""

    def _run(self, old: list[Span], protect: int, spans: list[Span]) -> tuple[list[Span], list[Span]]:
        """The oldest run of observed spans (ending at a turn start) and the summaries before it."""
        cfg = self.config
        starts = set(turn_starts(spans))
        index = {sp.id: i for i, sp in enumerate(spans)}
        before: list[Span] = []
        run: list[Span] = []
        tokens = 0
        for sp in old:
            if sp.id in self._skip:
                if run:
                    break
                continue
            if sp.derived:
                if run:
                    break
                before.append(sp)
                continue
            if run and index[sp.id] in starts and tokens + sp.tokens > cfg.max_input_tokens:
                break
            run.append(sp)
            tokens += sp.tokens
        # end at a turn boundary, so no tool call is separated from its output
        while run and index[run[-1].id] + 1 < len(spans) and index[run[-1].id] + 1 not in starts and not spans[index[run[-1].id] + 1].derived:
            if index[run[-1].id] + 1 >= protect:
                break
            nxt = spans[index[run[-1].id] + 1]
            if nxt.id in self._skip:
                break
            run.append(nxt)
            tokens += nxt.tokens
        while run and index[run[-1].id] + 1 < len(spans) and index[run[-1].id] + 1 not in starts and not spans[index[run[-1].id] + 1].derived:
            tokens -= run.pop().tokens
        if tokens < MIN_RUN_TOKENS:
            return [], []
        return run, before[-3:]

    def _prunes(self, old: list[Span]) -> list[ToolCall]:
        """Old tool exchanges first, then its oldest summaries, until the buffer is at the target."""
        cfg = self.config
        excess = self.session.tokens - cfg.low_tokens
        calls: list[ToolCall] = []
        by_call: dict[str, list[Span]] = {}
        for sp in old:
            if sp.observed and sp.kind in ("tool_call", "tool_result"):
                by_call.setdefault(sp.meta.get("tool_call_id", ""), []).append(sp)
        for group in by_call.values():
            if excess <= 0:
                break
            if any(sp.id in self._skip for sp in group):
                continue
            size = sum(sp.tokens for sp in group)
            if size < 100:
                continue
            head = group[0]
            calls.append(
                self._call(
                    "context_prune",
                    {"spans": [sp.id for sp in group]},
                    span_ids=[head.id],
                    reason=f"old tool exchange {head.meta.get('name', '')} ({size:,} tokens) no longer needed",
                )
            )
            excess -= size
        for sp in old:
            if excess <= 0:
                break
            if sp.derived and sp.id not in self._skip:
                calls.append(
                    self._call("context_prune", {"spans": [sp.id]}, span_ids=[sp.id], reason=f"oldest summary {sp.id} ({sp.tokens:,} tokens): over budget")
                )
                excess -= sp.tokens
        return calls[:24]


def _protect_from(spans: list[Span], k: int) -> int:
    starts = turn_starts(spans)
    return starts[-k] if len(starts) >= k else 0


def _values(text: str) -> list[str]:
    return [a or b for a, b in _QUOTED.findall(text)]


def _without(summary: str, values: list[str]) -> str | None:
    """The summary without the lines stating any of ``values``; None when nothing would change."""
    values = [v for v in values if v.strip()]
    if not values:
        return None
    lines = summary.splitlines()
    kept = [ln for ln in lines if not any(v in ln for v in values)]
    if len(kept) == len(lines) or not any(ln.startswith(("- ", "* ")) for ln in kept):
        return None
    return "\n".join(kept)
