"""Rule ``completion``: work a summary says was done is not contradicted, and happened at all.

A claim that an activity is complete ("tests pass", "committed and pushed", "deployed to
production", "the announcement was sent") is judged by what the conversation shows of that
activity, in order:

- its outcomes contradict the claim ("3 failed", "! [rejected]", "pre-commit validation failed"):
  for a claim about how things are now ("tests pass") the last outcome is a failure, for a claim
  that something happened ("committed") every outcome is -- an error;
- it has no trace where the model did it (no test was run, nothing was ever deployed): positive
  evidence that the claim was invented -- a warning;
- a tool call performs it, but no outcome was printed: it cannot be verified either way -- information.

Principle: a claim that an activity happened needs the activity's trace in what the model saw. For
work agents do through tools, the trace is a tool call that performs it or output that reports it,
never a mere mention in prose, plans or project context; a tool call's own text (its command, the
file text it writes) is no outcome. A claim tied to a subject is grounded only by traces covering
that subject: work on a named thing ("gqc.6 tests pass") by what follows the first tool call acting
on it alone, or, when a claim names none, by the work on the task its list item is headed by
(phases.py: what the session did while working on it; a list item with no task on its own line is
about the one its nearest ancestor line names); "afterwards" / "after these edits" / "again"
by what follows the last file change; a
stated figure ("5 tests, 0 failures") by a run in that scope that printed it. "Ran `cmd`" needs a
call running ``cmd``; "added `X` to FILE" a file-changing call on FILE writing ``X``; a hand check of
a running system ("verified in the browser", "end to end", "smoke-tested") a request to it or a
browser on it.

Only claims count: a plan, a remaining task, a negation or a partial state ("will deploy", "not yet
committed", "about half done", a line under "Pending tasks:") claims nothing done. Harness text that
instructs the model (the compaction prompt) is no evidence; asking for the work is not doing it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from projections.grounding.evidence import Evidence
from projections.grounding.lazy import lazy
from projections.grounding.phases import action_of, head_ids, head_task, phases_of
from projections.grounding.registry import GroundingFinding, finding, rule
from projections.grounding.specifics import tokens
from projections.grounding.text import STOP_WORDS, line_tree, plan_sections, sentences, stem, word_stems
from projections.grounding.vocabulary import known_words

__all__ = ["UNSUPPORTED_COMPLETION", "completions", "ACTIVITIES", "NOT_DONE"]

UNSUPPORTED_COMPLETION = "unsupported-completion"

_I = re.IGNORECASE
_M = re.IGNORECASE | re.MULTILINE


@dataclass(frozen=True)
class Activity:
    claim: re.Pattern[str]  # how a summary says it is done
    mention: re.Pattern[str]  # how a tool call performs it (its command, not the file text it writes)
    outcomes: tuple[tuple[re.Pattern[str], int], ...]  # outcome lines: +1 done, -1 failed
    subject: bool = False  # its outcome lines name what they are about ("✓ Closed spotter-dov.1")
    # lower-case pieces one of which every outcome line (and claim) of it contains: a source with
    # none of them is not read (speed only; it must never change a verdict)
    hints: tuple[str, ...] = ()


def _outcome_lines(word: str) -> tuple[tuple[re.Pattern[str], int], ...]:
    """Outcome lines for an activity named by ``word``: the line names it and how it went."""
    return (
        (lazy(rf"^(?=.*\b{word}).*\b(?:fail(?:ed|s|ure)?|errors?|aborted|rolled\s+back|reverted|timed\s+out|refused|crash(?:ed)?)\b.*$", _M), -1),
        (lazy(rf"^(?=.*\b{word}).*\b(?:completed?|finished|succeeded|successful(?:ly)?|done|applied|live|healthy)\b.*$", _M), 1),
    )


ACTIVITIES: dict[str, Activity] = {
    "tests": Activity(
        re.compile(r"\b(?:all\s+)?(?:the\s+)?(?:unit\s+|integration\s+)?tests?(?:\s+suite)?`?\s+(?:now\s+|all\s+|already\s+|still\s+)?(?:pass(?:es|ed|ing)?|(?:are|is)\s+(?:green|passing))\b|"
                   r"\btests?\b[^.;:\n]{0,50}?\b(?:are|were|is|was|have\s+been|has\s+been)\s+(?:\w+\s+){0,3}?(?:and\s+)?(?:pass(?:es|ed|ing)?)\b|"
                   r"\b(?:ran|re-?ran)\s+(?:the\s+)?(?:full\s+|whole\s+|entire\s+)?(?:test\s+)?suite\b|"
                   # "the SubagentLive tests, which pass": the relative clause claims them passing
                   r"\btests?,?\s+which\s+(?:now\s+|all\s+|also\s+)?pass(?:es|ed)?\b|"
                   # "is already implemented and tested": tests were run on it
                   r"\b(?:is|are|was|were|been)\s+(?:already\s+|now\s+|fully\s+)?(?:\w+\s+and\s+)?(?:unit[- ])?tested\b|"
                   r"\btest\s+suite\s+is\s+green\b|\bCI\s+is\s+green\b|"
                   r"\b(?:full|whole|entire|complete)\s+(?:test\s+)?suite\b[^.;\n]{0,30}?\b(?:pass(?:es|ed)?|green|passing)\b|"
                   r"\b(?:full|whole|entire|complete)\s+`[^`\n]{2,40}`\s+run\s+(?:is\s+|was\s+|came\s+back\s+)?(?:green|passe[sd]|clean)\b", _I),
        re.compile(r"\btests?\b|\bpytest\b|\bjest\b|\bvitest\b|\brspec\b|\bunittest\b|\bspec\b", _I),
        (
            (lazy(r"\b[1-9]\d*[ \t]+(?:failed|failures?|errors?)\b|(?-i:\bFAILED\b)|\btests?\s+failed\b|(?-i:^FAIL\b)|"
                  # a CI check table's row ("test<TAB>fail<TAB>3m40s", gh pr checks)
                  r"^[ \t]*[\w./-]*test[\w./-]*[ \t]+fail(?:ed|ing|ure)?\b", _M), -1),
            (lazy(r"\b\d+\s+passed\b|\b\d+\s+tests?,\s+0\s+failures?\b|^OK\b|\ball\s+tests?\s+pass(?:ed)?\b|\btests?\s+passed\b|\bTests:\s+\d+\s+passed\b|"
                 # a runner's own success line: JUnit/Gradle's per-test PASSED and its BUILD SUCCESSFUL (as its
                 # BUILD FAILED is a failure), dotnet's "Passed!  - Failed: 0", go test's "ok  <package>  0.12s",
                 # a CI check table's "test<TAB>pass"
                 r"(?-i:\bPASSED\b)|(?-i:\bBUILD SUCCESSFUL\b)|(?-i:^Passed!)|(?-i:^ok[ \t]+\S+[ \t]+\d+(?:\.\d+)?s\b)|"
                 r"^[ \t]*[\w./-]*test[\w./-]*[ \t]+pass(?:ed|ing)?\b", _M), 1),
        ),
        hints=("pass", "fail", "ok", "error", "green"),
    ),
    "commit": Activity(
        lazy(r"\bcommitted\b|\bcommit(?:s)?\s+(?:succeeded|went\s+through)\b", _I),
        lazy(r"\bcommit", _I),
        (
            (lazy(r"\bnothing\s+(?:added\s+)?to\s+commit\b|\bcommit\s+failed\b|\bpre-commit\b.*\bfail(?:ed|s|ure)?\b|"
                        r"\bhook\b.*\b(?:failed|blocked|rejected)\b|^error:\s.*\b(?:commit|merge)\b", _M), -1),
            (lazy(r"^\[[\w./-]+(?:\s+\(root-commit\))?\s+[0-9a-f]{7,}\]", _M), 1),
        ),
        hints=("commit", "[", "hook", "error"),
    ),
    "push": Activity(
        lazy(r"\bpushed\b", _I),
        lazy(r"\bpush", _I),
        (
            (lazy(r"!\s*\[rejected\]|\bfailed\s+to\s+push\b|^fatal:|^error:\s.*\b(?:push|refs)\b", _M), -1),
            (lazy(r"^\s*(?:[0-9a-f]{7,}\.\.[0-9a-f]{7,}|\*\s+\[new\s+branch\])\s+\S+\s+->\s+\S+", _M), 1),
        ),
        hints=("push", "->", "rejected", "fatal", "error"),
    ),
    "migration": Activity(
        re.compile(r"\bmigrations?\b[^.;\n]{0,60}?\b(?:completed?|finished|succeeded|done|applied|ran\s+successfully)\b|\b(?:successfully\s+)?migrated\b", _I),
        re.compile(r"migrat", _I),  # "ecto.migrate", "showmigrations"
        _outcome_lines(r"migrat"),
        hints=("migrat",),
    ),
    "deploy": Activity(
        # "the page shipped 312 kB of JS" sends bytes to a browser: shipping an amount is no deploy
        lazy(r"\b(?:deployed|rolled\s+out|shipped(?!\s+(?:about\s+|roughly\s+|only\s+)?[\d~]))\b|\b(?:deploy(?:ment)?|rollout)\b[^.;\n]{0,60}?\b(?:completed?|finished|succeeded|done|successful)\b|\b(?:is|are|went)\s+live\b", _I),
        lazy(r"\bdeploy|\brollout\b|\broll(?:ed|ing)?\s+out\b|\bkubectl\s+(?:apply|rollout)|\bhelm\s+(?:install|upgrade)|\bship(?:ped|ping)?\b", _I),
        _outcome_lines(r"(?:deploy|roll(?:ed)?\s*out|ship)"),
        hints=("deploy", "roll", "ship", "live"),
    ),
    "release": Activity(
        # "released the lock", "released it with its lock ID": a lock let go is no release
        lazy(r"\b(?:released(?![^.;\n]{0,30}\block\b)|published)\b|\brelease\b[^.;\n]{0,40}?\b(?:was\s+|has\s+been\s+)?(?:cut|tagged|published)\b", _I),
        lazy(r"\brelease|\bpublish|\bgit\s+tag\b|\btagged\b", _I),
        _outcome_lines(r"(?:releas|publish|tag)"),
        hints=("releas", "publish", "tag"),
    ),
    "announcement": Activity(
        lazy(r"\b(?:announced|notified|emailed)\b|\b(?:announcement|e-?mail|notification|newsletter)s?\b[^.;\n]{0,40}?\b(?:has\s+been\s+|have\s+been\s+|was\s+|were\s+)?sent\b|\bsent\s+(?:out\s+)?(?:the\s+|an?\s+)?(?:release\s+)?(?:announcement|e-?mail|notification)s?\b", _I),
        lazy(r"\bannounc|\bnotif(?:y|ied|ies|ication)|\be-?mail(?:ed|s)?\b|\bslack\b|\bnewsletter\b", _I),
        (),
        hints=("announc", "notif", "mail", "sent"),
    ),
    "merge": Activity(
        re.compile(r"\bmerged\b", _I),
        re.compile(r"\bmerg(?:e|ed|es|ing)\b", _I),  # "git merge", not "merge_processor_config"
        (
            (re.compile(r"\bCONFLICT\b|\bAutomatic\s+merge\s+failed\b|\bmerge\s+failed\b|\bnot\s+mergeable\b", _M), -1),
            (re.compile(r"\bMerge\s+made\s+by\b|^Fast-forward\b|\bMerged\s+(?:pull\s+request|PR|branch)\b|\bSuccessfully\s+merged\b", _M), 1),
        ),
        hints=("merg", "conflict", "fast-forward"),
    ),
    "pull request": Activity(
        lazy(r"\bopened\s+(?:a|the|an)\s+(?:draft\s+)?(?:pull\s+request|PR|merge\s+request|MR)\b|\b(?:pull\s+request|PR)\s+(?:#\d+\s+)?(?:was\s+|is\s+|has\s+been\s+)?(?:opened|created|filed|up)\b", _I),
        lazy(r"\bpull\s+request|\bmerge\s+request|\bgh\s+pr\b|\bPR\b|/pull/\d", _I),
        (
            (lazy(r"\bpull\s+request\b.*\b(?:failed|error|rejected)\b", _M), -1),
            (lazy(r"/pull/\d+|\bpull\s+request\b.*\b(?:created|opened)\b", _M), 1),
        ),
        hints=("pull", "pr", "merg"),
    ),
    "close": Activity(
        lazy(r"\b(?:is|was|were|are|been|got)\s+(?:now\s+|also\s+|already\s+)?(?:\w+(?:ed|en)\s+and\s+)?closed\b|\bclosed\s+(?:it|the\s+(?:task|bead|issue|ticket|epic)|task|bead|issue|ticket|epic)\b", _I),
        lazy(r"\bclos(?:e|ed|es|ing)\b", _I),
        (
            (lazy(r"\b(?:cannot|can't|failed\s+to|could\s+not|unable\s+to)\s+close\b", _M), -1),
            (lazy(r"\bClosed\s+\S+|\bclosed\s+(?:issue|ticket|#\d+)", _M), 1),
        ),
        subject=True,
        hints=("clos",),
    ),
    # checking a running system by hand ("verified in the browser", "smoke-tested on the live
    # session", "verified end to end"): done through a request to it or a browser on it, not by
    # editing, compiling or unit tests
    "verification": Activity(
        re.compile(r"\b(?:verified|confirmed|checked|tested|exercised)\b[^.;:\n]{0,40}?(?:\bin\s+(?:the|a)\s+browser\b|\bend[\s-]to[\s-]end\b|\bon\s+the\s+live\b|\bmanually\b|\bby\s+hand\b)|"
                   r"\bsmoke[\s-]?tested\b|\bverified\s+end[\s-]to[\s-]end\b", _I),
        re.compile(r"\b(?:curl|wget|https?|httpie|xh)\b[^\n]{0,200}?(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1\])|\bbrowser|playwright|puppeteer|selenium|screenshot|chrome|firefox", _I),
        (),
        hints=("verif", "confirm", "check", "test", "exercis", "smoke"),
    ),
    "build": Activity(
        re.compile(r"\bbuild\b[^.;\n]{0,40}?\b(?:completed?|finished|succeeded|passe[sd]|is\s+green|successful|clean)\b|\bcompiles?\s+(?:cleanly|successfully|again)\b|\bcompiled\s+(?:cleanly|successfully)\b|"
                   r"\b(?:compil\w*|bundles?)\b[^.;\n]{0,60}?\b(?:is|are|both|came\s+back)\s+(?:\w+\s+)?(?:green|clean)\b", _I),
        re.compile(r"\bbuild|\bcompil", _I),
        (
            (lazy(r"\bbuild\s+(?:failed|error)|\bcompilation\s+(?:error|failed)|^error(?:\[E\d+\])?:\s|\*\*\s*\(CompileError\)|"
                  r"^[ \t]*[\w./-]*build[\w./-]*[ \t]+fail(?:ed|ing|ure)?\b", _M), -1),  # a CI check row: "build<TAB>fail"
            (lazy(r"\bbuild\s+(?:succeeded|successful|passed|finished|complete)|^\s*Finished\b|\bCompil(?:ed|ing)\s+\d+\s+files?\b|\bCompiled\b|"
                  r"^[ \t]*[\w./-]*build[\w./-]*[ \t]+pass(?:ed|ing)?\b", _M), 1),
        ),
        hints=("build", "compil", "finished", "error"),
    ),
}


def _static_check(tool: str) -> Activity:
    """A static check's verdict ("dialyzer is green again", "credo came back clean"), judged like
    tests by the last run of that check: a verdict counts for the check named before it in its
    output, up to the next check's section (``[DIALYZER]`` after ``[CREDO]`` in a pre-commit run);
    a hook report of failed sections that does not list the check shows it passed."""
    name = re.escape(tool)
    scope = rf"(?is)\b{name}\b(?:(?!\[[A-Z]{{3,}}\]).){{0,3000}}?"
    return Activity(
        re.compile(rf"\b{name}\b[^.;\n]{{0,60}}?\b(?:is|are|was|were|came\s+back|comes?\s+back|both|all|now)\s+(?:\w+\s+)?"
                   r"(?:green|clean|happy|passe[sd]|passing)\b", _I),
        re.compile(rf"\b{name}\b", _I),
        (
            (lazy(scope + r"(?:Total\s+errors:\s+[1-9]|\bfound\s+[1-9]\d*\s+[a-z ]{0,30}?(?:issues?|warnings?|errors?|problems?|opportunit(?:y|ies)|suggestions?)\b|"
                  r"\b[1-9]\d*\s+(?:problems?|errors?)\b|done\s+\(warnings\s+were\s+emitted\))"), -1),
            (lazy(scope + r"(?:\bfound\s+no\s+(?:issues|errors|problems)\b|done\s+\(passed\s+successfully\)|Total\s+errors:\s+0\b|"
                  r"\bno\s+issues\s+found\b|\bAll\s+checks\s+passed\b|\bSuccess:\s+no\s+issues\b|\b0\s+(?:errors|problems|issues)\b)"), 1),
            # a hook's report lists the checks that failed, each under its [SECTION]: one that runs
            # and does not list this check shows it passed
            (lazy(rf"(?is)\A(?=.{{0,200}}?validation\s+failed)(?=.{{0,400}}?\[[A-Z]{{3,}}\])(?!.*\[{name}\])"), 1),
        ),
        hints=(tool, "validation failed"),  # every outcome names the check or is such a report
    )


for _tool in ("dialyzer", "credo", "eslint", "mypy", "ruff", "flake8", "pylint", "clippy", "tsc", "rubocop", "golangci-lint"):
    ACTIVITIES[f"{_tool} check"] = _static_check(_tool)

# the words that name an activity or its outcome: not what a claim is about
_ACTIVITY_WORDS = re.compile(r"\b(?:merged?|pushed|committed|deployed|released|published|closed|opened|tests?|pass(?:es|ed|ing)?|"
                             r"completed?|finished|done|successful(?:ly)?|succeeded|applied|live|clean|green|sent|was|were|has|have|been|"
                             r"already|also|now|nevertheless|then|afterwards|all|into|to)\b", _I)

# the polarity of a source line that says the work was done in the summary's own words
_SAID = 2

# a claim about how things are now ("tests pass", "the build is green", "is live"), judged by the last
# outcome; any other claim is of an event ("committed", "deployed"), which one success shows happened
_STATE = lazy(r"\b(?:pass(?:es|ing)?|is|are|green|live|compiles?|succeeds)\b", _I)

# a sentence that claims nothing done: a negation, a plan, a partial state, a condition
NOT_DONE = lazy(
    r"\b(?:not|never|nothing|none|neither|nor|no\s+longer|\w+n['’]t|without|yet\s+to|still\s+(?:fail|red|need)|will|would|going\s+to|"
    r"to\s+be|needs?\s+to|should|must|plan(?:s|ned)?\s+to|next|remaining|pending|todo|half|partial(?:ly)?|"
    r"in\s+progress|once|if|until|unless|whether|attempt(?:ed|ing)?|tr(?:y|ied|ying)\s+to)\b",
    _I,
)
# in a plan's section (``text.plan_sections``), only a perfect or passive form still claims something
# done ("is closed", "was finished and pushed", "were already written")
_PERFECT = lazy(r"\b(?:is|are|was|were|has|have|had)\s+(?:been\s+)?(?:also\s+|already\s+|now\s+)?\w+(?:ed|en|t)\b", _I)
_REQUEST = lazy(
    r"\b(?:please|can\s+you|could\s+you|would\s+you|make\s+sure|ensure|should|need\s+to|needs\s+to|must|"
    r"let's|let\s+us|want\s+(?:you|to)|try\s+to|until)\b|\?\s*$",
    _I,
)


@rule("completion", (UNSUPPORTED_COMPLETION,),
      "Work the summary says is done is not contradicted by its last outcome, and has a trace where the "
      "model did it: a tool call that performs it or output that reports it, covering what the claim names.")
def check_completions(ev: Evidence) -> list[GroundingFinding]:
    return completions(ev)


def completions(ev: Evidence) -> list[GroundingFinding]:
    """A finding for each claim of completed work that the conversation contradicts (error), never
    shows (warning), or shows without an outcome (information)."""
    text = ev.text
    claimed = [(name, a) for name, a in ACTIVITIES.items() if a.claim.search(text)]
    if not claimed and not _RAN.search(text) and not _BY_MEANS.search(text) and not _ADDED.search(text) and not _INTO.search(text) \
            and not _TESTS_WRITTEN.search(text):
        return []
    plans = plan_sections(text)
    conversation = [(i, ev.sources[i]) for i in ev.conversation]
    # asking for the work is not doing it: a user's request is no outcome; nor is a tool call's own
    # text (the command, the file text it writes): its output says how it went
    evidence = [(i, s.text) for i, s in conversation
                if not (s.role == "user" and _REQUEST.search(s.text)) and not (s.role == "assistant" and s.call)]
    calls = _calls(ev)
    lowered = {i: t.lower() for i, t in evidence}
    last_change = max((i for i, _, change in calls if change), default=None)
    out: list[GroundingFinding] = _commands_run(ev, plans, calls, last_change)
    out += _file_changes(ev, plans, calls)
    tree: list[tuple[int, int, int]] = []  # the summary's line tree, on first need
    for name, activity in claimed:
        # a source line that itself says it was done ("deployed cart-api v2.1.0 to prod") is an outcome too
        outcomes = (*activity.outcomes, (activity.claim, _SAID))
        judged: list | None = None  # what each source shows of it (``_judge``), once
        for offset, said, clause in _claims(text, activity.claim, plans):
            subjects = _subjects(clause)
            if activity.subject and not subjects:
                # "- spotter-4te.4: ... (it was closed)": the list item's task is what was closed
                subjects = head_ids(text[text.rfind("\n", 0, offset) + 1 : offset])
            if activity.subject and subjects:
                verdict = _about(subjects, name, activity, outcomes, [t for _, t in evidence])
                if verdict is not None:
                    severity, why = verdict
                    out.append(finding("completion", UNSUPPORTED_COMPLETION, severity, said,
                                       f"the summary claims {said!r} but {why}", offset=offset, category=name))
                continue
            if name == "commit" and _shown_commit(clause, evidence, ev):
                continue  # "committed in 5e8d1f0 by ci-bot": the output shows that commit
            if name == "tests" and _named_test_passed(text, offset, evidence, calls):
                continue  # "nginx config test passed": grounded by that test's own success output
            if judged is None:
                judged = _judge([(i, t) for i, t in evidence if any(h in lowered[i] for h in activity.hints)]
                                if activity.hints else evidence, outcomes)
            # work on a named thing ("gqc.6 tests pass") is shown only by what came after the
            # conversation first acted on it (its first tool call naming it)
            since = _first_call_naming(subjects, calls) if subjects else None
            where = f" after the first tool call on {subjects[0]}" if since is not None else ""
            # a claim on a list item headed by a task ("- **spotter-gqc.7** (open): ... (already
            # pushed)") is about that task's work: what the session did while working on it
            worked: set[int] | None = None
            if since is None:  # no subject a tool call acts on ("one-time" is no id): the item's task scopes it
                task = head_task(phases_of(ev), text[text.rfind("\n", 0, offset) + 1 : offset])
                if task is None:
                    tree = tree or line_tree(text)  # built once, on the first claim that needs it
                    task = _ancestor_task(ev, tree, offset)
                if task is not None:
                    worked, where = set(phases_of(ev).worked(task)), f" while the session worked on {task}"
            # "afterwards", "after these edits", "again": about the code as last changed
            if _AFTER_CHANGES.search(clause) and last_change is not None:
                since, worked, where = last_change + 1, None, " after the last file change"

            # "the full suite passed": only a run of the whole suite shows it (not one of named files,
            # nor the model's own remark that tests pass)
            narrowed = _narrowed_units(ev, calls) if name == "tests" and _WHOLE_SUITE.search(clause) else None
            if narrowed is not None:
                where += " over the whole suite (every test run here names its files)"

            def within(i: int) -> bool:
                return ((since is None or i >= since) and (worked is None or i in worked)
                        and (narrowed is None or (ev.command_unit_of[i] not in narrowed and ev.sources[i].role != "assistant")))

            words = word_stems(_ACTIVITY_WORDS.sub(" ", clause))
            scope = [(v, figs) for i, verdict, at, figs, said in judged if within(i)
                     for v in [_verdict(verdict, at, said, words)] if v is not None]
            figures = set(_FIGURE.findall(clause))
            if figures and any(figures & figs for _, figs in scope):
                continue  # "31 tests pass": about the run that printed 31, which passed
            if _cites_success(text, offset, [(i, t) for i, t in evidence if within(i)], outcomes):
                continue  # "the test passes (BUILD SUCCESSFUL in 2m 3s)": about the run it quotes
            verdicts = [v for v, _ in scope]
            state = bool(_STATE.search(said))
            if verdicts and (verdicts[-1] > 0 or (not state and max(verdicts) > 0)):
                continue  # a state holds if its last outcome did; an event happened if any outcome shows it
            if verdicts:
                which = "last outcome" if state else "every outcome"
                severity, why = "error", f"the conversation's {which} of the {name}{where} is a failure"
            elif any((_TEST_RUN if narrowed is not None else activity.mention).search(t) for i, t, _ in calls if within(i)) or any(
                    _under_way(t, activity) for i, t in evidence if ev.sources[i].role == "tool" and within(i)):
                severity, why = "info", f"the conversation runs the {name}{where} but shows no outcome of it (cannot be verified)"
            else:
                severity, why = "warning", f"no tool call{where} performs the {name} and no output reports it"
            out.append(finding("completion", UNSUPPORTED_COMPLETION, severity, said,
                               f"the summary claims {said!r} but {why}", offset=offset, category=name))
    return out


_PARENTHESIS = lazy(r"\(([^()\n]{10,120})\)")


def _cites_success(text: str, offset: int, evidence: list[tuple[int, str]], outcomes) -> bool:
    """The claim's line quotes, in a parenthesis right after it, a success line a run printed verbatim
    ("the test passes (BUILD SUCCESSFUL in 2m 3s)"): it is about that run, whatever ran later."""
    end = text.find("\n", offset)
    m = _PARENTHESIS.search(text, offset, end if end >= 0 else len(text))
    if m is None:
        return False
    cited = m.group(1).strip()
    for _, t in evidence:
        k = t.find(cited)
        if k < 0:
            continue
        a, b = t.rfind("\n", 0, k) + 1, t.find("\n", k)
        line = t[a : b if b >= 0 else len(t)]
        if any(p > 0 and rx.search(line) for rx, p in outcomes) and not any(p < 0 and rx.search(line) for rx, p in outcomes):
            return True
    return False


def _ancestor_task(ev: Evidence, tree: list[tuple[int, int, int]], offset: int) -> str | None:
    """The one task the nearest ancestor line (in ``tree``, ``text.line_tree`` of the summary) of the
    list item at ``offset`` names ("**Current state of gqc.6 work**:" over "- `mix test` passes"): a
    list item states its facts about its head."""
    text = ev.text
    k = text.count("\n", 0, offset)
    phases = phases_of(ev)
    k = tree[k][2]
    while k >= 0:
        a, b, parent = tree[k]
        named = phases.named_in(text[a:b])
        if named:
            return next(iter(named)) if len(named) == 1 else None
        k = parent
    return None


# "the config test", "Monthly restore test:": a single check the line names by what it tests (a
# test suite's parts are plural: "renderer tests", "LiveView tests")
_NAMED_TEST = lazy(r"\b([A-Za-z][\w-]{2,})\s+test\b(?!s|\s+(?:suite|run|file)s?\b)", _I)
_SUITE_WORDS = frozenset({"unit", "integration", "the", "this", "that", "each", "every", "one", "new", "full",
                          "whole", "entire", "first", "last", "same", "failing", "single", "a", "an",
                          # a runner's own command ("`mix test`", "npm test") names the suite, not one test
                          "mix", "npm", "yarn", "pnpm", "bun", "deno", "go", "cargo", "dotnet", "make", "rake"})
_TEST_SUCCESS = lazy(r"\b(?:passed|successful(?:ly)?|succeeded|ok)\b", _I)
_TEST_FAILURE = lazy(r"\b(?:fail(?:ed|s|ure)?|errors?|aborted)\b", _I)
# the exit status a command printed ("exit=0", "exit code 1", "exited with 0")
_EXIT = lazy(r"\bexit(?:ed)?(?:\s+(?:code|status))?\s*(?:[=:]|with)?\s*(\d+)\b", _I)


def _named_test_passed(text: str, offset: int, evidence: list[tuple[int, str]], calls: list[tuple[int, str, bool]]) -> bool:
    """A "test passed" claim on a line that names a single test by what it checks ("nginx config
    test passed", "Monthly restore test: ... Test passed") is about that test, not the test suite:
    it holds when an output line names what it checks with a success word ("configuration file ...
    test is successful"), or a call doing it ("pg_restore") exited 0, and none of them failed."""
    line = text[text.rfind("\n", 0, offset) + 1 : offset + 12]
    named = [m.group(1).lower() for m in _NAMED_TEST.finditer(line) if m.group(1).lower() not in _SUITE_WORDS]
    if not named:
        return False
    core = stem(named[-1])
    shown: list[int] = []
    for _, t in evidence:
        for ln in t.split("\n"):
            if core in ln.lower() and "test" in ln.lower():
                shown.append(-1 if _TEST_FAILURE.search(ln) else 1 if _TEST_SUCCESS.search(ln) else 0)
    by_call = {i for i, t, _ in calls if core in t.lower()}
    for i, t in evidence:
        if i - 1 in by_call or i in by_call:
            shown += [1 if m.group(1) == "0" else -1 for m in _EXIT.finditer(t)]
    return bool(shown) and max(shown) > 0 and min(shown) >= 0


_WHOLE_SUITE = lazy(r"\b(?:full|whole|entire|complete)\s+(?:test\s+)?(?:suite|`[^`\n]{2,40}`\s+run)\b", _I)
# a test run narrowed to named files, tests or patterns ("mix test test/a_test.exs", "pytest -k parser",
# "go test -run TestX"): what it prints is no verdict on the whole suite
_TEST_RUN = lazy(r"(?:^|\"command\":\s*\"|&&|;|\||\$)\s*(?:[A-Z_]+=\S*\s+)*(?:(?:bundle|poetry|uv|npx|pnpm)\s+(?:exec\s+|run\s+)?)?\b(?:mix\s+test|pytest|jest|vitest|rspec|go\s+test|cargo\s+test|(?:npm|yarn|pnpm)\s+(?:run\s+)?test|phpunit|unittest)\b([^|;&\n\"]*)", _I)
_NARROWING = lazy(r"(?:^|\s)(?:\S*/)?\S+[_.](?:test|spec)s?\.\w+\b|(?:^|\s)(?:test|tests|spec)/\S+|::|(?:^|\s)(?:-k|-t|-run|--only|--grep|--testNamePattern|-m)\s", _I)


def _narrowed_units(ev: Evidence, calls: list[tuple[int, str, bool]]) -> set[int] | None:
    """The units (a call with its result) of test runs narrowed to named files or tests; None when
    calls cannot be told apart (no ids), so nothing can be said about which run was the suite."""
    if not any(ev.sources[i].call for i, _, _ in calls):
        return None
    return {ev.command_unit_of[i] for i, t, _ in calls
            if (m := _TEST_RUN.search(t)) and _NARROWING.search(m.group(1))}


# a commit named by its hash: 7 to 40 hex digits with a digit and a letter among them
_HASH = lazy(r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?![\w-])")


def _shown_commit(clause: str, evidence: list[tuple[int, str]], ev: Evidence) -> bool:
    """A commit claim that names the commit by its hash ("committed in 5e8d1f0 by ci-bot") is about
    that commit, not work the session did: a tool output that shows the commit (a log line, a
    "Commit:" field, a commit's own "[branch 5e8d1f0]") shows it exists."""
    hashes = _HASH.findall(clause)
    return bool(hashes) and all(
        any(ev.sources[i].role == "tool" and re.search(rf"(?<![\w-]){h}[0-9a-f]*(?![\w-])", t) for i, t in evidence)
        for h in hashes)


# a tool's progress line ("Running migration 0042 ...", "==> Deploying cart-api"): the activity under way
_PROGRESS_LINE = re.compile(r"(?m)^[ \t>=*-]*[A-Z][a-z]+ing\b[^\n]*")


def _under_way(text: str, activity) -> bool:
    """A tool's output reports the activity under way on a progress line of its own: a trace of
    it (its outcome still unknown), not a mere mention."""
    return any(activity.mention.search(m.group(0)) for m in _PROGRESS_LINE.finditer(text))


def _calls(ev: Evidence) -> list[tuple[int, str, bool]]:
    """(source index, what it does) of every tool call: an assistant line with a call id; when no
    source has one, any assistant or tool line (a call cannot be told from its result); when no
    roles are known, every source. Prose, user messages and project context perform nothing.
    The flag: the call writes text into a file (an edit), known only where calls have ids."""
    sources = ev.sources
    if not ev.roles_known:
        return [(i, sources[i].text, False) for i in ev.conversation]
    with_ids = any(s.call for s in sources)
    out = []
    for i in ev.conversation:
        s = sources[i]
        if with_ids and s.role == "assistant" and s.call:
            action = action_of(s.text)
            out.append((i, action, len(action) < len(s.text) and action != s.text))
        elif not with_ids and s.role in ("assistant", "tool"):
            out.append((i, s.text, False))
    return out


_AFTER_CHANGES = re.compile(r"\bafterwards?\b|\b(?:after|on|with)\s+(?:these|those|all\s+(?:the\s+|these\s+)?|the\s+above|my|our)\s*(?:\w+\s+)?(?:edits?|changes?|fix(?:es)?|updates?)\b|\bagain\b", _I)
# "Ran `mix compile`", "re-ran `pytest -x`": the command quoted is the trace to look for
_RAN = re.compile(r"\b(?:ran|re-?ran|executed|running)\s+`([^`\n]{3,80})`", _I)
# "went in with `git commit --no-verify`", "was reverted via `git revert 1a2b3c4`": done by that command
_BY_MEANS = re.compile(r"\b(?:\w+ed|went\s+in|ran|done)\s+(?:\w+\s+){0,3}?(?:with|via|using|through)\s+`([^`\n]{3,80})`", _I)
# the program a shell command runs: its first word, and the first word after each && ; |
_PROGRAM = re.compile(r"(?:^|&&|;|\||\"command\":\s*\")\s*([A-Za-z][\w.-]*)")


def _programs(call: str) -> set[str]:
    return {m.group(1) for m in _PROGRAM.finditer(call)}


def _commands_run(ev: Evidence, plans: list[tuple[int, int]], calls: list[tuple[int, str, bool]], last_change: int | None) -> list[GroundingFinding]:
    """A claim that a quoted command ran ("Ran `mix compile`", "went in with `git commit --no-verify`")
    needs a tool call that runs it (after the last file change, when the claim says "afterwards"): a
    warning when none does. A command named as the means of done work counts only when its program is
    one the session's calls run (`pool_size: 10` in "configured with `pool_size: 10`" is no command),
    and claims the command worked: when every run of it ended in a failure of what it does (the
    commit's hook failed), an error."""
    text = ev.text
    out: list[GroundingFinding] = []
    programs = {p for _, t, _ in calls for p in _programs(t)}
    ran = [(o, s, c, _RAN.search(s).group(1).strip(), False) for o, s, c in _claims(text, _RAN, plans)]
    ran += [(o, s, c, cmd, True) for o, s, c in _claims(text, _BY_MEANS, plans)
            for cmd in [_BY_MEANS.search(s).group(1).strip()] if " " in cmd and cmd.split()[0] in programs]
    for offset, said, clause, command, means in ran:
        since = last_change + 1 if _AFTER_CHANGES.search(clause) and last_change is not None else None
        runs = [i for i, t, _ in calls if (since is None or i >= since) and (command in t or command in t.replace('\\"', '"'))]
        if runs and not (means and all(_run_failed(ev, i, command) for i in runs)):
            continue
        where = " after the last file change" if since is not None else ""
        severity, why = ("error", f"every run of {command!r} failed") if runs else ("warning", f"no tool call{where} runs {command!r}")
        out.append(finding("completion", UNSUPPORTED_COMPLETION, severity, said,
                           f"the summary claims {said!r} but {why}", offset=offset, category="command"))
    return out


def _run_failed(ev: Evidence, call: int, command: str) -> bool:
    """The result of the tool call at ``call`` ends in a failure of an activity the command performs
    (a commit whose hook failed, a push that was rejected)."""
    unit = ev.command_unit_of[call]
    result = "\n".join(s.text for j, s in enumerate(ev.sources) if s.role == "tool" and ev.command_unit_of[j] == unit)
    verdicts = [o[1] for a in ACTIVITIES.values() if a.outcomes and a.mention.search(command)
                for o in [_outcome(result, a.outcomes)] if o is not None]
    return bool(verdicts) and max(verdicts) < 0


# "added `ignore_warnings` to mix.exs": a literal written into a named file
_ADDED = re.compile(r"\b(?:add(?:ed|ing)|insert(?:ed|ing)|put(?:ting)?)\s+`([^`\n]{2,120})`\s+(?:to|in|into)\s+`?((?:[\w.-]+/)*[\w-]+\.[A-Za-z]{1,5})\b", _I)


# "the CSS went into `priv/static/assets/spotter.css`", "was added to mix.exs": a change of that file
_PATH = (r"`?((?:[\w.-]+/)*[\w-]+\.(?-i:ex|exs|eex|heex|py|pyi|js|mjs|cjs|ts|tsx|jsx|vue|svelte|css|scss|html|md|json|ya?ml|"
         r"toml|ini|cfg|conf|rb|go|rs|java|kt|swift|c|h|cpp|hpp|cs|php|sh|sql|txt|lock|env|xml|gradle|tf|hcl))\b(?![\w/(])")
_INTO = re.compile(rf"\b(?:went|goes|go)\s+into\s+{_PATH}|\b(?:added|written|appended|moved)\s+(?:it\s+|them\s+)?(?:to|into)\s+{_PATH}", _I)
_SHELL_WRITE = re.compile(r"\bsed\s+-i|(?<![\d&>])>>?\s*(?!&)[\w./~$\"']|\btee\b|\bgit\s+(?:apply|checkout|restore|mv)\b|\bpatch\b|\b(?:mv|cp)\s", _I)


_TESTS_WRITTEN = re.compile(
    r"\btests?\b(?:\s+(?:for|of|covering|on)\s+[^.;:\n]{1,60}?)?\s+(?:(?:are|were|was|is|have\s+been|has\s+been)\s+(?:already\s+|also\s+|now\s+)?)?"
    r"(?:written|added|created)\b|\b(?:wrote|added|created)\s+(?:(?!(?:to|in|into|the)\b)\w+\s+){0,3}?tests?\b(?![./\w])", _I)
_WRITING = re.compile(r"\b(?:wr[io]te|written|added|created|for|of|covering|describes?|cases?)\b", _I)
# a test file's path: under test/ tests/ spec/ __tests__/, or named *_test.* *.test.* *_spec.* test_*.*
_TEST_FILE = re.compile(r"(?:^|[\s\"'/])(?:tests?|spec|__tests__)/|[\w-](?:_test|\.test|_spec|\.spec)\.\w+|(?:^|/)test_\w+\.\w+", _I)


_FROM_REFERENCE = re.compile(r"\b(?:after|before|during|alongside|once|since|until|like|than|following)\b.*", _I | re.S)
_PATHLIKE = re.compile(r"[\w.-]*/[\w./-]+")


def _covered(clause: str, calls: list[tuple[int, str, bool]]) -> set[str]:
    """The words of a tests-written claim that name what the tests cover: a word English does not
    have (``LiveView``, ``PubSub``), or one a path the session touched uses ("renderer" of
    ``transcript_renderer.ex``); "comprehensive", "new", "more" describe the tests, they name nothing.
    A test file covers the claim when it holds every such word."""
    clause = _FROM_REFERENCE.sub(" ", clause)  # "written during spotter-fum.1": when, not what
    raw = [t for t in tokens(_ACTIVITY_WORDS.sub(" ", _WRITING.sub(" ", clause)))
           if len(t) >= 3 and t not in STOP_WORDS and not t.isdigit()]
    if not raw:
        return set()
    paths = " ".join(m.group(0) for _, t, _ in calls for m in _PATHLIKE.finditer(t)).casefold()
    english = known_words()
    return {stem(t) for t in raw if t not in english or t in paths}


def _file_changes(ev: Evidence, plans: list[tuple[int, int]], calls: list[tuple[int, str, bool]]) -> list[GroundingFinding]:
    """A claim that a literal was written into a named file ("added `ignore_warnings` to mix.exs")
    needs a file-changing tool call on that file whose written text holds the literal: a warning
    when none does. Judged only where calls can be told apart (they carry ids)."""
    if not ev.roles_known or not any(s.call for s in ev.sources):
        return []  # an edit cannot be told from any other line
    changes = [ev.sources[i].text for i, _, change in calls if change]
    # a shell command that writes a file ("sed -i ... f.css", "cat >> f.css", "git apply") changes it too
    shell = [t for _, t, change in calls if not change and _SHELL_WRITE.search(t)]
    out: list[GroundingFinding] = []
    tests_changed = [t for t in changes + shell if _TEST_FILE.search(t)]
    for offset, said, clause in _claims(ev.text, _TESTS_WRITTEN, plans):
        # "renderer tests were written", "added LiveView tests for the badges": a test file changed
        # whose name or written text shares a word with what the tests are said to cover
        words = _covered(clause, calls)
        if any(not words or all(w in t.casefold() for w in words) for t in tests_changed):
            continue
        why = "no tool call changes a test file" if not tests_changed else "no test file that changes covers it"
        out.append(finding("completion", UNSUPPORTED_COMPLETION, "warning", said,
                           f"the summary claims {said!r} but {why}", offset=offset, category="tests written"))
    for offset, said, clause in _claims(ev.text, _INTO, plans):
        name = next(g for g in _INTO.search(said).groups() if g)
        if any(_writes(call, name, "") for call in changes) or any(name in t for t in shell):
            continue
        out.append(finding("completion", UNSUPPORTED_COMPLETION, "warning", said,
                           f"the summary claims {said!r} but no tool call changes {name}",
                           offset=offset, category="file change"))
    for offset, said, clause in _claims(ev.text, _ADDED, plans):
        m = _ADDED.search(said)
        literal, name = m.group(1).strip(), m.group(2)
        if any(_writes(call, name, literal) for call in changes):
            continue
        out.append(finding("completion", UNSUPPORTED_COMPLETION, "warning", said,
                           f"the summary claims {said!r} but no tool call writes {literal!r} into {name}",
                           offset=offset, category="file change"))
    return out


def _writes(call: str, name: str, literal: str) -> bool:
    open_at = call.find("(")
    try:
        args = json.loads(call[open_at + 1 : -1])
    except ValueError:
        return name in call and literal in call
    if not isinstance(args, dict):
        return False
    values = [v for v in args.values() if isinstance(v, str)]
    return any(v.endswith(name) or "/" + name in v for v in values) and any(literal in v for v in values)


def _first_call_naming(subjects: list[str], calls: list[tuple[int, str]]) -> int | None:
    """The source index of the first tool call that acts on one of ``subjects`` (names it, or its id
    written in full: "gqc.6" is named by "spotter-gqc.6"; and no sibling of it), if any."""
    for i, t, _ in calls:
        if any(_names(t, x, within_id=True) and not _siblings(t, x) for x in subjects):
            return i
    return None


def _siblings(call: str, subject: str) -> bool:
    """``call`` also names other things of the subject's family ("bd show spotter-gqc.5;
    bd show spotter-gqc.6"): a survey of several, not work on one."""
    family = re.split(r"[.\-_#](?=[^.\-_#]*$)", subject)[0]
    if not family or family == subject:
        return False
    return any(family in m and not m.endswith(subject) for m in _subjects(call))


def _about(subjects: list[str], name: str, activity: Activity, outcomes, evidence: list[str]) -> tuple[str, str] | None:
    """A claim that names what it is about (what it closed) is judged by the outcomes that name it:
    (severity, why), or None when one of them shows it done."""
    named = [line for s in evidence for line in s.split("\n") if any(_names(line, x) for x in subjects)]
    as_lines = tuple((rx, 1 if p == _SAID else p) for rx, p in outcomes)
    verdicts = [o[1] for line in named for o in [_outcome(line, as_lines)] if o is not None]
    if verdicts and (verdicts[-1] > 0 or max(verdicts) > 0):
        return None
    what = f"the {name} of {subjects[0]}"
    if verdicts:
        return "error", f"every outcome of {what} is a failure"
    if any(activity.mention.search(line) for line in named):
        return "info", f"the conversation mentions {what} but shows no outcome of it (cannot be verified)"
    return "warning", f"the conversation shows no {name} of {subjects[0]} at all"


def _claims(text: str, claim_rx: re.Pattern[str], plans: list[tuple[int, int]]):
    """(offset, the claim's words, its clause) of every sentence that claims the work done."""
    for offset, sentence in sentences(text):
        in_plan = any(a <= offset < b for a, b in plans)
        for m in claim_rx.finditer(sentence):
            if in_plan and not _PERFECT.search(sentence):
                continue  # an item of a plan ("- tests pass on CI"): a goal, not a claim
            if _NOT_YET.search(sentence[max(0, m.start() - 40) : m.start()]):
                continue  # "look before anything is committed", "(no changes pushed)": it has not happened
            clause = _clause_around(sentence, m.start(), m.end())
            if not NOT_DONE.search(clause):
                yield offset + m.start(), m.group(0), clause
                break


# the event named after "before", "until" or "no …" is one that has not happened
_NOT_YET = lazy(r"\b(?:before|until|unless|no)\s+(?:\w+\s+){0,3}$", _I)
_FIGURE = lazy(r"(?<![\w.])\d+(?:[.,]\d+)?(?![\w.])")


_SUBJECT = lazy(r"(?<![\w.#/-])(?:[A-Za-z][\w]*(?:[-_.][\w]+)+|#\d+)(?![\w-])")


# "closed right after spotter-4te.3", "written during spotter-fum.1", "alongside gqc.5": a thing named
# as a point in time or a comparison is not what the claim is about
_REFERENCE_POINT = lazy(r"\b(?:after|before|during|alongside|once|since|until|like|than|following|as\s+(?:with|in|for))\s+(?:the\s+)?(?:\w+\s+)?$", _I)


def _subjects(clause: str) -> list[str]:
    return [m.group(0).rstrip(".") for m in _SUBJECT.finditer(clause) if any(c.isdigit() or c in "-_#" for c in m.group(0))
            and not _REFERENCE_POINT.search(clause[max(0, m.start() - 40) : m.start()])]


def _names(line: str, subject: str, within_id: bool = False) -> bool:
    """``line`` names ``subject`` itself, not a longer id it begins ("spotter-dov" is not "spotter-dov.1");
    ``within_id``: also as the tail of a longer id ("gqc.6" in "spotter-gqc.6")."""
    i = line.find(subject)
    while i >= 0:
        before, after = line[i - 1 : i], line[i + len(subject) : i + len(subject) + 2]
        if not (before.isalnum() or before in ("_." if within_id else "-_.")) and not (after[:1].isalnum() or after[:1] in "-_" or (after[:1] == "." and after[1:2].isalnum())):
            return True
        i = line.find(subject, i + 1)
    return False


def _judge(evidence: list[tuple[int, str]], outcomes: tuple[tuple[re.Pattern[str], int], ...]) -> list[tuple[int, int, int, set[str], list[tuple[int, str]]]]:
    """For each source with an outcome line: (its index, +1 / -1 of its last outcome line or 0,
    where that line starts, the figures of its successful outcome lines, its lines that say the
    work done in words: (start, line)). A claim that states a figure ("31 tests pass") is about
    the run that printed it."""
    out = []
    patterns = tuple((rx, p) for rx, p in outcomes if p != _SAID)
    said_rx = [rx for rx, p in outcomes if p == _SAID]
    shown: dict[str, tuple | None] = {}  # a text given twice (the same output) shows the same
    for i, text in evidence:
        if text not in shown:
            shown[text] = _shown(text, outcomes, patterns, said_rx)
        if shown[text] is not None:
            out.append((i, *shown[text]))
    return out


def _shown(text: str, outcomes, patterns, said_rx) -> tuple[int, int, set[str], list[tuple[int, str]]] | None:
    """What one source shows for ``_judge`` (None: no outcome line, no line that says it done)."""
    last = _outcome(text, patterns)
    said = []
    for rx in said_rx:
        for m in rx.finditer(text):
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.end())
            line = text[start : end if end >= 0 else len(text)]
            if not NOT_DONE.search(line):
                said.append((start, line))
    if last is None and not said:
        return None
    figures: set[str] = set()
    for rx, polarity in outcomes:
        if polarity < 0:
            continue
        for m in rx.finditer(text):
            a = text.rfind("\n", 0, m.start()) + 1
            b = text.find("\n", m.end())
            line = text[a : b if b >= 0 else len(text)]
            if not any(r.search(line) for r, p in outcomes if p < 0):
                figures.update(_FIGURE.findall(line))
    at, verdict = last if last is not None else (-1, 0)
    return verdict, at, figures, said


def _verdict(verdict: int, at: int, said: list[tuple[int, str]], words: set[str]) -> int | None:
    """A source's verdict for one claim: its last outcome line, or a later line that says the work
    done in words and is about what the claim is about (shares a word of it, when it has any:
    "Attributes are merged" says nothing about "the branch was merged into main")."""
    relevant = [start for start, line in said if not words or words & word_stems(line)]
    if relevant and max(relevant) > at:
        return 1
    return verdict or None


def _clause_around(sentence: str, start: int, end: int) -> str:
    """The clause of ``sentence`` holding [start, end): cut at ; , and before "but"; a claim inside
    a parenthesis ("(open, blocked): Launch X (the hook part was already pushed)") is the
    parenthesis's own clause."""
    lo, hi = 0, len(sentence)
    opened = sentence.rfind("(", 0, start)
    if opened >= 0 and sentence.find(")", opened, start) < 0:
        closed = sentence.find(")", end)
        if closed >= 0:
            lo, hi = opened + 1, closed
    left = max(lo - 1, *(sentence.rfind(sep, lo, start) for sep in (";", ",", " but ", "—", " - "))) + 1
    rights = [i for i in (sentence.find(sep, end, hi) for sep in (";", ",", " but ", "—", " - ")) if i >= 0]
    return sentence[left : min(rights) if rights else hi]


def _outcome(text: str, patterns: tuple[tuple[re.Pattern[str], int], ...]) -> tuple[int, int] | None:
    """(where it starts, +1 / -1) of the last outcome line in ``text``, if any; a line that reports
    both ("3 failed, 12 passed") is a failure."""
    lines: dict[int, int] = {}
    for rx, polarity in patterns:
        for m in rx.finditer(text):
            start = text.rfind("\n", 0, m.start()) + 1
            lines[start] = min(lines.get(start, polarity), polarity)
    if not lines:
        return None
    last = max(lines)
    return last, lines[last]
