"""``ctxledger demo`` (the 40-cycle drift study) and ``ctxledger report`` (a self-contained HTML
report of one session, or up to four side by side)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from engine.cli._app import console, emit_json, handle_errors, main, open_ledger, progress


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _rows(result) -> list[tuple[str, list[str]]]:
    runs = [result.runs[p] for p in result.runs]

    def row(label, fn):
        return (label, [fn(r) for r in runs])

    def merged(r) -> str:
        # a real model keeps no book of which lines are merges: not measured
        return str(r.final.merged) if result.simulated or r.policy == "prune-only" else "n/a"

    rows = [
        row("fact retention (end)", lambda r: f"{_pct(r.final.retention)} ({r.final.facts_retained}/{r.final.facts_seen})"),
        row("invented facts in buffer", lambda r: str(r.final.invented)),
        row("merged events in buffer", merged),
        row("live tokens (end)", lambda r: f"{r.final.live_tokens:,}"),
        row("live tokens (mean of cycles)", lambda r: f"{r.mean_tokens:,}"),
        row("peak tokens", lambda r: f"{r.peak_tokens:,}"),
        row("summary tokens written", lambda r: f"{r.summary_tokens_written:,}"),
        row("compactions", lambda r: str(r.final.compactions)),
        row("rewrites / re-derivations", lambda r: f"{r.final.rewrites} / {r.final.rederives}"),
        row("prunes", lambda r: str(r.final.prunes)),
        row("rewrites refused", lambda r: str(r.final.refused)),
        row("summary-of-summary violations", lambda r: str(r.final.violations)),
        row("max generation in buffer", lambda r: str(r.final.max_generation)),
        row("model calls", lambda r: str(r.model_calls)),
    ]
    if "model-driven" in result.runs:
        rows.append(row("context tool calls (errors)",
                        lambda r: f"{r.tool_calls} ({r.tool_errors})" if r.policy == "model-driven" else "–"))
    rows.append(row("session", lambda r: r.session))
    return rows


_SHORT = {"prune-only": "P", "naive": "N", "guarded": "G", "model-driven": "M"}


def _per_cycle(result, every: int) -> tuple[list[str], list[list[str]]]:
    policies = list(result.runs)
    short = [_SHORT.get(p, p) for p in policies]
    drifting = [p for p in policies if p != "prune-only"]
    merges = drifting if result.simulated else []  # a real model's merges are not measured
    header = (
        ["cycle"]
        + [f"retained {s}" for s in short]
        + [f"invented {_SHORT.get(p, p)}" for p in drifting]
        + [f"merged {_SHORT.get(p, p)}" for p in merges]
        + [f"tokens {s}" for s in short]
    )
    n = len(next(iter(result.runs.values())).cycles)
    rows = []
    for i in range(n):
        c = i + 1
        if c % every and c != n:
            continue
        cells = [str(c)]
        cells += [_pct(result.runs[p].cycles[i].retention) for p in policies]
        cells += [str(result.runs[p].cycles[i].invented) for p in drifting]
        cells += [str(result.runs[p].cycles[i].merged) for p in merges]
        cells += [f"{result.runs[p].cycles[i].live_tokens:,}" for p in policies]
        rows.append(cells)
    return header, rows


def _plain_table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    out = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    out.append("  ".join("-" * w for w in widths))
    for r in rows:
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return out


def costs(result) -> list[str]:
    """Where the guarded policy costs something, said plainly from the numbers."""
    runs = result.runs
    g, n, p = runs.get("guarded"), runs.get("naive"), runs.get("prune-only")
    if g is None:
        return []
    out = []
    gf = g.final
    if n is not None:
        nf = n.final
        if g.mean_tokens > n.mean_tokens:
            out.append(
                f"Tokens: guarded holds {g.mean_tokens:,} live tokens on average at the end of a cycle, "
                f"{g.mean_tokens - n.mean_tokens:,} more than naive ({n.mean_tokens:,}): its summaries may not be "
                f"summarized again, so they accumulate ({gf.derived_tokens:,} tokens of summaries at the end vs one "
                f"rolling summary of {nf.derived_tokens:,})."
            )
        else:
            out.append(
                f"Tokens: guarded holds {g.mean_tokens:,} live tokens on average vs naive {n.mean_tokens:,}, but its "
                f"{gf.derived_tokens:,} tokens of summaries (vs one rolling summary of {nf.derived_tokens:,}) can never "
                "be consolidated, only re-derived smaller or pruned: over a longer session they take a growing share "
                "of the budget."
            )
        if g.model_calls > n.model_calls:
            out.append(
                f"Model calls: guarded made {g.model_calls} rewriter calls vs naive {n.model_calls} "
                f"(more, smaller summaries; {gf.rederives} re-derivations read their originals back from the log; "
                f"{gf.refused} refused summaries were asked for again)."
            )
    lost = gf.facts_seen - gf.facts_retained
    if lost:
        out.append(
            f"Retention: guarded still lost {lost} of {gf.facts_seen} facts ({_pct(1 - gf.retention)}). The model "
            f"dropped {g.model_drops} facts over its {g.model_calls} passes over original observations (a "
            "re-derivation to a smaller budget drops more), and old tool outputs the rewriter did not reach were "
            "pruned. The originals stay in the log (expand or rederive brings them back), but not in the buffer."
        )
    if gf.merged:
        out.append(
            f"Merges: {gf.merged} merged statements are live in the guarded buffer. The gate refuses invented specifics; a "
            "merge restates only specifics the sources contain, so it passes the gate (one pass deep, never compounded)."
        )
    if p is not None and gf.retention < p.final.retention:
        out.append(
            f"Prune-only kept more facts ({_pct(p.final.retention)}) than guarded ({_pct(gf.retention)}) on this workload."
        )
    if gf.refused:
        out.append(
            f"Refusals: the grounding gate refused {gf.refused} summaries; what they would have compacted stayed in the "
            "buffer until the model produced a grounded summary at a later attempt."
        )
    if n is not None and g.seconds > 2 * n.seconds:
        out.append(
            f"CPU: checking every summary against its original observations is not free: the guarded run took "
            f"{g.seconds:.1f}s, the naive one {n.seconds:.1f}s (the same writes; the difference is mostly the gate)."
        )
    return out


def model_driven_costs(result, story) -> list[str]:
    """What letting the model edit its own buffer cost, said plainly from the numbers."""
    runs = result.runs
    m, g = runs.get("model-driven"), runs.get("guarded")
    if m is None or not story.editing:
        return []
    e = story.editing
    mf = m.final
    out = [
        f"Model turns: {m.model_calls} model calls over {m.nudges} nudges ({m.tool_calls} context-tool calls, "
        f"{m.tool_errors} answered with an error)"
        + (f", vs {g.model_calls} rewriter calls for guarded." if g is not None else "."),
        f"Tokens: the loop's own messages (nudges, the model's calls with their summaries as arguments, the "
        f"results) added {e['loop_tokens']:,} tokens to the buffer over the run; they are observations like any "
        f"other and were compacted with the rest. Mean live tokens {m.mean_tokens:,}"
        + (f" vs guarded {g.mean_tokens:,}." if g is not None else "."),
    ]
    if e["folds"]:
        out.append(
            f"Habits: the model reached for a summary of its own summaries at {e['folds']} of {m.nudges} nudges; the "
            "ledger refused every one, so each cost a wasted turn and a recorded refusal (the audit lists them as "
            "rewrite-refused warnings), never a drifted summary."
        )
    lost = mf.facts_seen - mf.facts_retained
    if lost:
        out.append(
            f"Retention: {lost} of {mf.facts_seen} facts lost ({_pct(1 - mf.retention)}): dropped by the model "
            f"when it summarized, or by its {e['rederives']} re-derivations to a smaller size."
        )
    if mf.merged and result.simulated:
        out.append(f"Merges: {mf.merged} merged statements are live: the gate cannot see a merge (its specifics are all in the sources).")
    if g is not None and m.seconds > 1.5 * g.seconds:
        out.append(
            f"CPU: {m.seconds:.1f}s vs guarded {g.seconds:.1f}s, nearly all of it the grounding gate checking each of the "
            f"model's {e['rewrites'] + e['rederives'] + e['gated']} summaries against its original observations."
        )
    return out


def _print_human(result, story, cmds, every: int) -> None:
    cfg = result.config
    rich = sys.stdout.isatty()
    policies = list(result.runs)
    if result.simulated:
        who = f"simulated model: drop {_pct(cfg.drop)}, merge {_pct(cfg.merge)}, invent {_pct(cfg.invent)}"
    else:
        who = f"model: {result.model}" + (f" at {result.base_url}" if result.base_url else "")
    title = (
        f"Drift study: seed {cfg.seed}, {cfg.cycles} cycles, budget {cfg.budget:,} tokens, compaction above "
        f"{_pct(cfg.high_water)} (down to {_pct(cfg.low_water)}); {who} — {result.facts} ground-truth facts, "
        f"{result.observations} observations, {result.observed_tokens:,} tokens ({result.counter})"
    )
    header, per = _per_cycle(result, every)
    legend = ", ".join(f"{_SHORT.get(p, p)} = {p}" for p in policies)
    rows = _rows(result)
    if rich:
        from rich.table import Table

        c = console()
        c.print(f"[bold]{title}[/bold]")
        t = Table(title=f"per cycle (after compaction; {legend})", title_justify="left")
        for i, h in enumerate(header):
            t.add_column(h, justify="left" if i == 0 else "right")
        for r in per:
            t.add_row(*r)
        c.print(t)
        t = Table(title="at the end", title_justify="left")
        t.add_column("")
        for p in policies:
            t.add_column(p, justify="right")
        for label, cells in rows:
            style = "bold" if label in ("fact retention (end)", "invented facts in buffer") else None
            t.add_row(label, *cells, style=style)
        c.print(t)
    else:
        click.echo(title)
        click.echo("")
        click.echo(f"per cycle (after compaction; {legend})")
        for line in _plain_table(header, per):
            click.echo(line)
        click.echo("")
        click.echo("at the end")
        for line in _plain_table([""] + policies, [[label, *cells] for label, cells in rows]):
            click.echo(line)
    click.echo("")
    click.echo("What happened")
    for line in story.lines():
        click.echo(line)
    extra = costs(result)
    if extra:
        click.echo("")
        click.echo("Where the guarded policy costs something")
        for line in extra:
            click.echo(f"  - {line}")
    extra = model_driven_costs(result, story)
    if extra:
        click.echo("")
        click.echo("Where the model-driven policy costs something")
        for line in extra:
            click.echo(f"  - {line}")
    click.echo("")
    if result.simulated:
        click.echo("Numbers produced by the simulated model (seeded, offline); --model openai:NAME runs a real one.")
    else:
        where = f" at {result.base_url}" if result.base_url else ""
        click.echo(f"Numbers produced by {result.model}{where}: a real experiment (invented = specifics of live summaries in none of their sources; merges not measured).")
    click.echo(f"Sessions written to {result.store} in {result.seconds:.1f}s. Try next:")
    for cmd in cmds:
        click.echo(f"  {cmd}")


@main.command("demo")
@click.option("--seed", type=click.IntRange(min=0), default=7, show_default=True, help="Seed of the workload and the model.")
@click.option("--cycles", type=click.IntRange(min=1, max=1000), default=40, show_default=True, help="Agent cycles to simulate.")
@click.option("--budget", type=click.IntRange(min=1000), default=200_000, show_default=True, help="Context budget in tokens.")
@click.option("--drop", type=click.FloatRange(0, 1), default=0.10, show_default=True, help="Rate at which the model drops a fact it read.")
@click.option("--merge", type=click.FloatRange(0, 1), default=0.15, show_default=True, help="Rate at which it merges two distinct events.")
@click.option("--invent", type=click.FloatRange(0, 1), default=0.20, show_default=True, help="Rate (per summary) at which it invents a specific.")
@click.option("--prefix", default="demo", show_default=True,
              help="Session names: PREFIX-prune-only, PREFIX-naive, PREFIX-guarded, PREFIX-model-driven.")
@click.option("--model", "model_spec", default=None, metavar="openai:NAME|anthropic:NAME",
              help="A real model as the summarizer (naive, guarded) and the editor (model-driven) instead of the simulated one.")
@click.option("--base-url", default=None, metavar="URL",
              help="With --model: the server (any OpenAI-compatible one: vLLM, Ollama, llama.cpp...).")
@click.option("--every", type=click.IntRange(min=1), default=None, help="Show every Nth cycle in the per-cycle table (default: about 10 rows).")
@click.option("--no-audit", is_flag=True, help="Skip the audits in the story (faster on huge runs).")
@click.option("--json", "as_json", is_flag=True, help="All the numbers (every cycle of every run) as JSON.")
@click.pass_context
@handle_errors
def demo_cmd(ctx, seed, cycles, budget, drop, merge, invent, prefix, model_spec, base_url, every, no_audit, as_json) -> None:
    """Run the seed's 40-cycle drift study: the same agent session under prune-only compaction,
    naive recursive summarization, ctxledger's guarded policy, and the model editing its own buffer
    through the context tools (model-driven), scored against ground truth.

    The four sessions are written to the store (demo-prune-only, demo-naive, demo-guarded,
    demo-model-driven; with a run number when those exist), so every forensic command can examine
    them afterwards. The simulated model is the default (offline, seeded); --model runs the study
    with a real one, and the output says which model produced the numbers.

    \b
    Example:
      ctxledger demo
      ctxledger demo --cycles 12 --invent 0.5 --json
      ctxledger demo --model openai:qwen2.5-7b-instruct --base-url http://127.0.0.1:8000/v1 --cycles 12 --budget 40000
    """
    from engine.demo.story import next_commands, tell
    from engine.demo.study import RealModel, StudyConfig, run_study, session_names
    from engine.demo.workload import generate
    from engine.errors import InvalidInputError

    try:
        cfg = StudyConfig(seed=seed, cycles=cycles, budget=budget, drop=drop, merge=merge, invent=invent)
    except ValueError as e:
        raise InvalidInputError(str(e)) from None
    if base_url is not None and model_spec is None:
        raise InvalidInputError("--base-url needs --model (openai:NAME or anthropic:NAME)")
    real = RealModel(model_spec, base_url=base_url) if model_spec is not None else None
    from engine import validate

    validate.label(prefix, "prefix")
    started = time.perf_counter()
    with open_ledger(ctx, short_names=False) as ledger:
        names = session_names(ledger, prefix)
        wl = generate(cfg.seed, cfg.cycles, scale=cfg.scale)
        with progress("drift study", len(names) * cfg.cycles) as advance:
            result = run_study(ledger, cfg, names=names, progress=advance, workload=wl, model=real)
        with progress("auditing the runs for the story" if not no_audit else "writing the story", None):
            story = tell(ledger, result, wl, audit=not no_audit)
        result.seconds = time.perf_counter() - started
    url = ctx.find_root().obj["url"]
    db = "" if url == "sqlite:///ctxledger.db" else f"--db {url}"
    cmds = next_commands(result, story, db)
    if as_json:
        emit_json({"study": result.to_json(), "story": story.to_json(), "next": cmds})
        return
    _print_human(result, story, cmds, every or max(1, cfg.cycles // 10))


@main.command("report")
@click.argument("sessions", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default="report.html", show_default=True,
              help="The HTML file to write.")
@click.option("--at", "at", default=None, help="Report the session(s) as of this position (or mark).")
@click.option("--json", "as_json", is_flag=True, help="Print what was written (file, size, sessions) as a JSON object.")
@click.pass_context
@handle_errors
def report_cmd(ctx, sessions, output, at, as_json) -> None:
    """Write a self-contained HTML report: live tokens by provenance over the log with markers for
    prunes, rewrites, re-derivations and refusals; the audit findings with blame and lineage for each;
    up to four sessions side by side.

    \b
    Example:
      ctxledger report demo-naive demo-guarded -o report.html
      ctxledger report demo-naive demo-guarded demo-model-driven -o report.html
    """
    from engine.errors import InvalidInputError
    from engine.report import build_report

    if len(sessions) > 4:
        raise InvalidInputError(f"report takes one session, or two to four to compare; got {len(sessions)}")
    with open_ledger(ctx) as ledger:
        readers = [ledger.session(name).view(at) for name in sessions]
        with progress("auditing and tracing for the report", None):
            html = build_report(readers)
    path = Path(output)
    try:
        path.write_text(html, encoding="utf-8")
    except OSError as e:
        raise InvalidInputError(f"cannot write {output}: {e.strerror}") from None
    if as_json:
        emit_json({"file": str(path), "bytes": len(html.encode()), "sessions": [r.name for r in readers],
                   "positions": [r.position for r in readers]})
        return
    click.echo(f"wrote {output} ({len(html.encode()) / 1024:.0f} KB, self-contained: open it in any browser)")
