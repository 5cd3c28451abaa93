"""The forensic story of a study: what the naive run invented, how it survived, how blame pins it to
the rewrite that introduced it, what the audit says — what the guarded run did instead, and what the
model did when it edited its own buffer through the context tools (the model-driven run).

Everything here is read back from the ledger through the read side (``Session.blame``,
``Session.audit``, ``Session.lineage``); the study's bookkeeping only says which text to look for.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.demo.study import Invention, StudyResult
from engine.events import Observed, Pruned, Rederived, RewriteRefused, Rewritten

if TYPE_CHECKING:
    from engine.demo.workload import Workload
    from engine.ledger import Ledger

__all__ = ["Story", "tell", "next_commands", "needle"]


@dataclass
class Story:
    """The findings, as data (``lines()`` renders them as text)."""

    naive: str
    guarded: str
    prune_only: str
    invention: Invention | None = None
    needle: str = ""
    truth: str = ""  # what the observations really say about the same subject
    blame: list[dict[str, Any]] = field(default_factory=list)
    audits: dict[str, dict[str, Any]] = field(default_factory=dict)  # session -> summary
    refusals: list[dict[str, Any]] = field(default_factory=list)  # guarded: what the gate refused
    guarded_invented: int = 0
    naive_survivors: int = 0
    model_driven: str = ""
    simulated: bool = True  # False: a real model wrote the summaries (no book of what it invented)
    editing: dict[str, Any] = field(default_factory=dict)  # model-driven: what the model did, from its log

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        d = asdict(self)
        if self.invention is not None:
            d["invention"]["survived_every_rewrite"] = self.invention.survived_every_rewrite
        return d

    def lines(self) -> list[str]:
        out: list[str] = []
        inv = self.invention
        if inv is None and not self.simulated:
            out.append(
                f"{self.naive}: a real model keeps no book of what it invented; the audits below list every specific "
                "a live summary states that none of its source observations does."
            )
        elif inv is None:
            out.append(f"{self.naive}: the model invented nothing that is still in the buffer at the end (try another --seed or a higher --invent).")
        else:
            n = len(inv.later_rewrites)
            out.append(f"{self.naive}, cycle {inv.cycle}, position {inv.position}: the naive summarizer wrote")
            out.append(f'    "{inv.text}"')
            out.append("  No observation says so." + (f" The log says: {self.truth}." if self.truth else ""))
            if n:
                verdict = "every one of them" if inv.survived_every_rewrite else f"{len(inv.carried_by)} of them"
                out.append(
                    f"  {n} later rewrite{'s' if n != 1 else ''} summarized the summary that held it; "
                    f"{verdict} carried it on" + (" — it is in the buffer at the end, load-bearing." if inv.in_buffer else ".")
                )
            for hit in self.blame[:3]:
                out.append(f'  blame "{self.needle}": {hit["span_id"]} — {hit["message"]}')
        for name, a in self.audits.items():
            kinds = ", ".join(f"{k} x{v}" for k, v in a["kinds"].items()) or "no findings"
            verdict = "ok" if a["ok"] else "DRIFT"
            out.append(f"  audit {name}: {verdict} — {_plural(a['errors'], 'error')}, {_plural(a['warnings'], 'warning')} ({kinds})")
            if a.get("unsupported"):
                shown = ", ".join(repr(v) for v in a["unsupported"][:4])
                out.append(f"    stated by a live summary, in none of its source observations: {shown}")
        if self.refusals:
            first = self.refusals[0]
            kinds = Counter(r.get("command", "rewrite") for r in self.refusals)
            what = " and ".join(
                f"{n} {'re-derivation' if k == 'rederive' else k}{'s' if n != 1 else ''}" for k, n in sorted(kinds.items(), key=lambda kv: kv[0] != "rewrite")
            )
            out.append(
                f"{self.guarded}: the grounding gate refused {what} that stated something no source says "
                f"(first at position {first['position']}: {first['values']}); each refusal is an event in the log, "
                f"and {self.guarded_invented} invented statements reached the buffer."
            )
        elif self.guarded:
            out.append(f"{self.guarded}: the model invented nothing the gate had to refuse; {self.guarded_invented} invented statements in the buffer.")
        e = self.editing
        if e:
            out.append(
                f"{self.model_driven}: nudged {e['nudges']} times above the high-water mark, the model ({e['by']}) made "
                f"{e['tool_calls']} context-tool calls through ContextTools.call."
            )
            if e["folds"]:
                out.append(
                    f"  {e['folds']} times it tried to summarize its own summaries (first at position {e['first_fold']}: "
                    f"{e['first_fold_ids']} with new observations); each was refused and recorded, and the result "
                    "named the two legal moves."
                )
            out.append(
                f"  It then wrote {e['rewrites']} summaries of observations only, re-derived {e['rederives']} summaries "
                f"from their originals (after {e['recalls']} context_recall calls), and pruned {e['prunes']} spans; "
                f"the grounding gate refused {e['gated']} of its summaries"
                + (f" (first at position {e['first_gate']}: {e['first_gate_values']})" if e["gated"] else "")
                + f". Max generation {e['max_generation']}; {e['invented']} invented statements in the buffer at the end."
            )
        return out



def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"

def needle(inv: Invention) -> str:
    """A short distinctive piece of the invented text to blame (the part after the subject)."""
    for marker in (" completed at ", " recovered at ", " was rolled back at ", " was merged in "):
        if marker in inv.text:
            return marker.strip() + " " + inv.text.split(marker, 1)[1]
    return inv.text


def _truth(workload: Workload | None, inv: Invention) -> str:
    if workload is None:
        return ""
    subject = next((f.subject for f in workload.facts.values() if f.subject and f.subject in inv.text), "")
    if not subject:
        return ""
    facts = [f for f in workload.facts.values() if f.subject == subject and f.kind == inv.kind]
    if not facts:
        return ""
    if inv.kind == "migration":
        done = [f for f in facts if f.detail.get("phase") in ("completed", "failed")]
        if done:
            f = done[0]
            return f"cycle {f.cycle}: {f.statement}"
        last = facts[-1]
        return f"the last status was (cycle {last.cycle}) {last.statement}"
    last = max((f for f in facts if f.cycle <= inv.cycle), key=lambda f: f.cycle, default=facts[0])
    return f"cycle {last.cycle}: {last.statement}"


def _audit_summary(session: Any) -> dict[str, Any]:
    report = session.audit()
    kinds = Counter(f.kind for f in report.findings if f.severity in ("error", "warning"))
    return {
        "ok": report.ok,
        "errors": report.errors,
        "warnings": report.warnings,
        "infos": report.infos,
        "kinds": dict(kinds.most_common()),
        "unsupported": sorted({f.value for f in report.findings if f.kind == "unsupported-specific" and f.severity == "error"}),
    }


def tell(ledger: Ledger, result: StudyResult, workload: Workload | None = None, *, audit: bool = True) -> Story:
    """Read the story of ``result``'s sessions back from ``ledger``."""
    runs = result.runs
    names = {p: r.session for p, r in runs.items()}
    story = Story(
        naive=names.get("naive", ""), guarded=names.get("guarded", ""), prune_only=names.get("prune-only", ""),
        simulated=getattr(result, "simulated", True),
    )
    naive = runs.get("naive")
    if naive is not None:
        s = ledger.session(naive.session)
        inv = naive.headline()
        story.naive_survivors = sum(1 for i in naive.inventions if i.in_buffer)
        if inv is not None:
            story.invention = inv
            story.needle = needle(inv)
            story.truth = _truth(workload, inv)
            story.blame = [
                {
                    "span_id": h.span_id,
                    "live": h.live,
                    "position": h.position,
                    "origin_position": h.origin_position,
                    "origin_kind": h.origin_kind,
                    "grounded": h.grounded,
                    "message": h.message,
                }
                for h in s.blame(story.needle)
            ]
        if audit:
            story.audits[naive.session] = _audit_summary(s)
    guarded = runs.get("guarded")
    if guarded is not None:
        g = ledger.session(guarded.session)
        story.guarded_invented = guarded.final.invented
        for ev in g.events():
            if type(ev) is RewriteRefused and ev.findings:
                story.refusals.append(
                    {
                        "position": ev.originator_version,
                        "command": ev.command,
                        "values": ", ".join(repr(f.get("value", "")) for f in ev.findings[:3]),
                        "by": ev.by,
                    }
                )
        if audit:
            story.audits[guarded.session] = _audit_summary(g)
    prune = runs.get("prune-only")
    if prune is not None and audit:
        story.audits[prune.session] = _audit_summary(ledger.session(prune.session))
    md = runs.get("model-driven")
    if md is not None:
        m = ledger.session(md.session)
        story.model_driven = md.session
        story.editing = _editing(m, md)
        if audit:
            story.audits[md.session] = _audit_summary(m)
    return story


def _editing(session: Any, run: Any) -> dict[str, Any]:
    """What the model did to its own buffer, read from the log: its edits are the events whose
    ``by`` names a model; its calls are the tool_call observations of context_* tools."""
    e: dict[str, Any] = {
        "by": "", "nudges": run.nudges, "tool_calls": 0, "folds": 0, "first_fold": 0, "first_fold_ids": "",
        "gated": 0, "first_gate": 0, "first_gate_values": "", "rewrites": 0, "rederives": 0, "prunes": 0,
        "recalls": 0, "max_generation": run.final.max_generation, "invented": run.final.invented,
        "loop_tokens": 0,
    }
    for ev in session.events():
        t = type(ev)
        model = ev.by.startswith("model:")
        if t is Observed:
            if model or ev.by == "ctxledger.agent":
                e["loop_tokens"] += ev.tokens
            if model and ev.kind == "tool_call" and str(ev.meta.get("name", "")).startswith("context_"):
                e["tool_calls"] += 1
                e["recalls"] += ev.meta.get("name") == "context_recall"
            continue
        if not model:
            continue
        e["by"] = e["by"] or ev.by
        if t is RewriteRefused:
            if ev.offending:
                e["folds"] += 1
                if not e["first_fold"]:
                    e["first_fold"], e["first_fold_ids"] = ev.originator_version, ", ".join(ev.offending)
            elif ev.findings:
                e["gated"] += 1
                if not e["first_gate"]:
                    e["first_gate"] = ev.originator_version
                    e["first_gate_values"] = ", ".join(repr(f.get("value", "")) for f in ev.findings[:3])
        elif t is Rewritten:
            e["rewrites"] += 1
        elif t is Rederived:
            e["rederives"] += 1
        elif t is Pruned:
            e["prunes"] += 1
    return e


def next_commands(result: StudyResult, story: Story, db_option: str = "") -> list[str]:
    """The commands to try next on the sessions the demo created."""
    naive = story.naive
    guarded = story.guarded
    db = f" {db_option}" if db_option else ""
    cmds = []
    inv = story.invention
    if naive:
        cmds.append(f"ctxledger{db} log {naive} --type Rewritten")
        if inv is not None:
            cmds.append(f"ctxledger{db} show {naive} --at {inv.position}")
            cmds.append(f"ctxledger{db} diff {naive} {inv.position - 1} {inv.position}")
            cmds.append(f'ctxledger{db} blame {naive} "{story.needle}"')
        cmds.append(f"ctxledger{db} audit {naive}")
    if guarded:
        cmds.append(f"ctxledger{db} log {guarded} --type RewriteRefused")
        cmds.append(f"ctxledger{db} audit {guarded}")
    md = story.model_driven
    if md:
        cmds.append(f"ctxledger{db} log {md} --type RewriteRefused")
    compared = [name for name in (naive, guarded, md) if name]
    if len(compared) >= 2:
        cmds.append(f"ctxledger{db} report {' '.join(compared)} -o report.html")
    return cmds
