"""The labelled agent-session drift set: tool outputs, logs, incidents, migrations, deploys, with
derived summaries that are either faithful or drifted in one known way.

    python benchmarks/drift_cases.py     # regenerates benchmarks/data/drift_cases.jsonl

Deterministic: the same seed writes the same file byte for byte. Each line is one case:
``{"id", "split", "kind", "label", "sources": [...], "derived": "...", "altered": [...]}`` where
``label`` is ``drift`` or ``faithful`` and ``altered`` lists the invented or changed values a checker
should point at. Two splits with disjoint vocabularies (services, people, hosts, paths, numbers) and
partly disjoint phrasings: ``dev`` (for tuning) and ``test`` (for the reported numbers).

Kinds of drift: invented_time, altered_time, altered_number, altered_unit, invented_id,
altered_id, invented_service, invented_path, altered_version, altered_date, invented_person,
merged_events, and swapped_attribution (both services and both codes are in the sources but the
summary pairs them wrongly -- a relational error a specifics check cannot see; kept to report
that limit honestly). Faithful kinds: paraphrase (reworded, normalized: 14:02:00 -> 14:02, 3 ->
three, 90 s -> 1.5 minutes, case and separators, hedged rounding, dropped details) and
separate_events (two failures kept apart).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "drift_cases.jsonl"

VOCAB = {
    "dev": {
        "services": ["billing-api", "auth-service", "search-api", "notify-worker", "cart-service", "profile-api"],
        "dbs": ["orders-db", "users-db", "ledger-db"],
        "hosts": ["db-01.prod.internal", "cache-03.prod.internal", "web-12.staging.internal"],
        "people": ["Dana Kim", "Marcus Lee", "Priya Nair", "Tom Berg"],
        "paths": ["src/billing/retry.py", "deploy/helm/values-prod.yaml", "config/feature_flags.toml", "/etc/nginx/nginx.conf"],
        "tickets": ["INC-4521", "OPS-118", "JIRA-2093", "SEV-7710"],
        "branches": ["main", "release-2026-11", "fix-retry-storm"],
        "domains": ["example.com", "corp.example.net"],
    },
    "test": {
        "services": ["payments-gateway", "inventory-svc", "checkout-api", "email-worker", "session-service", "pricing-api"],
        "dbs": ["catalog-db", "events-db", "billing-db"],
        "hosts": ["pg-02.prod.internal", "redis-07.prod.internal", "api-31.eu.internal"],
        "people": ["Alice Moreau", "Kenji Sato", "Olga Ivanova", "Ravi Shah"],
        "paths": ["src/payments/client.py", "migrations/env.py", "charts/api/values.yaml", "/var/lib/app/state.json"],
        "tickets": ["INC-7788", "PAY-342", "CORE-1207", "SRE-5150"],
        "branches": ["trunk", "hotfix-pool-size", "release-3.2"],
        "domains": ["acme.io", "status.acme.dev"],
    },
}

REASONS = ["upstream timeout", "token cache miss", "connection pool exhausted", "bad gateway from envoy", "rate limit exceeded"]
MONTHS = {"Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "Jun": 6, "Jul": 7, "Aug": 8, "Sep": 9, "Oct": 10, "Nov": 11, "Dec": 12}
WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}


class Gen:
    def __init__(self, split: str, seed: int):
        self.split = split
        self.v = VOCAB[split]
        self.r = random.Random(seed)
        self.cases: list[dict] = []

    # -- helpers ------------------------------------------------------------------------------
    def pick(self, key: str, k: int = 1):
        items = self.r.sample(self.v[key], k)
        return items[0] if k == 1 else items

    def time(self, seconds: bool = False) -> str:
        h, m = self.r.randint(0, 23), self.r.randint(0, 59)
        return f"{h:02d}:{m:02d}" + (f":{self.r.randint(0, 59):02d}" if seconds else "")

    def other_time(self, t: str) -> str:
        while True:
            u = self.time()
            if u[:5] != t[:5]:
                return u

    def other_int(self, n: int, lo: int = 1, hi: int | None = None) -> int:
        hi = hi or max(n * 3, 20)
        while True:
            m = self.r.randint(lo, hi)
            if m != n and str(m) not in str(n) and str(n) not in str(m):
                return m

    def hexid(self, k: int = 8) -> str:
        s = "".join(self.r.choice("0123456789abcdef") for _ in range(k))
        if not any(c.isdigit() for c in s):
            s = "7" + s[1:]
        if not any(c.isalpha() for c in s):
            s = s[:-1] + "c"
        return s

    def add(self, kind: str, label: str, sources: list[str], derived: str, altered: list[str] | None = None) -> None:
        self.cases.append(
            {
                "id": f"{self.split}-{len(self.cases) + 1:04d}",
                "split": self.split,
                "kind": kind,
                "label": label,
                "sources": sources,
                "derived": derived,
                "altered": altered or [],
            }
        )

    def paraphrases(self, src: list[str], options: list[str], k: int = 2, kind: str = "paraphrase") -> None:
        for text in self.r.sample(options, min(k, len(options))):
            self.add(kind, "faithful", src, text)

    # -- families ------------------------------------------------------------------------------
    def http_failure(self) -> None:
        svc = self.pick("services")
        code = self.r.choice([500, 502, 503, 504])
        t = self.time(seconds=True)
        ms = self.r.randint(120, 9000)
        reason = self.r.choice(REASONS)
        req = "req-" + self.hexid(6)
        src = [f"GET /v1/{svc.split('-')[0]}/items -> {code} from {svc} at {t} after {ms} ms ({reason}); request id {req}"]
        hm = t[:5]
        faithful = [
            f"{svc} returned {code} at {hm} ({reason}).",
            f"At {hm} a request to {svc.replace('-', ' ').title().replace(' ', '')} failed with HTTP {code} after {ms:,} ms.",
            f"{svc.upper()} failed at {t}: {reason}, request {req}.",
            f"The {svc} call failed ({code}, {reason}) after roughly {round(ms, -2):,} ms.",
        ]
        if self.split == "test":
            faithful.append(f"Request {req} to {svc} hit a {code} ({reason}) at {hm}.")
        self.paraphrases(src, faithful)
        t2 = self.other_time(t)
        self.add("altered_time", "drift", src, f"{svc} returned {code} at {t2} ({reason}).", [t2])
        c2 = self.r.choice([c for c in (500, 502, 503, 504, 429) if c != code])
        self.add("altered_number", "drift", src, f"{svc} returned {c2} at {hm} after {ms} ms.", [str(c2)])
        ms2 = self.other_int(ms, 100, 9999)
        self.add("altered_number", "drift", src, f"{svc} failed with {code} after {ms2} ms.", [f"{ms2} ms"])
        svc2 = self.r.choice([s for s in self.v["services"] if s != svc])
        self.add("invented_service", "drift", src, f"{svc2} returned {code} at {hm} ({reason}).", [svc2])
        inc = self.pick("tickets")
        self.add("invented_id", "drift", src, f"{svc} returned {code} at {hm}; tracked as {inc}.", [inc])
        req2 = "req-" + self.hexid(6)
        self.add("altered_id", "drift", src, f"{svc} returned {code} for request {req2}.", [req2])

    def two_failures(self) -> None:
        s1, s2 = self.pick("services", 2)
        c1, c2 = self.r.sample([500, 502, 503, 504], 2)
        t1, t2 = self.time(), self.time()
        r1, r2 = self.r.sample(REASONS, 2)
        src = [
            f"GET /v1/{s1.split('-')[0]} -> {c1} from {s1} at {t1} ({r1})",
            f"POST /v1/{s2.split('-')[0]} -> {c2} from {s2} at {t2} ({r2})",
        ]
        merged = [
            "Checkout was retried after the API failure.",
            "We are waiting for the outage to clear before retrying.",
            f"The {s1} failure at {t1} blocked the release.",
            "The incident is resolved; the error came from an upstream timeout.",
            f"Retrying once the {r1} error is fixed.",
        ]
        if self.split == "test":
            merged += ["Root cause of the failure: a bad deploy.", f"After the crash in {s2} we paused the rollout."]
        self.add("merged_events", "drift", src, self.r.choice(merged))
        separate = [
            f"{s1} returned {c1} at {t1} and {s2} returned {c2} at {t2}.",
            f"Two API failures: {s1} ({c1}, {r1}) and {s2} ({c2}, {r2}).",
            f"Both services failed: {s1} at {t1}, {s2} at {t2}.",
            f"There were separate failures in {s1} and {s2}.",
        ]
        self.paraphrases(src, separate, kind="separate_events")
        self.add("swapped_attribution", "drift", src, f"{s1} returned {c2} at {t1} and {s2} returned {c1} at {t2}.", [])

    def migration(self) -> None:
        db = self.pick("dbs")
        mig = f"{self.r.randint(10, 99):04d}_add_{self.r.choice(['index', 'column', 'constraint'])}"
        start = self.time()
        rows = self.r.randint(100_000, 9_000_000)
        secs = self.r.choice([90, 120, 45, 30, 600, 1800])
        src = [
            f"Running migration {mig} on {db} (started {start})",
            f"{mig}: copied {rows:,} rows in {secs} seconds; retried 3 times",
        ]
        mins = secs / 60
        dur = f"{mins:g} minutes" if secs >= 60 else f"{secs}s"
        faithful = [
            f"Migration {mig} on {db} began at {start} and copied {rows:,} rows in {dur}, with three retries.",
            f"{db}: {mig} started {start}; about {round(rows / 1e6, 1)} million rows copied.",
            f"The {mig} migration ran on {db.replace('-', '_')} from {start}, retrying 3 times.",
        ]
        self.paraphrases(src, faithful)
        end = self.other_time(start)
        self.add("invented_time", "drift", src, f"Migration {mig} on {db} completed at {end}.", [end])
        rows2 = self.other_int(rows, 100_000, 9_000_000)
        self.add("altered_number", "drift", src, f"Migration {mig} copied {rows2:,} rows.", [f"{rows2:,}"])
        self.add("altered_unit", "drift", src, f"Migration {mig} on {db} copied the rows in {secs} minutes.", [f"{secs} minutes"])
        n2 = self.r.choice([5, 6, 7])
        self.add("altered_number", "drift", src, f"{mig} on {db} was retried {n2} times.", [str(n2)])

    def deploy(self) -> None:
        svc = self.pick("services")
        major, minor, patch = self.r.randint(1, 9), self.r.randint(0, 20), self.r.randint(0, 30)
        ver = f"v{major}.{minor}.{patch}"
        who = self.pick("people")
        t = self.time()
        env = self.r.choice(["prod", "staging"])
        sha = self.hexid(10)
        src = [f"deployed {svc} {ver} to {env} at {t} by {who} (commit {sha})"]
        faithful = [
            f"{who} deployed {svc} version {major}.{minor}.{patch} to {env} at {t}.",
            f"{svc} {ver} is live in {env} (commit {sha[:7]}), deployed by {who.split()[0]}.",
            f"At {t}, {svc} was rolled out to {env} at {ver}.",
        ]
        self.paraphrases(src, faithful)
        ver2 = f"v{major}.{minor + 1}.{patch}"
        self.add("altered_version", "drift", src, f"{who} deployed {svc} {ver2} to {env}.", [ver2])
        other = self.r.choice([p for p in self.v["people"] if p != who]).split()[0]
        self.add("invented_person", "drift", src, f"{other} deployed {svc} {ver} to {env} at {t}.", [other])
        sha2 = self.hexid(10)
        self.add("altered_id", "drift", src, f"{svc} {ver} deployed from commit {sha2}.", [sha2])
        t2 = self.other_time(t)
        self.add("altered_time", "drift", src, f"{svc} {ver} reached {env} at {t2}.", [t2])

    def incident(self) -> None:
        svc = self.pick("services")
        inc = self.pick("tickets")
        who = self.pick("people")
        p99 = self.r.randint(400, 3000)
        thr = self.r.choice([250, 300, 500])
        m = self.r.choice(sorted(MONTHS))
        d = self.r.randint(1, 28)
        src = [f"{inc} opened by {who} on 2026-{MONTHS[m]:02d}-{d:02d}: {svc} p99 latency {p99} ms (threshold {thr} ms)"]
        faithful = [
            f"{who} opened {inc.lower()} on {m} {d} because {svc} p99 latency reached {p99} ms, over the {thr} ms threshold.",
            f"{inc}: p99 for {svc} was {p99 / 1000:g} s (limit {thr} ms).",
            f"Ticket {inc} ({who.split()[0]}, {d} {m}): {svc} latency {p99} ms.",
        ]
        self.paraphrases(src, faithful)
        inc2 = inc.split("-")[0] + "-" + str(self.other_int(int(inc.split("-")[1]), 100, 9999))
        self.add("altered_id", "drift", src, f"{inc2} tracks the {svc} latency of {p99} ms.", [inc2])
        d2 = d + 1 if d < 28 else d - 1
        self.add("altered_date", "drift", src, f"{inc} was opened on {m} {d2} for {svc}.", [f"{m} {d2}"])
        p2 = self.other_int(p99, 400, 3000)
        self.add("altered_number", "drift", src, f"{svc} p99 latency was {p2} ms ({inc}).", [f"{p2} ms"])

    def files_and_hosts(self) -> None:
        path = self.pick("paths")
        host = self.pick("hosts")
        add, rem = self.r.randint(1, 80), self.r.randint(1, 40)
        pct = self.r.randint(70, 99)
        total = self.r.choice([500, 1000, 2000])
        used = round(total * pct / 100)
        domain = self.pick("domains")
        url = f"https://grafana.{domain}/d/{self.hexid(6)}"
        src = [
            f"edited {path}: +{add} -{rem} lines",
            f"disk usage on {host}: {pct}% ({used} GB of {total} GB)",
            f"dashboard: {url}",
        ]
        name = path.rsplit("/", 1)[-1]
        faithful = [
            f"Edited {name} ({add} lines added, {rem} removed); {host} disk is at {pct}%.",
            f"{host.upper()} is {pct}% full: {used} GB used of {total} GB. See {url}.",
            f"Changed {path}; disk on {host.split('.')[0]} at {pct} percent.",
        ]
        self.paraphrases(src, faithful)
        other_path = self.r.choice([p for p in self.v["paths"] if p != path])
        self.add("invented_path", "drift", src, f"Edited {other_path} and checked disk on {host}.", [other_path])
        pct2 = self.other_int(pct, 50, 99)
        self.add("altered_number", "drift", src, f"Disk on {host} is at {pct2}%.", [f"{pct2}%"])
        host2 = self.r.choice([h for h in self.v["hosts"] if h != host])
        self.add("invented_service", "drift", src, f"Disk on {host2} is at {pct}%.", [host2])
        url2 = f"https://grafana.{domain}/d/{self.hexid(6)}"
        self.add("invented_id", "drift", src, f"Edited {name}; dashboard at {url2}.", [url2])

    def conversation(self) -> None:
        who = self.pick("people")
        svc = self.pick("services")
        day = self.r.choice(["Friday", "Monday", "Thursday"])
        n = self.r.randint(2, 9)
        src = [
            f"{who}: please keep {svc} on the old API version v1 until {day}.",
            f"assistant: understood, I will not touch {svc} until {day}; {n} jobs are still queued.",
        ]
        faithful = [
            f"The user ({who}) asked to keep {svc} on API v1 until {day}; {WORDS.get(n, n)} jobs are queued.",
            f"Do not change {svc} before {day} (request from {who.split()[0]}).",
            f"{svc} stays on v1 until {day}, per {who}.",
        ]
        self.paraphrases(src, faithful)
        day2 = self.r.choice([d for d in ["Tuesday", "Wednesday", "Sunday", "Saturday"] if d != day])
        self.add("altered_date", "drift", src, f"Keep {svc} on v1 until {day2}.", [day2])
        self.add("invented_time", "drift", src, f"Keep {svc} on v1 until {day} at {self.time()}.", [])
        self.cases[-1]["altered"] = [self.cases[-1]["derived"].rsplit(" ", 1)[1].rstrip(".")]

    def run(self, rounds: int) -> list[dict]:
        families = [self.http_failure, self.two_failures, self.migration, self.deploy, self.incident, self.files_and_hosts, self.conversation]
        for _ in range(rounds):
            for fam in families:
                fam()
        return self.cases


# -- the claim kinds (issue 13): quotes, user instructions, completed work, pairings, negation ----
# Written before the checks were tuned; the ``dev`` phrasings were used while tuning, the ``test``
# phrasings (and vocabulary) never were. Sources carry roles here: a claim about what the user
# asked is grounded in USER messages only.

CLAIM_PHRASES = {
    "dev": {
        "asked": ["The user asked to {x}.", "User requested that we {x}.", "Per the user's instructions, {x}.", "The user wants us to {x}."],
        "pass": ["All tests pass.", "The test suite is green now.", "Tests pass after the fix."],
        "pushed": ["The changes were committed and pushed.", "Committed and pushed the fix to {branch}."],
        "migrated": ["Migration {mig} completed successfully.", "The {mig} migration finished on {db}."],
        "not_rolled": ["The {svc} deploy was not rolled back.", "{svc} {ver} was never rolled back."],
        "succeeded": ["The {svc} deploy succeeded.", "{svc} {ver} rolled out successfully."],
    },
    "test": {
        "asked": ["As the user requested, {x}.", "The user explicitly asked me to {x}.", "Following the user's request, {x}.", "The user's instruction was to {x}."],
        "pass": ["Every test passes now.", "CI is green.", "The tests are passing."],
        "pushed": ["I committed the change and pushed it to {branch}.", "Work is committed and pushed."],
        "migrated": ["{mig} was applied successfully on {db}.", "The migration {mig} is done."],
        "not_rolled": ["{svc} {ver} wasn't rolled back.", "No rollback of {svc} was needed."],
        "succeeded": ["{svc} {ver} deployed successfully.", "The rollout of {svc} completed."],
    },
}

INSTRUCTIONS = {
    "dev": [
        ("keep {svc} on the old API until {day}", "keep {svc} on the old API until {day}", "delete the {db} backups", "drop the {db} replica"),
        ("rename the {path} file", "rename {path}", "rewrite {path} in Rust", "revert every change to {path}"),
        ("pause the {svc} rollout", "pause the {svc} rollout", "roll {svc} back to the previous release", "scale {svc} to zero"),
    ],
    "test": [
        ("leave {svc} alone until {day}", "leave {svc} untouched until {day}", "wipe the {db} staging data", "disable alerts for {svc}"),
        ("bump the timeout in {path}", "raise the timeout in {path}", "delete {path}", "move {path} to the archive"),
        ("open a ticket for the {svc} latency", "file a ticket about {svc} latency", "restart {svc} in production", "page the on-call for {svc}"),
    ],
}


class ClaimGen(Gen):
    def add(self, kind: str, label: str, sources: list[str], derived: str, altered: list[str] | None = None,
            roles: list[str] | None = None) -> None:
        super().add(kind, label, sources, derived, altered)
        self.cases[-1]["roles"] = roles or [""] * len(sources)

    def phrase(self, key: str, **kw) -> str:
        return self.r.choice(CLAIM_PHRASES[self.split][key]).format(**kw)

    def quotes(self) -> None:
        svc, host = self.pick("services"), self.pick("hosts")
        msgs = ["connection refused by upstream host", "permission denied while opening the socket", "certificate has expired for the domain", "too many open files in the worker"]
        msg = self.r.choice(msgs)
        code = self.r.randint(1, 9)
        src = [f'{svc}: error "{msg}" (exit code {code}) on {host}', f"retrying {svc} in 30 s"]
        roles = ["tool", "tool"]
        self.add("quote", "faithful", src, f'{svc} failed on {host} with "{msg}".', roles=roles)
        words = msg.split()
        i = self.r.randrange(len(words) - 1)
        near = " ".join(words[:i] + [words[i] + ("s" if not words[i].endswith("s") else "")] + words[i + 1 :])
        self.add("near_quote", "faithful", src, f'The error was "{near}" on {host}.', roles=roles)
        other = self.r.choice([m for m in msgs if m != msg])
        self.add("invented_quote", "drift", src, f'{svc} reported "{other}".', [other], roles=roles)
        queued = f"also check {self.pick('paths')} before you deploy"
        src_q = [*src, queued]
        self.add("quote", "faithful", src_q, f'While the agent worked the user added: "{queued}".', roles=[*roles, "user"])
        esc = f'{{"level": "error", "message": "{msg}"}}'
        self.add("quote", "faithful", [esc.replace('"', '\\"')], f'The log line was "message": "{msg}".', roles=["tool"])

    def instructions(self) -> None:
        svc, db, path, day = self.pick("services"), self.pick("dbs"), self.pick("paths"), self.r.choice(["Friday", "Monday", "Thursday"])
        said, claim_ok, invented, assistant_idea = (s.format(svc=svc, db=db, path=path, day=day) for s in self.r.choice(INSTRUCTIONS[self.split]))
        src = [f"please {said}, thanks", f"assistant: ok. I could also {assistant_idea} later if needed.", f"tool: {svc} healthy, 3 pods"]
        roles = ["user", "assistant", "tool"]
        self.add("instruction", "faithful", src, self.phrase("asked", x=claim_ok), roles=roles)
        self.add("invented_instruction", "drift", src, self.phrase("asked", x=invented), [invented], roles=roles)
        self.add("invented_instruction", "drift", src, self.phrase("asked", x=assistant_idea), [assistant_idea], roles=roles)
        self.add("instruction", "faithful", src, f"Asked to {claim_ok}; {svc} is healthy with 3 pods.", roles=roles)

    def completion(self) -> None:
        n_fail, n_pass = self.r.randint(1, 9), self.r.randint(10, 200)
        branch, mig, db = self.pick("branches"), f"{self.r.randint(10, 99):04d}_add_index", self.pick("dbs")
        tests_fail = [f"$ pytest -q\n{n_fail} failed, {n_pass} passed in 4.2s", "assistant: I will look at the failures next."]
        roles = ["tool", "assistant"]
        self.add("false_completion", "drift", tests_fail, self.phrase("pass"), roles=roles)
        self.add("completion", "faithful", tests_fail, f"Tests still fail: {n_fail} failed, {n_pass} passed.", roles=roles)
        tests_fixed = [*tests_fail, f"$ pytest -q\n{n_pass + n_fail} passed in 4.0s"]
        self.add("completion", "faithful", tests_fixed, self.phrase("pass"), roles=[*roles, "tool"])
        push = [f"$ git push origin {branch}\n! [rejected] {branch} -> {branch} (non-fast-forward)\nerror: failed to push some refs"]
        self.add("false_completion", "drift", push, self.phrase("pushed", branch=branch), roles=["tool"])
        mig_src = [f"Running migration {mig} on {db}", f"{mig}: ERROR lock timeout, migration aborted"]
        self.add("false_completion", "drift", mig_src, self.phrase("migrated", mig=mig, db=db), roles=["tool", "tool"])
        self.add("completion", "faithful", mig_src, f"Migration {mig} on {db} was aborted after a lock timeout.", roles=["tool", "tool"])

    def negation(self) -> None:
        svc = self.pick("services")
        ver = f"v{self.r.randint(1, 9)}.{self.r.randint(0, 20)}.{self.r.randint(0, 30)}"
        t = self.time()
        src = [f"deployed {svc} {ver} to prod at {t}", f"{svc} {ver}: error rate 12%, rolled back at {self.other_time(t)}"]
        roles = ["tool", "tool"]
        self.add("status_flip", "drift", src, self.phrase("not_rolled", svc=svc, ver=ver), roles=roles)
        self.add("status_flip", "drift", src, self.phrase("succeeded", svc=svc, ver=ver), roles=roles)
        self.add("negation_faithful", "faithful", src, f"{svc} {ver} was rolled back after its error rate hit 12%.", roles=roles)
        ok_src = [f"deployed {svc} {ver} to prod at {t}", f"{svc} {ver}: healthy, no rollback"]
        self.add("negation_faithful", "faithful", ok_src, self.phrase("not_rolled", svc=svc, ver=ver), roles=roles)

    def pairings(self) -> None:
        (p1, p2), (k1, k2) = self.pick("people", 2), self.pick("tickets", 2)
        s1, s2 = self.pick("services", 2)
        src = [f"{k1} assigned to {p1}: {s1} latency", f"{k2} assigned to {p2}: {s2} errors"]
        roles = ["tool", "tool"]
        self.add("swapped_pairing", "drift", src, f"{p1} owns {k2}.", roles=roles)
        self.add("swapped_pairing", "drift", src, f"{k1} tracks the {s2} errors.", roles=roles)
        self.add("pairing_faithful", "faithful", src, f"{p1} has {k1} ({s1} latency); {p2} has {k2}.", roles=roles)
        c1, c2 = self.r.sample([500, 502, 503, 504], 2)
        t1, t2 = self.time(), self.time()
        fails = [f"GET /a -> {c1} from {s1} at {t1}", f"GET /b -> {c2} from {s2} at {t2}"]
        self.add("merged_named", "drift", fails, f"The API failure (HTTP {c1} at {t1}) hit {s1} and {s2}.", roles=roles)
        self.add("pairing_faithful", "faithful", fails, f"{s1} failed with {c1} at {t1}, then {s2} with {c2} at {t2}.", roles=roles)

    def run(self, rounds: int) -> list[dict]:
        for _ in range(rounds):
            for fam in (self.quotes, self.instructions, self.completion, self.negation, self.pairings):
                fam()
        return self.cases


def generate() -> list[dict]:
    base = Gen("dev", 1101).run(8) + Gen("test", 2202).run(12)
    claims = ClaimGen("dev", 3303).run(8) + ClaimGen("test", 4404).run(12)
    for i, c in enumerate(claims):  # ids continue after the first families', per split
        c["id"] = f"{c['split']}-c{i + 1:04d}"
    return base + claims


def main() -> None:
    cases = generate()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", encoding="utf-8") as f:
        for c in cases:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
