"""Compaction commands: compact (or plan) a session under a policy; replay a session under another."""

from __future__ import annotations

from collections import Counter
from typing import Any

import click

from engine.spans import id_ranges
from engine.cli._app import emit_json, handle_errors, main, open_ledger, progress, to_builtins
from engine.events import Pruned, Rederived, Rewritten


def _policy_options(fn):
    options = [
        click.option("--policy", "policy_name", default="guarded", show_default=True,
                     type=click.Choice(["guarded", "elide-only", "prune-only"]),
                     help="guarded: elide old tool outputs, rewrite the oldest observed run, re-derive "
                          "oversized summaries; elide-only; prune-only."),
        click.option("--budget", type=int, default=200_000, show_default=True, help="Context budget in tokens."),
        click.option("--high", type=float, default=0.70, show_default=True, help="High-water mark (fraction of budget)."),
        click.option("--low", type=float, default=0.50, show_default=True, help="Low-water mark (fraction of budget)."),
        click.option("--keep-turns", type=int, default=8, show_default=True, help="Last turns never touched."),
        click.option("--rewriter", "rewriter_name", default="extractive", show_default=True,
                     type=click.Choice(["extractive", "openai", "anthropic"]), help="Who writes the summaries."),
        click.option("--model", default=None, help="Model for --rewriter openai/anthropic."),
        click.option("--base-url", default=None, help="Server for --rewriter openai/anthropic (e.g. a local vLLM)."),
        click.option("--gate", is_flag=True, help="Refuse (and record) summaries stating specifics no source states."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _compactor(policy_name, budget, high, low, keep_turns, rewriter_name, model, base_url, gate):
    from engine.compaction import policy
    from engine.errors import InvalidInputError
    from engine.rewriters import AnthropicRewriter, ExtractiveRewriter, OpenAIRewriter

    if rewriter_name == "extractive":
        rewriter: Any = ExtractiveRewriter()
    else:
        if not model:
            raise InvalidInputError(f"--rewriter {rewriter_name} needs --model")
        cls = OpenAIRewriter if rewriter_name == "openai" else AnthropicRewriter
        rewriter = cls(model, base_url=base_url)
    return policy(
        policy_name, budget=budget, high_water=high, low_water=low, keep_last_turns=keep_turns,
        rewriter=rewriter, gate=gate,
    )


def _echo_actions(actions) -> None:
    for a in actions:
        ids = id_ranges(a.span_ids) + (f" ({len(a.span_ids)} spans)" if len(a.span_ids) > 4 else "")
        made = f" -> {a.result}" if a.result and a.command == "rewrite" else ""
        at = f"@{a.position} " if a.position else ""
        click.echo(f"  {at}{a.command:<8} {ids}{made}  -{a.tokens_removed:,} +{a.tokens_added:,} tok  [{a.strategy}]")


@main.command("compact")
@click.argument("session")
@_policy_options
@click.option("--plan", "plan_only", is_flag=True, help="Show what would be done; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handle_errors
def compact_cmd(ctx, session, policy_name, budget, high, low, keep_turns, rewriter_name, model, base_url,
                gate, plan_only, as_json) -> None:
    """Compact a session once under a policy (or --plan: show what it would do).

    Every command it issues is an event with its trigger and strategy as the reason.

    \b
    Example:
      ctxledger compact agent-42 --budget 8000 --plan
    """
    compactor = _compactor(policy_name, budget, high, low, keep_turns, rewriter_name, model, base_url, gate)
    with open_ledger(ctx) as ledger:
        s = ledger.session(session)
        result = compactor.plan(s) if plan_only else compactor.step(s)
    if as_json:
        emit_json(to_builtins(result))
        return
    if plan_only:
        head = f"{result.session} at {result.position}: {result.live_tokens:,} live tokens, high-water {result.high_water:,}, low-water {result.low_water:,}"
        click.echo(head)
        if not result.triggered:
            click.echo("no trigger: nothing to do")
            return
        for t in result.triggers:
            click.echo(f"trigger: {t}")
        n = len(result.actions)
        click.echo(f"plan: {n} command{'' if n == 1 else 's'}, projected {result.projected_tokens:,} tokens")
    else:
        click.echo(
            f"{result.session}: {result.tokens_before:,} -> {result.tokens_after:,} live tokens, "
            f"positions {result.position_before + 1}..{result.position_after}"
            if result.actions else f"{result.session}: nothing to do ({result.tokens_before:,} live tokens)"
        )
        for t in result.triggers:
            click.echo(f"trigger: {t}")
    _echo_actions(result.actions)
    if result.note:
        click.echo(f"note: {result.note}")


def _summary(s) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    strategies: Counter[str] = Counter()
    for ev in s.events():
        if type(ev) in (Pruned, Rewritten, Rederived):
            counts[type(ev).__name__] += 1
            if ev.by.startswith("compactor:"):
                strategies[ev.by.split(":", 1)[1]] += 1
    spans = s.spans()
    derived = [sp for sp in spans if sp.derived]
    return {
        "session": s.name,
        "position": s.position,
        "live_spans": len(spans),
        "live_tokens": s.tokens,
        "derived_live": len(derived),
        "max_generation": max((sp.generation for sp in spans), default=0),
        "prunes": counts["Pruned"],
        "rewrites": counts["Rewritten"],
        "rederives": counts["Rederived"],
        "refusals": s.state.refusals,
        "violations": s.state.violations,
        "by_strategy": dict(strategies),
    }


@main.command("replay")
@click.argument("session")
@click.option("--into", required=True, help="Name of the new session.")
@_policy_options
@click.option("--stop", default=None, help="Replay observations up to this position or mark (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
@handle_errors
def replay_cmd(ctx, session, into, policy_name, budget, high, low, keep_turns, rewriter_name, model, base_url,
               gate, stop, as_json) -> None:
    """Re-run a session's observations through another policy into a new session (a what-if).

    The source's own prunes and rewrites are not replayed; its marks are. The two sessions are
    then compared side by side.

    \b
    Example:
      ctxledger replay demo-naive --policy guarded --into demo-whatif
    """
    from engine.replay import replay

    compactor = _compactor(policy_name, budget, high, low, keep_turns, rewriter_name, model, base_url, gate)
    with open_ledger(ctx) as ledger:
        source = ledger.session(session)
        last = source.resolve_position(stop)
        with progress("replaying", last) as advance:
            target = replay(ledger, source, compactor, into=into, stop=last, progress=advance)
        left, right = _summary(source.view(last)), _summary(target)
    if as_json:
        emit_json({"source": left, "replay": right, "policy": compactor.name})
        return
    click.echo(f"replayed {left['session']!r} (positions 1..{last}) under policy {compactor.name!r} into {into!r}")
    width = max(len(left["session"]), 12)
    click.echo(f"  {'':<16} {left['session']:>{width}} {right['session']:>{width}}")
    for key in ("position", "live_spans", "live_tokens", "derived_live", "max_generation", "prunes",
                "rewrites", "rederives", "refusals", "violations"):
        click.echo(f"  {key:<16} {left[key]:>{width},} {right[key]:>{width},}")
    if right["by_strategy"]:
        click.echo("  compactor: " + ", ".join(f"{k} {v}" for k, v in sorted(right["by_strategy"].items())))
