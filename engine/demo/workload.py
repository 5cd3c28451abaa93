"""A seeded synthetic agent session whose ground truth is known.

An SRE agent works through a long session, one *cycle* at a time: a user request, a few tool steps
(log searches, a database migration, file edits, deploys) with bulky outputs, a note and a reply.
Scattered through it are the *facts* a later compaction must not lose or distort: distinct API
failures in different services (each with its own status code, time and request id), a long-running
migration with timestamps, file edits, deploys and standing user requests.

Every fact has a canonical *statement* that appears verbatim in the observations that carry it (its
"homes"), so whether it is still in a buffer is a substring check, and every clock time the session
ever mentions is known, so a time that appears in a summary but in no observation is provably
invented. The same seed always produces the same session, byte for byte.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Fact", "Turn", "Cycle", "Workload", "generate", "MERGEABLE", "clock"]

# Fact kinds whose distinct events a careless summarizer tends to collapse into one.
MERGEABLE = ("api_failure", "deploy", "file_edit")

_SERVICES = (
    "billing-api",
    "auth-service",
    "search-api",
    "notify-worker",
    "payments-gateway",
    "inventory-svc",
    "cart-service",
    "profile-api",
)
_FAILURES = (
    (503, "upstream timeout"),
    (500, "token cache miss"),
    (502, "bad gateway from envoy"),
    (504, "gateway timeout on ledger-db"),
    (500, "null pointer in InvoiceMapper"),
    (429, "rate limit exceeded"),
    (503, "connection pool exhausted"),
    (500, "serialization error in OrderEvent"),
)
_ROUTES = ("/v1/invoices", "/v1/sessions", "/v1/search", "/v1/notify", "/v1/charges", "/v1/stock", "/v1/cart", "/v1/profile")
_METHODS = ("GET", "GET", "GET", "POST", "PUT")
_PATHS = (
    "src/billing/retry.py",
    "src/auth/token_cache.py",
    "src/search/query_planner.py",
    "deploy/helm/values-prod.yaml",
    "src/payments/client.py",
    "src/inventory/reservations.py",
    "config/feature_flags.toml",
    "src/cart/pricing.py",
    "src/notify/templates.py",
    "migrations/env.py",
)
_EDITS = (
    "max_retries {a} -> {b}",
    "timeout_seconds {a} -> {b}",
    "pool_size {a} -> {b}",
    "cache_ttl {a} -> {b}",
    "batch_size {a} -> {b}",
    "replicas {a} -> {b}",
)
_REQUESTS = (
    "keep the rollback window under {n} minutes",
    "page {person} before any schema change",
    "do not restart {service} during business hours",
    "use the {region} replica for read-only queries",
    "open a ticket in {queue} for every customer-facing error",
    "cap retries on {service} at {n}",
    "keep the {service} error budget above {n} percent",
    "post a status update in {channel} every {n} minutes",
)
_PEOPLE = ("@dana", "@ravi", "@mei", "@tomas", "@ines", "@kofi")
_REGIONS = ("eu-west-1", "us-east-2", "ap-south-1", "eu-central-1")
_QUEUES = ("OPS", "BILL", "SRE", "PAY")
_CHANNELS = ("#incident-checkout", "#sre-oncall", "#billing-war-room", "#platform")
_DATABASES = ("ledger-db", "orders-db", "catalog-db")
_TENANTS = ("acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell")
_DEPENDENCIES = ("ledger-db", "orders-db", "redis-cache", "kafka-broker", "fraud-scoring", "tax-service")

START_MINUTES = 9 * 60  # the session starts at 09:00
MINUTES_PER_CYCLE = 9


def clock(minutes: int) -> str:
    """Minutes since midnight as HH:MM."""
    return f"{(minutes // 60) % 24:02d}:{minutes % 60:02d}"


_TIME = re.compile(r"(?<![\d:.])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])")


@dataclass(frozen=True)
class Fact:
    """One ground-truth fact, stated verbatim (``statement``) in the observations that carry it."""

    id: str
    kind: str  # api_failure | migration | file_edit | deploy | user_request
    subject: str  # the service, migration, path, or the request's topic
    statement: str
    cycle: int
    time: str = ""  # HH:MM when the fact has one
    detail: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Turn:
    """One observation to record: ``Session.observe(text, role=, kind=, meta=)``."""

    text: str
    role: str
    kind: str = "message"
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    facts: tuple[str, ...] = ()  # ids of the facts this text states verbatim


@dataclass
class Cycle:
    number: int
    turns: list[Turn]


@dataclass
class Workload:
    seed: int
    system: Turn
    cycles: list[Cycle]
    facts: dict[str, Fact]
    times: frozenset[str]  # every HH:MM any observation mentions
    homes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # fact id -> observation ordinals
    by_ordinal: dict[int, tuple[str, ...]] = field(default_factory=dict)  # ordinal -> fact ids

    def turns(self) -> list[Turn]:
        """Every observation in order: the system prompt is ``o1``."""
        out = [self.system]
        for c in self.cycles:
            out.extend(c.turns)
        return out

    def facts_until(self, cycle: int) -> list[Fact]:
        """The facts observed in cycles 1..cycle."""
        return [f for f in self.facts.values() if f.cycle <= cycle]

    def facts_in(self, ordinal: int, text: str | None = None) -> list[Fact]:
        """The facts the observation ``o<ordinal>`` states (checked against its text when given)."""
        out = [self.facts[i] for i in self.by_ordinal.get(ordinal, ())]
        if text is not None:
            out = [f for f in out if f.statement in text]
        return out

    def observed_time(self, hhmm: str) -> bool:
        return hhmm in self.times


class _Gen:
    def __init__(self, seed: int, cycles: int, scale: float):
        self.rng = random.Random(seed)
        self.n_cycles = cycles
        self.scale = scale
        self.facts: dict[str, Fact] = {}
        self.call_no = 0
        self.failed: dict[str, tuple[int, str]] = {}  # service -> its own distinct failure
        self.versions = {s: [self.rng.randint(1, 3), self.rng.randint(0, 9), 0] for s in _SERVICES}
        self.knobs: dict[tuple[str, str], int] = {}
        # migrations: (name, db, start cycle, progress cycles, outcome cycle, outcome)
        n = max(cycles, 8)
        self.migrations = [
            dict(name="0042_add_invoice_index", db="ledger-db", start=max(2, n * 3 // 40),
                 progress=(max(3, n * 5 // 40),), end=max(4, n * 7 // 40), outcome="completed"),
            dict(name="0047_backfill_order_totals", db="orders-db", start=max(5, n * 11 // 40),
                 progress=tuple(sorted({max(6, n * k // 40) for k in (13, 16, 20, 24, 28)})),
                 end=max(7, n * 32 // 40), outcome="completed"),
            dict(name="0051_drop_legacy_sessions", db="catalog-db", start=max(7, n * 34 // 40),
                 progress=(), end=max(8, n * 36 // 40), outcome="failed"),
        ]
        self.migration_batches = {m["name"]: self.rng.choice((80, 120, 160, 240)) for m in self.migrations}

    def fact(self, kind: str, subject: str, statement: str, cycle: int, time: str = "", **detail: Any) -> Fact:
        f = Fact(f"F{len(self.facts) + 1:03d}", kind, subject, statement, cycle, time, detail)
        assert all(g.statement != statement for g in self.facts.values()), statement
        self.facts[f.id] = f
        return f

    # -- bulk --------------------------------------------------------------------------------

    def _size(self, lo: int, hi: int) -> int:
        return max(2, int(self.rng.randint(lo, hi) * self.scale))

    def log_lines(self, service: str, n: int) -> list[str]:
        r = self.rng
        route = _ROUTES[_SERVICES.index(service) % len(_ROUTES)]
        lines = []
        for _ in range(n):
            status = r.choices((200, 201, 204, 304, 404), weights=(70, 8, 8, 8, 6))[0]
            if r.random() < 0.85:
                lines.append(
                    f"INFO {service} handled {r.choice(_METHODS)} {route} for tenant {r.choice(_TENANTS)} with status "
                    f"{status} in {r.randint(2, 180)} ms; cache {r.choice(('hit', 'miss'))}, upstream healthy"
                )
            else:
                lines.append(
                    f"WARN {service} slow call to {r.choice(_DEPENDENCIES)} took {r.randint(200, 2400)} ms "
                    f"(request {r.getrandbits(24):06x}), retrying once"
                )
        return lines

    def diff_lines(self, path: str, n: int) -> list[str]:
        r = self.rng
        out = [f"--- a/{path}", f"+++ b/{path}"]
        words = ("self", "client", "result", "payload", "attempt", "response", "config", "logger", "value")
        for i in range(n):
            w1, w2 = r.choice(words), r.choice(words)
            out.append(f" {'    ' * r.randint(0, 2)}{w1} = {w2}.get('{r.choice(words)}_{r.randint(1, 99)}', {r.randint(0, 500)})")
            if i % 9 == 0:
                out.append(f"@@ -{r.randint(10, 400)},{r.randint(3, 12)} +{r.randint(10, 400)},{r.randint(3, 12)} @@")
        return out

    def sql_rows(self, n: int) -> list[str]:
        r = self.rng
        out = ["id | status | amount_cents | region | attempts", "---+--------+--------------+--------+---------"]
        for _ in range(n):
            out.append(
                f"{r.randint(100000, 999999)} | {r.choice(('paid', 'open', 'void', 'failed'))} | "
                f"{r.randint(100, 250000)} | {r.choice(_REGIONS)} | {r.randint(0, 4)}"
            )
        return out

    # -- steps -------------------------------------------------------------------------------

    def call(self, name: str, args: dict[str, Any]) -> tuple[Turn, str]:
        self.call_no += 1
        cid = f"call_{self.call_no:04d}"
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
        t = Turn(
            text=f"{name}({shown})",
            role="assistant",
            kind="tool_call",
            meta={"tool_call_id": cid, "name": name, "arguments": args},
        )
        return t, cid

    def result(self, cid: str, lines: list[str], facts: list[Fact]) -> Turn:
        return Turn(
            text="\n".join(lines),
            role="tool",
            kind="tool_result",
            meta={"tool_call_id": cid},
            facts=tuple(f.id for f in facts),
        )

    def logs_step(self, cycle: int, service: str, minute: int, fail: bool) -> tuple[list[Turn], list[Fact]]:
        call, cid = self.call("get_logs", {"service": service, "last_minutes": 30})
        lines = self.log_lines(service, self._size(70, 130))
        facts: list[Fact] = []
        if fail:
            if service not in self.failed:
                used = {v for v in self.failed.values()}
                options = [f for f in _FAILURES if f not in used] or list(_FAILURES)
                self.failed[service] = self.rng.choice(options)
            code, err = self.failed[service]
            req = f"req-{self.rng.getrandbits(24):06x}"
            t = clock(minute)
            f = self.fact(
                "api_failure", service,
                f"{service} returned HTTP {code} at {t} ({err}, request {req})", cycle, t,
                code=code, error=err,
            )
            facts.append(f)
            lines.insert(self.rng.randint(len(lines) // 3, len(lines) - 1), f"ERROR {f.statement}")
        return [call, self.result(cid, lines, facts)], facts

    def sql_step(self) -> list[Turn]:
        call, cid = self.call("run_sql", {"query": "select id, status, amount_cents, region, attempts from invoices limit 200"})
        return [call, self.result(cid, self.sql_rows(self._size(60, 120)), [])]

    def edit_step(self, cycle: int) -> tuple[list[Turn], list[Fact]]:
        path = self.rng.choice(_PATHS)
        knob_t = self.rng.choice(_EDITS)
        knob = knob_t.split(" ")[0]
        a = self.knobs.get((path, knob), self.rng.randint(2, 30))
        b = a + self.rng.choice((-3, -2, -1, 1, 2, 3, 5, 10))
        b = b if b > 0 and b != a else a + 7
        self.knobs[(path, knob)] = b
        change = knob_t.format(a=a, b=b)
        call, cid = self.call("edit_file", {"path": path, "change": change})
        f = self.fact("file_edit", path, f"edited {path}: {change}", cycle)
        lines = self.diff_lines(path, self._size(40, 90))
        lines.insert(2, f"# {f.statement}")
        return [call, self.result(cid, lines, [f])], [f]

    def deploy_step(self, cycle: int, minute: int) -> tuple[list[Turn], list[Fact]]:
        service = self.rng.choice(_SERVICES)
        v = self.versions[service]
        v[2] += 1
        if self.rng.random() < 0.3:
            v[1], v[2] = v[1] + 1, 0
        version = f"v{v[0]}.{v[1]}.{v[2]}"
        build = self.rng.randint(4000, 9999)
        t = clock(minute)
        call, cid = self.call("deploy", {"service": service, "version": version, "env": "prod"})
        f = self.fact(
            "deploy", service, f"deployed {service} {version} to prod at {t} (build {build})", cycle, t,
            version=version,
        )
        lines = [f"step {i}/{12}: {s}" for i, s in enumerate(
            ("pull image", "verify signature", "render helm values", "diff manifests", "apply canary",
             "wait for canary health", "shift 10% traffic", "shift 50% traffic", "shift 100% traffic",
             "drain old pods", "record release", "notify"), 1)]
        lines += self.log_lines(service, self._size(40, 80))
        lines.append(f"OK {f.statement}")
        return [call, self.result(cid, lines, [f])], [f]

    def migration_steps(self, cycle: int, minute: int) -> tuple[list[Turn], list[Fact]]:
        turns: list[Turn] = []
        facts: list[Fact] = []
        for m in self.migrations:
            name, db = m["name"], m["db"]
            batches = self.migration_batches[name]
            t = clock(minute)
            if cycle == m["start"]:
                call, cid = self.call("run_migration", {"name": name, "database": db})
                f = self.fact("migration", name, f"migration {name} started at {t} on {db} ({batches} batches)",
                              cycle, t, phase="started", db=db)
            elif cycle in m["progress"]:
                span = max(1, m["end"] - m["start"])
                done = max(1, min(batches - 1, batches * (cycle - m["start"]) // span))
                call, cid = self.call("check_status", {"migration": name})
                f = self.fact("migration", name, f"migration {name} was at batch {done} of {batches} at {t}, still running",
                              cycle, t, phase="running")
            elif cycle == m["end"]:
                call, cid = self.call("check_status", {"migration": name})
                if m["outcome"] == "completed":
                    rows = self.rng.randint(200_000, 4_000_000)
                    f = self.fact("migration", name, f"migration {name} completed at {t} ({rows:,} rows rewritten)",
                                  cycle, t, phase="completed")
                else:
                    f = self.fact("migration", name, f"migration {name} failed at {t} (lock timeout on table sessions)",
                                  cycle, t, phase="failed")
            else:
                continue
            lines = [f"{db}: {self.rng.choice(('vacuum', 'analyze', 'checkpoint'))} lag {self.rng.randint(1, 900)} ms"
                     for _ in range(self._size(20, 50))]
            lines.insert(len(lines) // 2, f"STATUS {f.statement}")
            turns += [call, self.result(cid, lines, [f])]
            facts.append(f)
            minute += 1
        return turns, facts

    def request(self, cycle: int) -> tuple[Turn, list[Fact]]:
        r = self.rng
        asks = (
            "Checkout is flaky again; look at the services behind it.",
            "Customers report slow invoices. Check what changed.",
            "Keep going with the incident; tell me what you find.",
            "Before the evening peak, make sure the fixes are out.",
            "Support says payments fail intermittently. Investigate.",
        )
        text = r.choice(asks)
        facts: list[Fact] = []
        if r.random() < 0.55 or cycle == 1:
            tpl = r.choice(_REQUESTS)
            req = tpl.format(
                n=r.randint(5, 60), person=r.choice(_PEOPLE), service=r.choice(_SERVICES),
                region=r.choice(_REGIONS), queue=r.choice(_QUEUES), channel=r.choice(_CHANNELS),
            )
            if all(f.statement != req for f in self.facts.values()):
                f = self.fact("user_request", tpl.split(" ")[0], req, cycle)
                facts.append(f)
                text += f" Also, from now on: {req}."
        text += " " + " ".join(
            r.choice((
                "The dashboard shows elevated error rates.",
                "Nothing else changed on our side as far as I know.",
                "Please be careful with production.",
                "Summarize what you did when you are done.",
                "The on-call channel is noisy, ignore the bots.",
            ))
            for _ in range(r.randint(1, 3))
        )
        return Turn(text=text, role="user", facts=tuple(f.id for f in facts)), facts

    def cycle(self, c: int) -> Cycle:
        r = self.rng
        minute = START_MINUTES + (c - 1) * MINUTES_PER_CYCLE
        turns: list[Turn] = []
        user, facts = self.request(c)
        turns.append(user)
        steps: list[tuple[list[Turn], list[Fact]]] = []
        # Incidents: several services fail in the same cycle, each in its own distinct way.
        incident = c % 4 == 2 or r.random() < 0.25
        services = r.sample(_SERVICES, r.randint(2, 3))
        for i, svc in enumerate(services):
            steps.append(self.logs_step(c, svc, minute + 1 + i * 2, fail=incident and i < 2))
        mig = self.migration_steps(c, minute + 6)
        if mig[0]:
            steps.append(mig)
        if r.random() < 0.6:
            steps.append(self.edit_step(c))
        if r.random() < 0.45:
            steps.append(self.deploy_step(c, minute + 8))
        if r.random() < 0.5:
            steps.append((self.sql_step(), []))
        for step_turns, step_facts in steps:
            turns.extend(step_turns)
            facts.extend(step_facts)
        # The agent writes a note, restating some of what it learned (as agents do).
        restated = [f for f in facts if f.kind != "user_request" and r.random() < 0.4]
        note = "Notes: " + (" ".join(f"Seen: {f.statement}." for f in restated) or "nothing new of note.")
        note += " Next I will " + r.choice(("check the dependencies.", "look at recent deploys.", "watch the error rate.")) + ""
        turns.append(Turn(text=note, role="assistant", facts=tuple(f.id for f in restated)))
        turns.append(Turn(text=f"Cycle {c} done: " + r.choice((
            "investigated and reported back.", "applied the changes discussed.", "nothing urgent remains.",
        )), role="assistant"))
        return Cycle(c, turns)


def generate(seed: int = 7, cycles: int = 40, *, scale: float = 1.0) -> Workload:
    """The workload of ``cycles`` cycles for ``seed``. ``scale`` multiplies the bulk of tool outputs
    (1.0: about 18k tokens a cycle, so a 200k budget first fills past 70% around cycle 8)."""
    if isinstance(cycles, bool) or not isinstance(cycles, int) or cycles < 1:
        raise ValueError(f"cycles must be a positive int; got {cycles!r}")
    g = _Gen(seed, cycles, scale)
    system = Turn(
        text=(
            "You are an SRE agent for the checkout platform. Tools: get_logs, run_sql, run_migration, "
            "check_status, edit_file, deploy. Keep production safe; report what you find."
        ),
        role="system",
    )
    wl = Workload(seed=seed, system=system, cycles=[g.cycle(c) for c in range(1, cycles + 1)],
                  facts=g.facts, times=frozenset())
    times: set[str] = set()
    homes: dict[str, list[int]] = {}
    by_ordinal: dict[int, tuple[str, ...]] = {}
    for ordinal, turn in enumerate(wl.turns(), 1):
        times.update(f"{int(h):02d}:{m}" for h, m in _TIME.findall(turn.text))
        here = tuple(fid for fid in turn.facts if wl.facts[fid].statement in turn.text)
        if here:
            by_ordinal[ordinal] = here
            for fid in here:
                homes.setdefault(fid, []).append(ordinal)
    wl.times = frozenset(times)
    wl.homes = {k: tuple(v) for k, v in homes.items()}
    wl.by_ordinal = by_ordinal
    missing = [fid for fid in wl.facts if fid not in wl.homes]
    if missing:  # pragma: no cover - a generator bug
        raise AssertionError(f"facts stated in no observation: {missing}")
    return wl
