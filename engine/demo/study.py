"""The 40-cycle drift study: one synthetic workload, four compaction policies, scored against the
ground truth after every cycle.

- ``prune-only``: the real ``Compactor`` with the ``prune-only`` policy (elide old tool outputs,
  then prune the oldest spans). Nothing is ever rewritten.
- ``naive``: recursive summarization, what most agent frameworks do: above the high-water mark,
  everything but the last turns — *including the previous summary* — is summarized into a new
  summary. It runs in a permissive session (``strict=False``), so the ledger records every
  summary-of-a-summary as a violation with its chain depth as the generation, and the audit and
  blame can examine what happened.
- ``guarded``: the real ``Compactor`` with the simulated model as its rewriter: it rewrites the
  oldest run of observed spans once, re-derives an oversized summary from its ORIGINAL observations,
  and runs every rewrite through the grounding gate (a refusal is recorded, and the model is asked
  again at the next step).
- ``model-driven``: the model edits its own buffer. Above the high-water mark the agent loop
  (``engine.agent``) records a budget nudge and the model answers with calls to the context tools
  (``engine.tools``), executed against the ledger through ``ContextTools.call`` and recorded as
  observations. The simulated editor (``editor.SimulatedEditor``) has the habit every framework
  has — it tries to summarize its own summaries — so the ledger refuses (recorded), and it re-derives
  or prunes instead. Its numbers come from that real tool path.

With ``model=RealModel("openai:NAME")`` (or ``anthropic:NAME``) a real model is the summarizer of the
naive and guarded runs (through the rewriter adapters) and the editor of the model-driven run
(through ``engine.agent``); invented specifics are then counted by the grounding check of every live
summary against its original observations, and merges are not measured.

All runs see the same observations with the same token counts, and each has its own
simulated model with the same seed and error rates. Nothing depends on the clock: the same
``StudyConfig`` gives the same numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from engine.compaction import turn_starts
from engine.demo.simmodel import DriftingModel
from engine.demo.workload import Workload, generate
from engine.errors import GroundingError
from engine.events import Pruned, Rederived, RewriteRefused, Rewritten

if TYPE_CHECKING:
    from engine.ledger import Ledger
    from engine.session import Session

__all__ = [
    "POLICIES",
    "RealModel",
    "StudyConfig",
    "CycleMetrics",
    "Invention",
    "RunResult",
    "StudyResult",
    "run_study",
    "session_names",
    "measure",
]

POLICIES = ("prune-only", "naive", "guarded", "model-driven")


@dataclass(frozen=True)
class StudyConfig:
    """Everything that decides the study's numbers."""

    seed: int = 7
    cycles: int = 40
    budget: int = 200_000
    high_water: float = 0.70
    low_water: float = 0.50
    keep_last_turns: int = 8
    drop: float = 0.10  # the model loses a fact it read
    merge: float = 0.15  # the model collapses two distinct events of one kind
    invent: float = 0.20  # the model states a specific no observation contains (per call)
    scale: float = 1.9  # bulk of tool outputs: about 18k tokens a cycle
    summary_tokens: int = 800  # guarded: budget of one summary of a run of observations
    max_input_tokens: int = 32_000  # guarded: largest run handed to the model at once
    derived_max_tokens: int = 450  # guarded: a summary above this is re-derived from its originals
    derived_target_tokens: int = 300
    naive_summary_tokens: int = 4_000  # naive: budget of the rolling summary
    attempts: int = 3  # guarded: steps per cycle when the gate refused a rewrite
    agent_steps: int = 16  # model-driven: model turns per nudge at most

    def __post_init__(self) -> None:
        for what in ("seed", "cycles", "budget", "keep_last_turns", "summary_tokens", "naive_summary_tokens", "attempts", "agent_steps"):
            v = getattr(self, what)
            if isinstance(v, bool) or not isinstance(v, int) or (v < 1 and what != "seed") or (what == "seed" and v < 0):
                raise ValueError(f"{what} must be a positive int; got {v!r}")
        for what in ("drop", "merge", "invent"):
            v = getattr(self, what)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ValueError(f"{what} must be a probability in [0, 1]; got {v!r}")

    @property
    def high_tokens(self) -> int:
        return int(self.budget * self.high_water)

    @property
    def low_tokens(self) -> int:
        return int(self.budget * self.low_water)


@dataclass
class CycleMetrics:
    """The state of one run's buffer at the end of a cycle (after its compaction)."""

    cycle: int
    position: int
    live_tokens: int
    derived_tokens: int
    facts_seen: int  # ground-truth facts observed so far
    facts_retained: int  # of those, still stated verbatim in the live buffer
    invented: int  # invented statements live in the buffer
    merged: int  # live statements that collapse two or more distinct events into one
    compactions: int  # compaction steps that did something, so far
    rewrites: int
    rederives: int
    prunes: int
    refused: int  # rewrites refused (gate or policy), so far
    violations: int  # summaries of summaries, so far (permissive sessions only)
    max_generation: int
    live_spans: int

    @property
    def retention(self) -> float:
        return self.facts_retained / self.facts_seen if self.facts_seen else 1.0


@dataclass
class Invention:
    """One specific the model made up, and what became of it."""

    text: str
    kind: str
    position: int  # the first event that carried it (a rewrite, or a refused rewrite)
    event: str  # Rewritten | Rederived | RewriteRefused
    cycle: int
    in_buffer: bool  # live at the end of the run
    later_rewrites: tuple[int, ...] = ()  # positions of the rewrites after it that consumed its span
    carried_by: tuple[int, ...] = ()  # of those, the ones whose text states it again

    @property
    def survived_every_rewrite(self) -> bool:
        return bool(self.later_rewrites) and self.carried_by == self.later_rewrites


@dataclass
class RunResult:
    policy: str
    session: str
    strict: bool
    cycles: list[CycleMetrics] = field(default_factory=list)
    inventions: list[Invention] = field(default_factory=list)
    model_calls: int = 0
    model_drops: int = 0
    model_merges: int = 0
    model_inventions: int = 0
    summary_tokens_written: int = 0  # tokens of every summary the ledger accepted
    tool_calls: int = 0  # model-driven: context_* calls the model made
    tool_errors: int = 0  # of those, the ones answered with an error (refusals included)
    nudges: int = 0  # model-driven: budget nudges the loop recorded
    model: str = ""  # who summarized / edited: the simulated model's name, or provider:NAME
    peak_tokens: int = 0
    seconds: float = 0.0
    positions: dict[str, int] = field(default_factory=dict)  # mark label -> position

    @property
    def final(self) -> CycleMetrics:
        return self.cycles[-1]

    @property
    def mean_tokens(self) -> int:
        """Live tokens at the end of a cycle, averaged over the cycles."""
        return round(sum(c.live_tokens for c in self.cycles) / len(self.cycles)) if self.cycles else 0

    def headline(self) -> Invention | None:
        """The invention the story is about: the earliest one still live at the end."""
        live = [i for i in self.inventions if i.in_buffer and i.event != "RewriteRefused"]
        return min(live, key=lambda i: i.position) if live else None


@dataclass
class StudyResult:
    config: StudyConfig
    runs: dict[str, RunResult]
    facts: int
    observations: int
    observed_tokens: int
    counter: str
    store: str
    seconds: float
    model: str = "sim-model"  # the model that produced the numbers
    simulated: bool = True
    base_url: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "config": asdict(self.config),
            "facts": self.facts,
            "observations": self.observations,
            "observed_tokens": self.observed_tokens,
            "token_counter": self.counter,
            "store": self.store,
            "seconds": round(self.seconds, 3),
            "model": self.model,
            "simulated": self.simulated,
            "base_url": self.base_url,
            "runs": {},
        }
        for name, run in self.runs.items():
            d = {
                "session": run.session,
                "strict": run.strict,
                "final": {**asdict(run.final), "retention": round(run.final.retention, 4)},
                "cycles": [{**asdict(c), "retention": round(c.retention, 4)} for c in run.cycles],
                "inventions": [
                    {**asdict(i), "survived_every_rewrite": i.survived_every_rewrite} for i in run.inventions
                ],
                "model": {
                    "name": run.model,
                    "calls": run.model_calls,
                    "tool_calls": run.tool_calls,
                    "tool_errors": run.tool_errors,
                    "nudges": run.nudges,
                    "drops": run.model_drops,
                    "merges": run.model_merges,
                    "inventions": run.model_inventions,
                },
                "summary_tokens_written": run.summary_tokens_written,
                "peak_tokens": run.peak_tokens,
                "mean_tokens": run.mean_tokens,
                "seconds": round(run.seconds, 3),
            }
            out["runs"][name] = d
        return out


@dataclass(frozen=True)
class RealModel:
    """A real model for the study: ``openai:NAME`` (any OpenAI-compatible server at ``base_url``)
    or ``anthropic:NAME``. The summarizer of the naive and guarded runs, the editor of the
    model-driven run."""

    spec: str
    base_url: str | None = None
    api_key: str | None = None
    timeout: float = 120.0
    max_retries: int = 2

    def __post_init__(self) -> None:
        from engine.errors import InvalidInputError

        provider, _, name = str(self.spec).partition(":")
        if provider not in ("openai", "anthropic") or not name:
            raise InvalidInputError(f"--model is openai:NAME or anthropic:NAME; got {self.spec!r}")
        from engine.extras import require

        require(provider, provider, f"--model {self.spec}")  # before the study writes its first run

    @property
    def name(self) -> str:
        return self.spec

    def rewriter(self):
        from engine.rewriters import AnthropicRewriter, OpenAIRewriter

        provider, _, name = self.spec.partition(":")
        cls = OpenAIRewriter if provider == "openai" else AnthropicRewriter
        return _Counted(cls(name, base_url=self.base_url, api_key=self.api_key, timeout=self.timeout,
                            max_retries=self.max_retries, max_tokens=1024))

    def chat(self):
        from engine.agent import chat_model

        return chat_model(self.spec, base_url=self.base_url, api_key=self.api_key, timeout=self.timeout,
                          max_retries=self.max_retries)


class _Counted:
    """A rewriter that counts its calls (the study reports model calls)."""

    def __init__(self, rewriter: Any):
        self.inner = rewriter
        self.name = rewriter.name
        self.calls = 0

    def rewrite(self, spans: Any, *, instruction: str | None = None, max_tokens: int | None = None) -> str:
        self.calls += 1
        return self.inner.rewrite(spans, instruction=instruction, max_tokens=max_tokens)

    __call__ = rewrite


# -- names ------------------------------------------------------------------------------------


def session_names(ledger: Ledger, prefix: str = "demo", policies: tuple[str, ...] = POLICIES) -> dict[str, str]:
    """``demo-prune-only``, ``demo-naive``, ``demo-guarded``, ``demo-model-driven``; with a run number (``demo-naive-2``)
    when any of them is taken — the log is append-only, so a re-run never replaces a session."""
    n = 1
    while True:
        suffix = "" if n == 1 else f"-{n}"
        names = {p: f"{prefix}-{p}{suffix}" for p in policies}
        if not any(name in ledger for name in names.values()):
            return names
        n += 1


# -- scoring ----------------------------------------------------------------------------------


def measure(
    session: Any,
    workload: Workload,
    cycle: int,
    model: DriftingModel | None,
    *,
    grounded_check: bool = False,
    span_of: list[str] | None = None,
) -> dict[str, int]:
    """Score a buffer against the ground truth: facts still stated verbatim, invented and merged
    statements live. A fact is retained when an observation that states it is live, or a live
    summary states it word for word. With the simulated model, its own bookkeeping says which
    lines are invented or merged; with a real one (``grounded_check``), invented counts the distinct
    specifics of live summaries that none of their original observations states. ``span_of[k - 1]``
    is the span that recorded turn ``k`` (default ``o<k>``)."""
    live = session.state.live
    derived = [s for s in live.values() if s.derived]
    derived_text = "\n".join(s.text for s in derived)
    seen = workload.facts_until(cycle)
    retained = 0
    for f in seen:
        homes = workload.homes[f.id]
        if (
            any((span_of[o - 1] if span_of is not None else f"o{o}") in live for o in homes)
            or (derived_text and f.statement in derived_text)
        ):
            retained += 1
    invented = merged = 0
    if model is None and derived and grounded_check:
        from projections.grounding import gate_findings

        for sp in derived:
            originals = [o.text for o in session.originals(sp.id)]
            invented += len({f["value"] for f in gate_findings(sp.text, originals)})
    if model is not None and derived:
        for s in derived:
            for line in s.text.splitlines():
                claim = model.ledger.get(line[2:]) if line.startswith("- ") else None
                if claim is None:
                    continue
                if claim.origin == "invented":
                    invented += 1
                elif claim.origin == "merged":
                    merged += 1
    return {
        "facts_seen": len(seen),
        "facts_retained": retained,
        "invented": invented,
        "merged": merged,
        "derived_tokens": sum(s.tokens for s in derived),
        "max_generation": max((s.generation for s in live.values()), default=0),
        "live_spans": len(live),
    }


# -- policies ---------------------------------------------------------------------------------


class NaiveSummarizer:
    """Recursive summarization as agent frameworks do it: above the high-water mark, summarize
    [previous summary + every turn but the last few] into one new summary, sized so the buffer
    drops to the low-water mark. Needs a permissive session: the ledger records each
    summary-of-a-summary as a violation (generation = chain depth) instead of refusing it."""

    name = "naive"

    def __init__(self, model: DriftingModel, config: StudyConfig):
        self.model = model
        self.config = config

    def step(self, session: Session) -> int:
        cfg = self.config
        if session.tokens <= cfg.high_tokens:
            return 0
        spans = session.spans()
        starts = turn_starts(spans)
        protect = starts[-cfg.keep_last_turns] if len(starts) >= cfg.keep_last_turns else 0
        keep_budget = max(0, cfg.low_tokens - cfg.naive_summary_tokens)
        suffix = 0
        cut = protect
        for i in reversed(starts):
            if i > protect:
                continue
            suffix = sum(s.tokens for s in spans[i:])
            cut = i
            if suffix > keep_budget:
                break
        inputs = [s for s in spans[:cut] if not (s.observed and s.role == "system")]
        if not inputs:
            return 0
        text = self.model.rewrite(inputs, max_tokens=cfg.naive_summary_tokens)
        previous = [s.id for s in inputs if s.derived]
        session.rewrite(
            [s.id for s in inputs],
            text,
            by=f"naive-summarizer:{self.model.name}",
            reason=(
                f"naive recursive summarization: {session.tokens:,} live tokens > {cfg.high_tokens:,}; "
                f"summarize {'the previous summary ' + ', '.join(previous) + ' plus ' if previous else ''}"
                f"{len(inputs) - len(previous)} turns into one summary"
            ),
        )
        return 1


def _guarded_compactor(model: DriftingModel, cfg: StudyConfig):
    from engine.compaction import (
        Compactor,
        ElideToolOutputs,
        PruneDerived,
        RewriteOldest,
        ShrinkDerived,
    )

    return Compactor(
        budget=cfg.budget,
        high_water=cfg.high_water,
        low_water=cfg.low_water,
        keep_last_turns=cfg.keep_last_turns,
        strategies=[
            RewriteOldest(model, summary_tokens=cfg.summary_tokens, max_input_tokens=cfg.max_input_tokens),
            ShrinkDerived(cfg.derived_max_tokens, rewriter=model, target_tokens=cfg.derived_target_tokens),
            ElideToolOutputs(older_than_turns=cfg.keep_last_turns),
            PruneDerived(),
        ],
        rewriter=model,
        name="guarded",
        gate=True,
    )


def _prune_only_compactor(cfg: StudyConfig):
    from engine.compaction import policy

    return policy(
        "prune-only",
        budget=cfg.budget,
        high_water=cfg.high_water,
        low_water=cfg.low_water,
        keep_last_turns=cfg.keep_last_turns,
    )


def _compactor_step(compactor: Any, session: Session, attempts: int) -> int:
    """Run compaction steps until one goes through without a refusal (at most ``attempts``: a
    refused rewrite is planned again at the next step, with a fresh call to the model). Returns the
    number of steps that changed the buffer."""
    done = 0
    for _ in range(attempts):
        before, refusals = session.position, session.state.refusals
        try:
            compactor.step(session)
        except GroundingError:
            pass  # recorded as RewriteRefused (with what the gate found); the actions before it stand
        refused = session.state.refusals - refusals
        if session.position - before > refused:
            done += 1
        if not refused:
            break
    return done


# -- running ----------------------------------------------------------------------------------


def run_study(
    ledger: Ledger,
    config: StudyConfig | None = None,
    *,
    names: dict[str, str] | None = None,
    policies: tuple[str, ...] = POLICIES,
    progress: Callable[[int], None] | None = None,
    workload: Workload | None = None,
    model: RealModel | None = None,
) -> StudyResult:
    """Run the workload under each policy into sessions of ``ledger``; ``progress(1)`` after each
    cycle of each run. ``model``: a real model instead of the simulated one."""
    cfg = config or StudyConfig()
    started = time.perf_counter()
    wl = workload or generate(cfg.seed, cfg.cycles, scale=cfg.scale)
    names = names or session_names(ledger, policies=policies)
    turns = wl.turns()
    counter = ledger.counter
    texts = [t.text for t in turns]
    many = getattr(counter, "count_many", None)
    tokens = many(texts) if many is not None else [counter.count(t) for t in texts]
    runs: dict[str, RunResult] = {}
    for p in policies:
        runs[p] = _run_policy(ledger, p, names[p], wl, tokens, cfg, progress, model)
    return StudyResult(
        config=cfg,
        runs=runs,
        facts=len(wl.facts),
        observations=len(turns),
        observed_tokens=sum(tokens),
        counter=getattr(counter, "name", type(counter).__name__),
        store=ledger.display_url,
        seconds=time.perf_counter() - started,
        model=model.name if model is not None else "sim-model",
        simulated=model is None,
        base_url=model.base_url if model is not None else None,
    )


def _stepper(policy: str, model: Any, cfg: StudyConfig, session: Session, run: RunResult,
             real: RealModel | None) -> Callable[[Session], int]:
    """One cycle's compaction under ``policy``: returns the number of steps that changed the buffer."""
    if policy == "naive":
        return NaiveSummarizer(model, cfg).step
    if policy == "model-driven":
        return _model_driven(model, cfg, session, run, real)
    compactor = _prune_only_compactor(cfg) if policy == "prune-only" else _guarded_compactor(model, cfg)
    attempts = 1 if policy == "prune-only" else cfg.attempts

    def step(session: Session) -> int:
        return _compactor_step(compactor, session, attempts)

    return step


def _model_driven(model: Any, cfg: StudyConfig, session: Session, run: RunResult,
                  real: RealModel | None) -> Callable[[Session], int]:
    """Above the high-water mark, the agent loop nudges the model and executes its context_* calls."""
    from engine.agent import Agent
    from engine.demo.editor import SimulatedEditor

    editor = real.chat() if real is not None else SimulatedEditor(model, cfg, session)
    agent = Agent(session, editor, budget=cfg.budget, high_water=cfg.high_water, low_water=cfg.low_water,
                  gate=True, max_steps=cfg.agent_steps)

    def step(s: Session) -> int:
        if s.tokens <= cfg.high_tokens:
            return 0
        before = s.position
        result = agent.run()
        run.nudges += result.nudges
        run.model_calls += result.steps
        run.tool_calls += len(result.context_calls)
        run.tool_errors += sum(1 for c in result.context_calls if c.is_error)
        edits = sum(1 for c in result.context_calls if not c.is_error and c.call.name in _EDITS)
        return 1 if edits and s.position > before else 0

    return step


_EDITS = ("context_prune", "context_summarize", "context_rederive", "context_restore")


def _run_policy(
    ledger: Ledger,
    policy: str,
    name: str,
    wl: Workload,
    tokens: list[int],
    cfg: StudyConfig,
    progress: Callable[[int], None] | None,
    real: RealModel | None = None,
) -> RunResult:
    started = time.perf_counter()
    strict = policy != "naive"
    if policy == "prune-only":
        model = None
    elif real is not None:
        model = real.rewriter() if policy != "model-driven" else None
    else:
        model = DriftingModel(wl, seed=cfg.seed, drop=cfg.drop, merge=cfg.merge, invent=cfg.invent)
    sim = model if isinstance(model, DriftingModel) else None
    s = ledger.create_session(
        name,
        strict=strict,
        by="ctxledger demo",
        reason=(
            f"drift study seed={cfg.seed} cycles={cfg.cycles} budget={cfg.budget} policy={policy} "
            + (f"drop={cfg.drop} merge={cfg.merge} invent={cfg.invent}" if real is None else f"model={real.name}")
        ),
    )
    run = RunResult(policy=policy, session=name, strict=strict,
                    model="" if policy == "prune-only" else (real.name if real is not None else "sim-model"))
    stepper = _stepper(policy, model, cfg, s, run, real)
    turns = wl.turns()
    k = 0
    compactions = 0
    span_of: list[str] = []  # turn k is recorded by span span_of[k - 1]
    with s.batch():
        t = turns[0]
        span_of.append(s.observe(t.text, role=t.role, kind=t.kind, meta=t.meta, tokens=tokens[0], by="workload").id)
        k = 1
    if sim is not None and policy == "model-driven":
        sim.turn_of = {span_of[0]: 1}
    for cycle in wl.cycles:
        with s.batch():
            for t in cycle.turns:
                sid = s.observe(t.text, role=t.role, kind=t.kind, meta=t.meta, tokens=tokens[k], by="workload").id
                span_of.append(sid)
                if sim is not None and sim.turn_of is not None:
                    sim.turn_of[sid] = k + 1
                k += 1
            run.peak_tokens = max(run.peak_tokens, s.tokens)
            compactions += stepper(s)
            label = f"cycle-{cycle.number}"
            run.positions[label] = s.mark(label, by="ctxledger demo")
        counts = _event_counts(s, run)
        m = measure(s, wl, cycle.number, sim, grounded_check=real is not None and policy != "prune-only", span_of=span_of)
        run.cycles.append(
            CycleMetrics(
                cycle=cycle.number,
                position=s.position,
                live_tokens=s.tokens,
                compactions=compactions,
                refused=s.state.refusals,
                violations=s.state.violations,
                **counts,
                **m,
            )
        )
        if progress is not None:
            progress(1)
    if sim is not None:
        if policy != "model-driven":
            run.model_calls = sim.calls
        run.model_drops, run.model_merges = sim.drops, sim.merges
        run.model_inventions = len(sim.inventions)
        run.inventions = _trace_inventions(s, sim, run)
    elif model is not None:
        run.model_calls = getattr(model, "calls", 0) or run.model_calls
    run.seconds = time.perf_counter() - started
    return run


def _event_counts(s: Session, run: RunResult) -> dict[str, int]:
    """Rewrites, re-derivations and prunes so far, read from the log since the previous cycle."""
    last = run.cycles[-1] if run.cycles else None
    counts = {
        "rewrites": last.rewrites if last else 0,
        "rederives": last.rederives if last else 0,
        "prunes": last.prunes if last else 0,
    }
    start = (last.position + 1) if last else 1
    for ev in s.events(start) if start <= s.position else ():
        t = type(ev)
        if t is Rewritten:
            counts["rewrites"] += 1
            run.summary_tokens_written += ev.tokens
        elif t is Rederived:
            counts["rederives"] += 1
            run.summary_tokens_written += ev.tokens
        elif t is Pruned:
            counts["prunes"] += 1
    return counts


def _trace_inventions(s: Session, model: DriftingModel, run: RunResult) -> list[Invention]:
    """Where each invented statement first appeared in the log, and whether every later rewrite
    that consumed it carried it on."""
    texts = {i.text: i for i in model.inventions}
    first: dict[str, tuple[int, str]] = {}
    owner: dict[str, str] = {}  # invention -> span id whose text states it (latest)
    consumed: dict[str, list[int]] = {t: [] for t in texts}
    carried: dict[str, list[int]] = {t: [] for t in texts}
    for ev in s.events():
        t = type(ev)
        if t not in (Rewritten, Rederived, RewriteRefused):
            continue
        text = ev.text
        pos = ev.originator_version
        if t is Rewritten:
            for inv, span_id in list(owner.items()):
                if span_id in ev.inputs:
                    consumed[inv].append(pos)
                    if inv in text:
                        carried[inv].append(pos)
                        owner[inv] = ev.span_id
                    else:
                        del owner[inv]
        for inv in texts:
            if inv in text and inv not in first:
                first[inv] = (pos, t.__name__)
                if t is not RewriteRefused:
                    owner[inv] = ev.span_id
    live_text = "\n".join(sp.text for sp in s.state.live.values() if sp.derived)
    cycle_of = sorted((p, int(label.split("-")[1])) for label, p in run.positions.items())
    out = []
    for inv, claim in texts.items():
        if inv not in first:
            continue  # invented in a summary that was never written (e.g. cut by its budget)
        pos, event = first[inv]
        cycle = next((c for p, c in cycle_of if p >= pos), cycle_of[-1][1] if cycle_of else 0)
        out.append(
            Invention(
                text=inv,
                kind=claim.kind,
                position=pos,
                event=event,
                cycle=cycle,
                in_buffer=inv in live_text,
                later_rewrites=tuple(consumed[inv]),
                carried_by=tuple(carried[inv]),
            )
        )
    out.sort(key=lambda i: i.position)
    return out
