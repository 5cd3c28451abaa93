"""Compaction policies: when to compact, what to compact, and why — every decision an event.

    compactor = Compactor(budget=200_000, high_water=0.70, low_water=0.50, keep_last_turns=8)
    compactor.plan(session)   # what it would do, writing nothing
    compactor.step(session)   # do it: prune / rewrite / rederive through the Session API

A step is due when live tokens exceed the high-water mark (or a strategy has its own trigger, like
an oversized summary); it then runs its strategies in order until the projected live tokens reach
the low-water mark. The system prompt and the last K turns are never touched. Strategies only hand
ORIGINAL observed spans to a rewriter: a summary is pruned or re-derived from its originals, never
summarized again.

Every command carries ``by="compactor:<strategy>"`` and a reason naming the trigger and the
strategy, so the log explains each compaction. A step costs O(live buffer): it reads the session's
state, never scans the log (a re-derivation reads its originals by position).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from engine.errors import InvalidInputError
from engine.rewriter_call import call_rewriter
from engine.rewriters import ExtractiveRewriter, Rewriter
from engine.spans import Span

if TYPE_CHECKING:
    from engine.reading import LogReader
    from engine.session import Session

__all__ = [
    "turn_starts",
    "Compactor",
    "Action",
    "Plan",
    "StepResult",
    "Strategy",
    "ElideToolOutputs",
    "RewriteOldest",
    "ShrinkDerived",
    "PruneDerived",
    "PruneOldest",
    "POLICIES",
    "policy",
]


class Action(msgspec.Struct, frozen=True, kw_only=True):
    """One command a compaction step issues (planned, or carried out with ``position`` set)."""

    strategy: str
    command: str  # prune | rewrite | rederive
    span_ids: tuple[str, ...]
    tokens_removed: int  # live tokens the command takes out of the buffer
    tokens_added: int = 0  # tokens of the new text (planned: the budget given to the rewriter)
    reason: str = ""
    result: str = ""  # the span the command produced (rewrite: the new dN; rederive: the same dN)
    position: int = 0  # the event that carried it out; 0 while planned


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    session: str
    position: int
    live_tokens: int
    budget: int
    high_water: int
    low_water: int
    triggers: tuple[str, ...] = ()
    actions: tuple[Action, ...] = ()
    projected_tokens: int = 0
    note: str = ""

    @property
    def triggered(self) -> bool:
        return bool(self.triggers)


class StepResult(msgspec.Struct, frozen=True, kw_only=True):
    session: str
    position_before: int
    position_after: int
    tokens_before: int
    tokens_after: int
    triggers: tuple[str, ...] = ()
    actions: tuple[Action, ...] = ()  # the commands carried out, in order
    note: str = ""

    @property
    def compacted(self) -> bool:
        return bool(self.actions)


# -- the planning context: a simulation of the live buffer, no writes ----------------------------------


class Context:
    """What strategies see while planning: the live spans, what earlier actions already took out,
    the projected tokens, the target and the protected region."""

    def __init__(self, spans: list[Span], tokens: int, compactor: Compactor, budget_trigger: str):
        self.spans = spans
        self.projected = tokens
        self.target = compactor.low_water_tokens
        self.compactor = compactor
        self.budget_trigger = budget_trigger  # "" when the budget did not trigger
        self.taken: set[str] = set()
        self.actions: list[Action] = []
        # Buffer order as an index into the sorted live spans (a derived span's order is a min over
        # its sources: computing it once per step keeps planning linear in the live buffer).
        self.index = {s.id: i for i, s in enumerate(spans)}
        self._results: dict[str, list[Span]] | None = None
        self._turn_starts = turn_starts(spans)
        self.protect_from = self.turn_boundary(compactor.keep_last_turns)

    def results_of(self, call_ids: set) -> list[Span]:
        """Live observed tool results answering any of ``call_ids``."""
        if not call_ids:
            return []
        if self._results is None:
            self._results = {}
            for s in self.spans:
                if s.observed and s.kind == "tool_result":
                    self._results.setdefault(s.meta.get("tool_call_id"), []).append(s)
        return [r for cid in call_ids for r in self._results.get(cid, ())]

    @property
    def over_target(self) -> bool:
        return bool(self.budget_trigger) and self.projected > self.target

    def turn_boundary(self, k: int) -> int:
        """Index of the span where the last ``k`` turns begin (everything at or after it is younger)."""
        if k <= 0:
            return 1 << 62
        if len(self._turn_starts) < k:
            return -1  # fewer than k turns: everything is recent
        return self._turn_starts[-k]

    def available(self, s: Span) -> bool:
        """Not yet taken by an earlier action, not the system prompt, not in the last K turns."""
        return (
            s.id not in self.taken
            and not (s.observed and s.role == "system")
            and self.index[s.id] < self.protect_from
        )

    def add(self, action: Action) -> None:
        self.actions.append(action)
        self.taken.update(action.span_ids)
        self.projected += action.tokens_added - action.tokens_removed


def turn_starts(spans: list[Span]) -> list[int]:
    """A turn starts at each observed user message and at each assistant step (an assistant span
    that does not follow another assistant span): tool results belong to the step that called them."""
    starts: list[int] = []
    prev_assistant = False
    for i, s in enumerate(spans):
        if not s.observed:
            prev_assistant = False
            continue
        if s.role == "user" and s.kind == "message":
            starts.append(i)
        elif s.role == "assistant" and not prev_assistant:
            starts.append(i)
        prev_assistant = s.role == "assistant"
    return starts


def _budget_reason(ctx: Context, what: str) -> str:
    return f"trigger: {ctx.budget_trigger}; strategy: {what}"


# -- strategies --------------------------------------------------------------------------------------


class Strategy(Protocol):
    name: str

    def triggers(self, ctx: Context) -> list[str]: ...

    def propose(self, ctx: Context) -> None: ...


class _Base:
    name = "strategy"

    def triggers(self, ctx: Context) -> list[str]:
        return []

    def _prune(self, ctx: Context, span: Span, reason: str) -> None:
        """Propose pruning one span (every strategy's prunes look alike apart from the reason)."""
        ctx.add(Action(strategy=self.name, command="prune", span_ids=(span.id,), tokens_removed=span.tokens, reason=reason))

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


def _positive_int(value: Any, what: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInputError(f"{what} must be an int >= {minimum}; got {value!r}")
    return value


class ElideToolOutputs(_Base):
    """Prune tool outputs older than N turns, oldest first; the call stays and renders with a
    placeholder result naming the span to restore (what the providers' own context editing does)."""

    name = "elide-tool-outputs"

    def __init__(self, older_than_turns: int = 8, min_tokens: int = 100):
        self.older_than_turns = _positive_int(older_than_turns, "older_than_turns", 0)
        self.min_tokens = _positive_int(min_tokens, "min_tokens", 0)

    def propose(self, ctx: Context) -> None:
        if not ctx.over_target:
            return
        boundary = ctx.turn_boundary(self.older_than_turns)
        what = f"{self.name} older than {self.older_than_turns} turns"
        for i, s in enumerate(ctx.spans):
            if not ctx.over_target or i >= boundary:
                break
            if s.observed and s.kind == "tool_result" and s.tokens >= self.min_tokens and ctx.available(s):
                self._prune(ctx, s, _budget_reason(ctx, f"{what}: {s.id} ({s.tokens:,} tokens of tool output)"))


class RewriteOldest(_Base):
    """Rewrite the oldest run of live observed generation-0 spans into one derived span.

    A run never crosses a derived span, the system prompt or the last K turns, never separates a
    tool call from its live result, and holds at most ``max_input_tokens``. Runs too small to save
    anything (under twice the summary budget) are left alone."""

    name = "rewrite-oldest"

    def __init__(
        self,
        rewriter: Rewriter | Callable[[list[Span]], str] | None = None,
        *,
        summary_tokens: int = 800,
        max_input_tokens: int = 32_000,
        max_rewrites: int = 4,
        instruction: str | None = None,
    ):
        self.rewriter = rewriter or ExtractiveRewriter()
        self.summary_tokens = _positive_int(summary_tokens, "summary_tokens", 16)
        self.max_input_tokens = _positive_int(max_input_tokens, "max_input_tokens")
        self.max_rewrites = _positive_int(max_rewrites, "max_rewrites")
        self.instruction = instruction

    def _runs(self, ctx: Context) -> list[list[Span]]:
        runs: list[list[Span]] = []
        current: list[Span] = []
        for i, s in enumerate(ctx.spans):
            if i >= ctx.protect_from:
                break
            if s.id in ctx.taken:
                continue  # an elided output: the run goes on around it
            if ctx.available(s) and s.observed and s.generation == 0:
                current.append(s)
            elif current:
                runs.append(current)
                current = []
        if current:
            runs.append(current)
        return runs

    def _cut(self, run: list[Span], ctx: Context) -> list[Span]:
        """The oldest part of ``run`` within the input budget, never splitting a live tool pair."""
        at = ctx.index
        chosen: list[Span] = []
        total = 0
        for s in run:
            if chosen and total + s.tokens > self.max_input_tokens:
                break
            chosen.append(s)
            total += s.tokens
        in_run = {s.id for s in run}
        while chosen:
            ids = {s.id for s in chosen}
            open_calls = {s.meta.get("tool_call_id") for s in chosen if s.kind == "tool_call"} - {
                s.meta.get("tool_call_id") for s in chosen if s.kind == "tool_result"
            }
            start = at[chosen[0].id]
            missing = [
                r for r in ctx.results_of(open_calls)
                if r.id not in ctx.taken and r.id not in ids and at[r.id] > start
            ]
            if not missing:
                return chosen
            if all(m.id in in_run for m in missing) and total + sum(m.tokens for m in missing) <= 2 * self.max_input_tokens:
                last = max(at[m.id] for m in missing)
                extra = [s for s in run if s.id not in ids and at[s.id] <= last]
                chosen += extra
                total += sum(s.tokens for s in extra)
                continue
            # a result lies outside the run (e.g. in the protected turns): stop before its call
            missing_ids = {m.meta.get("tool_call_id") for m in missing}
            first_call = min(at[s.id] for s in chosen if s.kind == "tool_call" and s.meta.get("tool_call_id") in missing_ids)
            chosen = [s for s in chosen if at[s.id] < first_call]
            total = sum(s.tokens for s in chosen)
        return chosen

    def propose(self, ctx: Context) -> None:
        done = 0
        for run in self._runs(ctx):
            if not ctx.over_target or done >= self.max_rewrites:
                return
            chosen = self._cut(run, ctx)
            tokens = sum(s.tokens for s in chosen)
            if not chosen or tokens < 2 * self.summary_tokens:
                continue
            ids = tuple(s.id for s in chosen)
            ctx.add(
                Action(
                    strategy=self.name,
                    command="rewrite",
                    span_ids=ids,
                    tokens_removed=tokens,
                    tokens_added=self.summary_tokens,
                    reason=_budget_reason(
                        ctx,
                        f"{self.name}: {len(ids)} observed generation-0 spans "
                        f"({_span_range(chosen)}, {tokens:,} tokens) into one derived span of at most "
                        f"{self.summary_tokens:,} tokens by {_rewriter_name(self.rewriter)}",
                    ),
                )
            )
            done += 1


class ShrinkDerived(_Base):
    """Its own trigger: a derived span over ``max_tokens``. It is re-derived shorter from its ORIGINAL
    observed spans (to ``target_tokens``) or, without a rewriter or when ``prune=True``, pruned."""

    name = "shrink-derived"

    def __init__(
        self,
        max_tokens: int = 2_000,
        *,
        rewriter: Rewriter | Callable[[list[Span]], str] | None = None,
        target_tokens: int | None = None,
        prune: bool = False,
        instruction: str | None = None,
    ):
        self.max_tokens = _positive_int(max_tokens, "max_tokens", 16)
        self.target_tokens = _positive_int(target_tokens or max(16, max_tokens // 2), "target_tokens", 16)
        if self.target_tokens > self.max_tokens:
            raise InvalidInputError("target_tokens must not exceed max_tokens")
        self.rewriter = rewriter
        self.prune = bool(prune)
        self.instruction = instruction

    def _oversized(self, ctx: Context) -> list[Span]:
        return [s for s in ctx.spans if s.derived and s.tokens > self.max_tokens and s.id not in ctx.taken]

    def may_trigger(self, session: LogReader) -> bool:
        return session.state.n_der > 0 and any(
            s.tokens > self.max_tokens and s.derived for s in session.state.live.values()
        )

    def triggers(self, ctx: Context) -> list[str]:
        return [f"{s.id} has {s.tokens:,} tokens > max derived {self.max_tokens:,}" for s in self._oversized(ctx)]

    def propose(self, ctx: Context) -> None:
        for s in self._oversized(ctx):
            trigger = f"trigger: {s.id} has {s.tokens:,} tokens > max derived {self.max_tokens:,}"
            if self.rewriter is not None and not self.prune:
                ctx.add(
                    Action(
                        strategy=self.name,
                        command="rederive",
                        span_ids=(s.id,),
                        tokens_removed=s.tokens,
                        tokens_added=self.target_tokens,
                        reason=f"{trigger}; strategy: {self.name}: re-derive {s.id} from its originals "
                        f"{_ranges(s.sources)} to at most {self.target_tokens:,} tokens by "
                        f"{_rewriter_name(self.rewriter)}",
                    )
                )
            else:
                self._prune(
                    ctx, s, f"{trigger}; strategy: {self.name}: prune {s.id} (its originals {_ranges(s.sources)} stay in the log)"
                )


class PruneDerived(_Base):
    """Last resort under the budget: prune the oldest derived spans (their originals stay in the log)."""

    name = "prune-derived"

    def propose(self, ctx: Context) -> None:
        for s in ctx.spans:
            if not ctx.over_target:
                return
            if s.derived and ctx.available(s):
                self._prune(ctx, s, _budget_reason(ctx, f"{self.name}: oldest summary {s.id} ({s.tokens:,} tokens)"))


class PruneOldest(_Base):
    """Pruning-only compaction: prune the oldest observed spans; a tool call goes together with its
    live results, so pairs leave as a unit."""

    name = "prune-oldest"

    def propose(self, ctx: Context) -> None:
        at = ctx.index
        for s in ctx.spans:
            if not ctx.over_target:
                return
            if not (s.observed and ctx.available(s)):
                continue
            unit = [s]
            if s.kind == "tool_call":
                unit += [
                    r for r in ctx.results_of({s.meta.get("tool_call_id")})
                    if at[r.id] > at[s.id] and r.id not in ctx.taken
                ]
                if any(not ctx.available(r) for r in unit):
                    continue  # its result is in the protected turns: keep the pair whole
            for u in unit:
                with_call = f", with its call {s.id}" if u is not s else ""
                self._prune(ctx, u, _budget_reason(ctx, f"{self.name}: {u.id} ({u.tokens:,} tokens){with_call}"))


def _ranges(ids: Sequence[str]) -> str:
    from engine.render import span_ranges

    return span_ranges(ids) if ids else "-"


def _span_range(spans: list[Span]) -> str:
    return _ranges([s.id for s in spans])


def _rewriter_name(rewriter: Any) -> str:
    return str(getattr(rewriter, "name", "") or getattr(rewriter, "__name__", "") or type(rewriter).__name__)


# -- the compactor -----------------------------------------------------------------------------------


class Compactor:
    """Budget-triggered compaction through a list of strategies, applied in order."""

    def __init__(
        self,
        *,
        budget: int = 200_000,
        high_water: float = 0.70,
        low_water: float = 0.50,
        keep_last_turns: int = 8,
        strategies: Sequence[Strategy] | None = None,
        rewriter: Rewriter | Callable[[list[Span]], str] | None = None,
        name: str = "guarded",
        gate: bool = False,
    ):
        self.budget = _positive_int(budget, "budget")
        for what, v in (("high_water", high_water), ("low_water", low_water)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
                raise InvalidInputError(f"{what} must be a fraction in (0, 1]; got {v!r}")
        if low_water >= high_water:
            raise InvalidInputError(f"low_water ({low_water}) must be below high_water ({high_water})")
        self.high_water = float(high_water)
        self.low_water = float(low_water)
        self.keep_last_turns = _positive_int(keep_last_turns, "keep_last_turns", 0)
        self.rewriter = rewriter or ExtractiveRewriter()
        if strategies is None:
            strategies = _guarded(self.rewriter, keep_last_turns, budget=self.budget)
        strategies = tuple(strategies)
        for st in strategies:
            if not callable(getattr(st, "propose", None)) or not isinstance(getattr(st, "name", None), str):
                raise InvalidInputError(f"{st!r} is not a strategy (it needs a name and propose(ctx))")
        self.strategies = strategies
        self.name = name
        if not isinstance(gate, bool):
            raise InvalidInputError(f"gate must be a bool, not {type(gate).__name__}")
        self.gate = gate  # run every rewrite and rederive through the grounding gate

    def __repr__(self) -> str:
        return (
            f"Compactor({self.name!r}, budget={self.budget:,}, high_water={self.high_water}, "
            f"low_water={self.low_water}, keep_last_turns={self.keep_last_turns}, "
            f"strategies=[{', '.join(s.name for s in self.strategies)}])"
        )

    @property
    def high_water_tokens(self) -> int:
        return int(self.budget * self.high_water)

    @property
    def low_water_tokens(self) -> int:
        return int(self.budget * self.low_water)

    def plan(self, session: LogReader) -> Plan:
        """What ``step`` would do now, without doing it."""
        tokens = session.tokens
        budget_trigger = ""
        if tokens > self.high_water_tokens:
            budget_trigger = (
                f"{tokens:,} live tokens > high-water {self.high_water_tokens:,} "
                f"({self.high_water:.0%} of {self.budget:,}); target low-water {self.low_water_tokens:,} "
                f"({self.low_water:.0%})"
            )
        base = dict(
            session=session.name,
            position=session.position,
            live_tokens=tokens,
            budget=self.budget,
            high_water=self.high_water_tokens,
            low_water=self.low_water_tokens,
            projected_tokens=tokens,
        )
        if not budget_trigger and not self._may_trigger(session):
            return Plan(**base)
        ctx = Context(session.spans(), tokens, self, budget_trigger)
        triggers = ([budget_trigger] if budget_trigger else []) + [t for st in self.strategies for t in st.triggers(ctx)]
        if not triggers:
            return Plan(**base)
        for st in self.strategies:
            st.propose(ctx)
        note = ""
        if ctx.over_target:
            note = (
                f"projected {ctx.projected:,} tokens stay above low-water {self.low_water_tokens:,}: "
                f"the system prompt and the last {self.keep_last_turns} turns are kept, and nothing "
                "else is allowed by the strategies"
            )
        base["projected_tokens"] = ctx.projected
        return Plan(**base, triggers=tuple(triggers), actions=tuple(ctx.actions), note=note)

    def _may_trigger(self, session: LogReader) -> bool:
        """Cheap pre-check (no sort) for strategies with triggers of their own."""
        for st in self.strategies:
            check = getattr(st, "may_trigger", None)
            if check is not None:
                if check(session):
                    return True
            elif getattr(type(st), "triggers", _Base.triggers) is not _Base.triggers:
                return True
        return False

    def step(self, session: Session) -> StepResult:
        """Compact if due: run the plan through the Session API and return what was done.

        Every rewriter runs before anything is written: a rewriter error (timeout, API error, bad
        output) raises ``RewriterError`` and leaves the log unchanged. With ``gate=True`` every
        rewrite and re-derivation goes through the grounding gate: a text stating specifics that none
        of its sources states is refused (``GroundingError``, recorded as ``RewriteRefused``); the
        commands of the step before it stand."""
        plan = self.plan(session)
        before = dict(
            session=session.name,
            position_before=session.position,
            tokens_before=session.tokens,
            triggers=plan.triggers,
            note=plan.note,
        )
        if not plan.actions:
            return StepResult(**before, position_after=session.position, tokens_after=session.tokens)
        texts = self._texts(session, plan)
        actions = [self._check_rederived(session, a, texts.get(i)) for i, a in enumerate(plan.actions)]
        done: list[Action] = []
        with session.batch():
            for i, a in enumerate(actions):
                by = f"compactor:{a.strategy}"
                if a.command == "prune":
                    session.prune(a.span_ids[0], by=by, reason=a.reason)
                    result, added = "", 0
                elif a.command == "rewrite":
                    span = session.rewrite(a.span_ids, texts[i], by=by, reason=a.reason, gate=self.gate)
                    result, added = span.id, span.tokens
                else:
                    span = session.rederive(a.span_ids[0], text=texts[i], by=by, reason=a.reason, gate=self.gate)
                    result, added = span.id, span.tokens
                done.append(msgspec.structs.replace(a, result=result, tokens_added=added, position=session.position))
        return StepResult(**before, position_after=session.position, tokens_after=session.tokens, actions=tuple(done))

    def _check_rederived(self, session: Session, action: Action, text: str | None) -> Action:
        """A re-derivation that came back still over the strategy's limit prunes the summary instead
        (otherwise every step would re-derive it again)."""
        if action.command != "rederive" or text is None:
            return action
        limit = getattr(next((st for st in self.strategies if st.name == action.strategy), None), "max_tokens", None)
        n = session.counter.count(text)
        if limit is None or n <= limit:
            return action
        return msgspec.structs.replace(
            action,
            command="prune",
            tokens_added=0,
            reason=f"{action.reason}; the re-derived text still had {n:,} tokens > {limit:,}, so {action.span_ids[0]} "
            "is pruned instead (its originals stay in the log)",
        )

    def _texts(self, session: Session, plan: Plan) -> dict[int, str]:
        """Call the rewriters for every rewrite and rederive of the plan (nothing is written yet)."""
        texts: dict[int, str] = {}
        strategies = {st.name: st for st in self.strategies}
        for i, a in enumerate(plan.actions):
            if a.command == "prune":
                continue
            st = strategies[a.strategy]
            if a.command == "rewrite":
                sources = [session.span(sid) for sid in a.span_ids]
                what = f"{_span_range(sources)}"
            else:
                sources = session.originals(a.span_ids[0])
                what = f"re-deriving {a.span_ids[0]}"
            texts[i] = call_rewriter(st.rewriter, sources, st.instruction, max_tokens=a.tokens_added,
                                     failing=f"on {what}", output_note=f"(for {what})")
        return texts


# -- named policies (for replay and the CLI) -------------------------------------------------------------


def summary_budget(budget: int) -> int:
    """Tokens for one summary under a context budget: 1/40 of it, between 32 and 800."""
    return min(800, max(32, budget // 40))


def _guarded(rewriter: Any, keep: int, budget: int = 200_000) -> list[Strategy]:
    summary = summary_budget(budget)
    return [
        ElideToolOutputs(older_than_turns=max(keep, 1)),
        RewriteOldest(rewriter, summary_tokens=summary),
        ShrinkDerived(max(16, summary * 5 // 2), rewriter=rewriter, target_tokens=summary),
    ]


def _elide_only(rewriter: Any, keep: int, budget: int = 200_000) -> list[Strategy]:
    return [ElideToolOutputs(older_than_turns=max(keep, 1), min_tokens=0)]


def _prune_only(rewriter: Any, keep: int, budget: int = 200_000) -> list[Strategy]:
    return [ElideToolOutputs(older_than_turns=max(keep, 1)), PruneOldest()]


POLICIES: dict[str, tuple[str, Callable[..., list[Strategy]]]] = {
    "guarded": ("elide old tool outputs, rewrite the oldest observed run, re-derive oversized summaries", _guarded),
    "elide-only": ("elide old tool outputs only", _elide_only),
    "prune-only": ("elide old tool outputs, then prune the oldest spans (tool pairs as units)", _prune_only),
}


def policy(
    name: str = "guarded",
    *,
    budget: int = 200_000,
    high_water: float = 0.70,
    low_water: float = 0.50,
    keep_last_turns: int = 8,
    rewriter: Rewriter | Callable[[list[Span]], str] | None = None,
    gate: bool = False,
) -> Compactor:
    """A named policy as a Compactor: ``guarded`` (default), ``elide-only`` or ``prune-only``."""
    if name not in POLICIES:
        raise InvalidInputError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")
    rewriter = rewriter or ExtractiveRewriter()
    _positive_int(keep_last_turns, "keep_last_turns", 0)
    _positive_int(budget, "budget")
    strategies = POLICIES[name][1](rewriter, keep_last_turns, budget=budget)
    return Compactor(
        budget=budget,
        high_water=high_water,
        low_water=low_water,
        keep_last_turns=keep_last_turns,
        strategies=strategies,
        rewriter=rewriter,
        name=name,
        gate=gate,
    )
