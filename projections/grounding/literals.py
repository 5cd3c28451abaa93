"""Rule ``literal``: every literal a summary states must be in something its summarizer saw.

A literal is a specific (``projections.grounding.specifics``): a quotation, a number with its unit,
a time, a date, a version, an id, a hash, a path, a URL, a host, a name. One that no source states,
after normalization, is an invented or altered fact -- the seed's "the migration completed at
14:02" -- and an error. What the contract does not call a literal is graded down:

- a person no source names, as the summary's actor ("approved by Priya", "Omar said"), is a warning: an
  entity that appears nowhere; a one-word name in any other place ("Prometheus", "HSTS", "p99") is
  information, since it is the field's vocabulary as often as an invention (``projections.grounding.names``);
- what a faithful summary may produce without copying it is information: a bare count ("8 ready
  issues": the summarizer counted), a capitalized word at the start of a sentence, unless the
  sources state a different count of the same thing (then it was altered: an error);
- a quotation that differs from the source's words by small edits is a near-quote (information),
  and so is a quotation of a pattern written with placeholders (`00-<32hex>-<16hex>-01`) whose
  fixed parts a source states.

A source states a literal in other written forms too: a figure converted to another unit and
rounded to the precision the summary writes, where the pairing cannot be chance
(``projections.grounding.conversions``); a name in another case or with other separators, or as the
initials of words a source writes (``projections.grounding.names``). A line position or the digits
of a hash state no figure (``SourceIndex``).
"""

from __future__ import annotations

import re
from collections import Counter
from difflib import SequenceMatcher
from itertools import accumulate, compress, count

from projections.grounding.arithmetic import observation_arithmetic, percentage_points, summary_arithmetic
from projections.grounding.chance import singles_out
from projections.grounding.conversions import converted, ratio_as_percent, time_in_zone
from projections.grounding.evidence import Evidence
from projections.grounding.lazy import lazy
from projections.grounding.names import acronym_stated, name_stated, named_as_actor, one_word
from projections.grounding.restated import Figures, cited_steps, derived, restated, rounded_in_dimension
from projections.grounding.registry import GroundingFinding, finding, rule
from projections.grounding.specifics import SourceIndex, Specific, parse_number, tokens
from projections.grounding.text import at_line_position, plan_sections
from projections.grounding.vocabulary import common_lowercase_words

__all__ = ["UNSUPPORTED", "NEAR_QUOTE", "unsupported", "NEAR_QUOTE_RATIO"]

UNSUPPORTED = "unsupported-specific"
NEAR_QUOTE = "near-quote"
NEAR_QUOTE_RATIO = 0.9  # a quote this close to source words (by character edits) is a near-quote, not an invention

_FIGURES = ("number", "quantity")
_CATEGORY_WORDS = {
    "time": "time", "date": "date", "quantity": "quantity", "number": "number", "version": "version",
    "uuid": "UUID", "hash": "hash", "code": "code", "identifier": "identifier", "path": "path",
    "url": "URL", "email": "email address", "host": "host", "quote": "quotation", "name": "name",
}
# metasyntax in a quoted pattern: <32hex>, ${trace_id}, {id}, ..., …, XXX
_PLACEHOLDER = lazy(r"<[^<>\s]{1,40}>|\$\{[^}]{1,40}\}|\{[A-Za-z_][\w.]{0,30}\}|\.\.\.|…|\bX{3,}\b")


@rule("literal", (UNSUPPORTED, NEAR_QUOTE),
      "A literal the summary states (a quotation, a number with its unit, an id, a hash, a path, a time) "
      "is in something the summarizer saw.", claims=False)
def check_literals(ev: Evidence) -> list[GroundingFinding]:
    units = [ev.units[u] for u in ev.unit_of] if len(ev.sources) == len(ev.index.texts) else None
    return unsupported(ev.text, ev.index, found=ev.found, units=units)


def unsupported(text: str, index: SourceIndex, *, found: list[Specific],
                units: list[tuple[int, ...]] | None = None) -> list[GroundingFinding]:
    """Findings for the specifics ``found`` in ``text`` that ``index`` does not support (``units``:
    for each source, the sources of its unit of evidence)."""
    out: list[GroundingFinding] = []
    seen: set[str] = set()
    figures: Figures | None = None  # built on first need
    n_sources = len(index.texts)
    # a quoted pattern (`00-<32hex>-<16hex>-01`) is checked whole: the figures inside it are its own
    patterns = [(sp.start, sp.end) for sp in found if sp.category == "quote" and _PLACEHOLDER.search(sp.text)]
    quotes = [(sp.start, sp.end) for sp in found if sp.category == "quote"]
    known: dict[int, bool] = {}  # operand start -> grounded, each judged once per summary

    def grounded(o: Specific) -> bool:  # the sources state it, or it is their arithmetic
        got = known.get(o.start)
        if got is None:
            got = known[o.start] = not _in_quote(o, quotes) and (
                index.supports(o)[0] or restated(o, figures_of()) or computed(o, text, index) != "")
        return got

    def figures_of() -> Figures:  # the sources' figures, built on first need and shared
        nonlocal figures
        figures = figures or Figures.of(index)
        return figures

    for sp in found:
        if patterns and sp.category != "quote" and _in_quote(sp, patterns):
            continue
        if _section_label(sp, text) or _markup_tag(sp, text) or _rate_base(sp, text):
            continue
        ok, near = index.supports(sp)
        # a measure ("4.6 s", "1.4 MB", "87%") no source states in its dimension: the digits alone, or
        # a derivation found by search, must single it out (``chance``). A count ("23 tests") may be
        # the summarizer's own counting and a bare figure's digits are its literal: not probed.
        # a setting ("capped at 5,000 entries", "a limit of 200 connections") is read in code or config,
        # never counted: its digits somewhere else do not state it either
        loose = (sp.category == "quantity" or _setting(sp, text)) and not sp.weak and not index.states_literally(sp)
        if loose:
            figures = figures or Figures.of(index)
            loose = not rounded_in_dimension(sp, figures)
        if ok and loose and not singles_out(sp, lambda p: index.supports(p)[0]):
            ok = False  # its digits occur, as most figures' around it do: chance, no statement of it
        remeasured = False
        if ok and sp.category == "number" and not sp.noun:
            other = _measure_otherwise(sp, text, index)
            if other:  # "complexity 6" where the tools print "complexity is 13": altered, not computed
                ok, near, remeasured = False, other, True
        if ok:
            continue
        if _stated_otherwise(sp, text, index, found, units) and not (
            loose and not singles_out(sp, lambda p: _stated_otherwise(p, text, index, found, units))
        ):
            continue
        if sp.category in _FIGURES and not sp.weak and not (sp.noun and near):  # near: the count was altered
            figures = figures or Figures.of(index)
            if restated(sp, figures) and singles_out(sp, lambda p: restated(p, figures)):
                continue
        if sp.key in seen:
            continue
        seen.add(sp.key)
        if sp.category == "quote":
            note = _quote_note(sp, index)
            if note is not None:
                close, why = note
                out.append(finding("literal", NEAR_QUOTE, "info", sp.text, why.format(q=sp.text, close=close),
                                   offset=sp.start, category="quote", near=[close] if close else []))
                continue
        severity = _severity(sp, near, text)
        altered = remeasured or sp.category == "number" and sp.noun and near and not _REMAINDER.search(text[max(0, sp.start - 16) : sp.start])
        how = computed(sp, text, index) if severity != "info" and not altered else ""
        if not how and severity != "info" and not altered and sp.category in _FIGURES:
            figures = figures or Figures.of(index)
            cited = cited_steps(text, sp)
            if derived(sp, figures, cited) and singles_out(sp, lambda p: derived(p, figures, cited)):
                how = "one step of arithmetic over two figures the sources state"
        if not how and severity != "info" and sp.category == "number" and not _in_quote(sp, quotes):
            how = percentage_points(sp, text, found, index, grounded)
        if not how and severity != "info" and sp.category in _FIGURES and not _in_quote(sp, quotes):
            # a figure inside a quotation is what a source is said to have printed, not arithmetic;
            # one step of chaining: "790,000", the sum of two grounded figures, may be an operand of "62%"
            how = summary_arithmetic(sp, text, found, lambda o: grounded(o) or summary_arithmetic(o, text, found, grounded) != "")
        if how:
            severity = "info"  # the summarizer's arithmetic, which no source prints: cannot be verified
        elif severity != "info" and sp.category in (*_FIGURES, "quote") and _example_of_a_proposal(text, sp.start):
            severity = "info"
            how = "an example in a proposal, not a fact of the session"
        what = _CATEGORY_WORDS.get(sp.category, sp.category)
        message = f"{what} {sp.text!r} is " + (
            "not in its source observation" if n_sources == 1 else f"in none of its {n_sources} source observations"
        )
        if near:
            message += f" (they say {', '.join(repr(x) for x in near)})"
        elif how:
            message += f" (it may be computed: {how})"
        elif sp.weak and sp.category == "number":
            message += " (a count may have been inferred)"
        elif sp.weak and sp.category == "name":
            message += " (a possible name in lower-cased text)"
        out.append(finding("literal", UNSUPPORTED, severity, sp.text, message, offset=sp.start,
                           category=sp.category, near=list(near)))
    return out


# "USER_CONTEXT:", "CODE_STATE:" -- the capitalised field names a summary template lays its lines out by
_LABEL_HEAD = re.compile(r"(?:[ \t]*(?:[-*+]|\d+[.)]|#+)?[ \t]*\**)$")


def _in_quote(sp: Specific, quotes: list[tuple[int, int]]) -> bool:
    return any(a <= sp.start and sp.end <= b for a, b in quotes)


_SETTING_BEFORE = re.compile(r"\b(?:capped|limited|bounded|throttled)\s+(?:at|to)\s+(?:most\s+)?$|"
                             r"\b(?:a\s+)?(?:cap|limit|maximum|minimum|ceiling|threshold|quota)\s+of\s+$", re.I)


# the measure a bare figure is the value of: the word right before it ("complexity 6", "depth of 4")
_MEASURE_BEFORE = re.compile(r"\b([a-z]{4,})\s+(?:(?:is|of|at|to|was|=|:)\s+)?$", re.I)


def _measure_otherwise(sp: Specific, text: str, index: SourceIndex) -> list[str]:
    """The values the sources give the measure a bare figure is stated as ("complexity 6"), when they
    give it values and never this one: a tool that prints "cyclomatic complexity is 13" states the
    measure with its value (a linking "is", ":" or "=" between them, so "task 4" is a label, not a
    measure), and a summary giving it a value no source gives it altered the figure. Empty when the
    sources never state the measure, or state this value for it."""
    m = _MEASURE_BEFORE.search(text, max(0, sp.start - 24), sp.start)
    if m is None or m.group(1).lower() in _NOT_MEASURES:
        return []
    key = m.group(1).lower()
    values = []
    lower = index.lower
    at = lower.find(key)
    while at >= 0 and len(values) < 50:  # str.find, then a match where it lands: the audit's hot path
        if at == 0 or not (lower[at - 1].isalnum() or lower[at - 1] == "_"):
            v = _MEASURE_VALUE.match(lower, at + len(key))
            if v is not None:
                values.append(v.group(1))
        at = lower.find(key, at + 1)
    if not values or any(float(v) == sp.value for v in values):
        return []
    return sorted(set(values), key=values.index)[:3]


# what follows a measure's name in a source that gives it a value: "complexity is 13", "depth: 4"
_MEASURE_VALUE = re.compile(r"\w*\s*(?:is|=|:)\s*(-?\d+(?:\.\d+)?)(?![\w.])")
# words a figure follows that name no measure of a thing ("than 6", "from 4 to 6", "about 6")
_NOT_MEASURES = frozenset("""than from into onto about around nearly almost over under only just least most
    more less with without above below after before since until within""".split())


def _setting(sp: Specific, text: str) -> bool:
    """A figure given as a setting or limit of something ("capped at 5,000 entries", "a limit of 200
    connections"): the summarizer read it, it did not count it. A bound it may have worked out ("at
    most 15 s of backoff" over 1, 2, 4 and 8 s; "applied up to 0042") is not a setting."""
    return sp.category == "number" and bool(_SETTING_BEFORE.search(text, max(0, sp.start - 30), sp.start))


_PER_BEFORE = re.compile(r"\b(?:per|in\s+every)\s+$", re.I)


def _rate_base(sp: Specific, text: str) -> bool:
    """"1.6 per 10,000": the figure after "per" is the unit a rate is given in, not a stated literal."""
    return sp.category == "number" and bool(_PER_BEFORE.search(text, max(0, sp.start - 12), sp.start))


def _markup_tag(sp: Specific, text: str) -> bool:
    """``</summary>``, ``</analysis>``: the closing tag of the wrapper a harness asks the summary to be
    written in is markup, not a path."""
    return sp.category == "path" and sp.start > 0 and text[sp.start - 1] == "<" and text.startswith(">", sp.end)


def _section_label(sp: Specific, text: str) -> bool:
    """A capitalised label that heads a line and ends in a colon ("VERSION_CONTROL_STATUS: clean") is
    the summary's own layout -- the field names of the template it fills -- not a literal it states."""
    if sp.category not in ("code", "name", "identifier") or not sp.text.isupper():
        return False
    line_start = text.rfind("\n", 0, sp.start) + 1
    return text.startswith(":", sp.end) and bool(_LABEL_HEAD.match(text[line_start : sp.start]))


def _stated_otherwise(sp: Specific, text: str, index: SourceIndex, found: list[Specific],
                      units: list[tuple[int, ...]] | None) -> bool:
    """A literal the sources state in another written form the index does not normalize: verbatim
    inside a longer token, a listing's line number, a rounded or re-expressed figure, a count joined
    to its noun, a class of status codes written as a pattern."""
    if _verbatim(sp.text, index, file_positions=sp.category != "number"):
        return True
    if sp.category == "quote" and _one_identifier(sp.text):
        return name_stated(_ARITY.sub("", sp.text.strip("`")), index)  # `max_replicas` for maxReplicas
    if sp.category == "number":
        if sp.text[:1] in "+-−" and abs(sp.value) in index.numbers:
            return True  # "+12/-3": the sign says which way a count of lines went
        return _listing_figure(sp, text, index)
    if sp.category == "quantity":
        return converted(sp, text, index, found=found, units=units) or ratio_as_percent(sp, text, index)
    if sp.category == "time":
        return time_in_zone(sp, text, index)
    if sp.category == "date" and _date_in_a_name(sp, index):
        return True
    if sp.category == "host" and _host_port_together(sp.text, index):
        return True
    if sp.category in ("name", "identifier", "host"):
        if name_stated(sp.text, index) or sp.category == "name" and acronym_stated(sp.text, index):
            return True
    if sp.category == "identifier":
        return _count_compound(sp, index)
    if sp.category == "code" and isinstance(sp.value, tuple):
        return _code_class_pattern(sp, index)
    if sp.category == "code" and re.fullmatch(r"#\d+", sp.text):
        # a pull request, issue or build by number, as a tool prints it ("number": 977, pull/977), or
        # as a segment of the URL it is read from (Jenkins' .../job/main/877/consoleText)
        n = sp.text[1:]
        return re.search(r'"number"\s*:\s*' + n + r'(?!\d)|\b(?:pull|pulls|issues?|pr|merge_requests)[/#: ]+' + n + r'(?!\d)'
                         r'|https?://[^\s"\'<>]*/' + n + r'(?:/|(?![\w.-]))', index.lower) is not None
    if sp.category == "code" and "/" in sp.text and "#" in sp.text:
        repo, _, number = sp.text.lower().rpartition("#")
        return re.search(re.escape(repo) + r"/(?:issues|pull)/" + number + r"(?!\d)", index.lower) is not None
    return False


def _verbatim(written: str, index: SourceIndex, *, file_positions: bool = True) -> bool:
    """What a source says verbatim is stated, also inside a longer token (``70%`` in ``91%/70%``,
    ``4.14.1`` in ``node-sass@4.14.1``) or with its dots escaped in a search pattern (``1\\.21``), as long
    as it is not part of a longer word or figure;
    without ``file_positions``, not as a file position either (``983:47`` in ``decoder.ex:983:47``)."""
    w = written.strip().lower()
    if len(w) < 2 or w.startswith(("`", '"', "'", "“")):
        return False
    # a pattern a tool call searches for writes the literal with its dots escaped (`rg '^go 1\.21'`)
    for m in re.finditer(r"(?<![\w.])" + re.escape(w).replace(r"\.", r"\\?\.") + r"(?![\w]|\.\d)", index.lower):
        if file_positions or not _FILE_POSITION.search(index.lower, max(0, m.start() - 24), m.start()):
            return True
    return False


_FILE_POSITION = lazy(r"[\w-]\.[a-z][a-z0-9]{0,5}:(?:\d{1,6}:)?$")


_COUNT_COMPOUND = re.compile(r"(\d+(?:\.\d+)?)-([a-z]{3,})")


_HOST_PORT = re.compile(r"(.+):(\d{1,5})")


def _host_port_together(written: str, index: SourceIndex) -> bool:
    """``10.8.1.10:6379`` is stated by one observation that gives the host and the port
    (``14:02:05 10.8.1.10 6379``): the summarizer joined what it printed together."""
    m = _HOST_PORT.fullmatch(written.lower())
    if m is None:
        return False
    host, port = m.group(1), float(m.group(2))
    for specs in index.per_text:
        hosts = {o.text.lower().split(":")[0] for o in specs if o.category == "host"}
        if host in hosts and any(o.category == "number" and o.value == port for o in specs):
            return True
    return False


def _count_compound(sp: Specific, index: SourceIndex) -> bool:
    """A number joined to an English noun by a hyphen (``12-replica``, ``3-node``) is a count of it,
    stated when the number is."""
    m = _COUNT_COMPOUND.fullmatch(sp.text.lower())
    if m is None or m.group(2).rstrip("s") not in common_lowercase_words() and m.group(2) not in common_lowercase_words():
        return False
    return float(m.group(1)) in index.numbers


def _date_in_a_name(sp: Specific, index: SourceIndex) -> bool:
    """A full date a source writes inside a file name, a branch or a tag, in ISO order with any
    separator (``baseline-heap-2024-03-01.txt``, ``backup_20240301``): the name states the date."""
    values = sp.value if isinstance(sp.value[0], tuple) else (sp.value,)
    for year, month, day, _ in values:
        if year is None or month is None or day is None:
            continue
        if re.search(rf"(?<!\d){year:04d}[-_.]?{month:02d}[-_.]?{day:02d}(?!\d)", index.lower):
            return True
    return False


def _code_class_pattern(sp: Specific, index: SourceIndex) -> bool:
    """A class of status codes (``5xx``) a source writes as a pattern (``code=~"5.."``, ``5\\d\\d``)."""
    first = sp.text.strip()[:1]
    return re.search(r"(?<![\w.])" + re.escape(first) + r"(?:\.\.|\\d\\d|\[0-9\]\[0-9\])", index.lower) is not None


def _listing_figure(sp: Specific, text: str, index: SourceIndex) -> bool:
    """A file listing's gutter states line positions ("line 50", "L50") and the listing's length
    ("312 lines"), nothing else."""
    if sp.value in index.line_numbers and at_line_position(text, sp.start):
        return True
    return sp.value in index.listing_lengths and sp.noun.lower() in ("line", "lines")


# "a longer run (e.g. 5000 iterations) would show it": the figure is an example of what could be done
_EXAMPLE_BEFORE = lazy(r"(?:\be\.g\.,?|\bfor (?:example|instance),?|\bsay,?)\s*(?:~|about\s+)?$", re.I)
_PROPOSAL = lazy(r"\b(?:would|could|might|should|may|can|try|consider|if)\b", re.I)


def _example_of_a_proposal(text: str, start: int) -> bool:
    """The figure or code at ``start`` is given as an example ("e.g.", "for example", "say") in a
    sentence that proposes or supposes ("would", "could", "if"), or in a plan's section ("Optional Next
    Step:"): what might be done states nothing that was."""
    if not _EXAMPLE_BEFORE.search(text[max(0, start - 20) : start]):
        return False
    a = max(text.rfind(". ", 0, start), text.rfind("\n", 0, start)) + 1
    ends = [i for i in (text.find(". ", start), text.find("\n", start)) if i != -1]
    if _PROPOSAL.search(text[a : min(ends) if ends else len(text)]) is not None:
        return True
    return any(lo <= start < hi for lo, hi in plan_sections(text))


def _severity(sp: Specific, near: list[str], text: str) -> str:
    if sp.category == "name" and not sp.weak and one_word(sp.text) and not named_as_actor(text, sp.start, sp.end):
        # a word of the field's vocabulary as often as an invention: no evidence either way. Text with no
        # capital at all (``weak``: XSum's lower-cased references) keeps the warning: there an unknown
        # word is the only sign of a name, and nothing tells a product from a person
        return "info"
    if sp.weak and sp.category == "name":
        return "warning"  # a possible name in lower-cased text (no capital to tell): one no source uses
    if sp.weak:
        # A small count is the summarizer's own (it counted), unless the sources state a different
        # count of the same thing: then it was altered.
        if sp.category == "number" and sp.noun and near:
            return "error"
        return "info"
    if sp.category == "name" and _proper_name(sp.text):
        return "warning"
    return "error"


def _proper_name(text: str) -> bool:
    """A plain name (``Rotili``, ``Priya``, ``GDPR``), not an identifier (``LiveView``,
    ``billing-api``, ``retry_budget``), which is a literal like any id."""
    body = text[:-2] if text.endswith("'s") else text
    return body.isalpha() and (body.isupper() or body[1:].islower())


def _quote_note(sp: Specific, index: SourceIndex) -> tuple[str, str] | None:
    """(closest source words, message) when an unsupported quotation is a near-quote: the same
    words misquoted, code re-typed from what was read, or a pattern whose fixed parts a source
    states; None when it is an invention."""
    if _one_identifier(sp.text) and not _identifier_stated(sp.text, index):
        return None  # a different identifier, however close its spelling: an invention, not a misquote
    close = _near_quote(sp.value, index)
    if close is not None:
        return close, "quotation {q!r} is not verbatim; the closest source words are {close!r}"
    close = _code_words(sp, index)
    if close is not None:
        return close, "quotation {q!r} is not verbatim; the closest source words are {close!r}"
    if _pattern_stated(sp.text, index):
        return "", "quotation {q!r} is a pattern (placeholders stand for values); its fixed parts are in the sources"
    return None


_ARITY = re.compile(r"/\d$")


def _one_identifier(quoted: str) -> bool:
    """A code span that is one dotted or joined name (`Spotter.Services.Tail.Pool`, `put_debug/2`)."""
    inner = quoted.strip("`")
    return quoted.startswith("`") and len(inner) > 2 and not any(c.isspace() for c in inner) and not _PLACEHOLDER.search(inner)


def _identifier_stated(quoted: str, index: SourceIndex) -> bool:
    """An identifier is stated when a source writes its name parts in that order, with any case and
    separators (``names``); an arity (``/2``) is the summarizer's notation for a function the
    sources define or call."""
    bare = _ARITY.sub("", quoted.strip("`"))
    words = tokens(bare)
    return not words or f" {' '.join(words)} " in index.norm or name_stated(bare, index)


def _pattern_stated(quoted: str, index: SourceIndex) -> bool:
    """A quoted pattern (``00-<32hex>-<16hex>-01``): placeholders aside, every fixed part of it is
    in one source."""
    inner = quoted.strip("`\"'“”")
    if not _PLACEHOLDER.search(inner):
        return False
    parts = [p.strip() for p in _PLACEHOLDER.split(inner)]
    parts = [p for p in parts if p.strip("-_.,:;/ ")]
    if not parts:
        return False
    lowered = [t.lower() for t in index.texts]
    return any(all(p.lower() in t for p in parts) for t in lowered)


def _near_quote(value: str, index: SourceIndex) -> str | None:
    """The source words closest to a quote that is not verbatim, when they differ by small edits
    (a word changed or dropped, different punctuation, a typo): the same words, misquoted."""
    words = value.split()
    if len(words) < 3:
        return None
    want = len(words)
    wanted = set(words)
    matcher = SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(value)  # the quote is the sequence the matcher indexes, once
    counted = Counter(value)
    value_chars, value_counts = tuple(counted), tuple(counted.values())
    n_value = len(value)
    best, best_ratio = None, 0.0
    scanned: set[int] = set()
    for toks, tok_set in zip(index.tok_lists, index.tok_sets):
        if len(wanted.intersection(tok_set)) < want / 2 or id(toks) in scanned:
            continue  # (a text read twice holds the same token list: its windows cannot do better)
        scanned.add(id(toks))
        # a window is tried only where its first or last token is a word of the quote
        hits = list(compress(count(), map(wanted.__contains__, toks)))
        ends = list(accumulate(map(len, toks), initial=0))  # ends[i]: the characters of toks[:i]
        for size in (want - 1, want, want + 1):
            if size < 1 or size > len(toks):
                continue
            last = len(toks) - size
            starts = sorted({i for i in hits if i <= last} | {j for i in hits if 0 <= (j := i - size + 1) <= last})
            for i in starts:
                # the upper bounds of difflib's ratio, cheapest first (the same arithmetic as
                # real_quick_ratio and quick_ratio): most windows cannot reach the ratio
                floor = max(best_ratio, NEAR_QUOTE_RATIO)
                n = ends[i + size] - ends[i] + size - 1  # len(" ".join(window))
                if 2.0 * min(n, n_value) / (n + n_value) < floor:
                    continue
                candidate = " ".join(toks[i : i + size])
                common = sum(map(min, map(candidate.count, value_chars), value_counts))  # quick_ratio's matches
                if 2.0 * common / (n + n_value) < floor:
                    continue
                matcher.set_seq1(candidate)
                ratio = matcher.ratio()
                if ratio > best_ratio:
                    best, best_ratio = candidate, ratio
    return best if best_ratio >= NEAR_QUOTE_RATIO else None


def _code_words(sp: Specific, index: SourceIndex) -> str | None:
    """A backticked code span whose every word one source uses: code re-typed from what was read
    (``{:ok, trace_id} | :error``), not copied; a note, not an invention. Words scattered over a long
    session's many texts are no reading of one thing: "invalid", "span" and "ArgumentError" each occur
    somewhere in any big Elixir session."""
    if not sp.text.startswith("`"):
        return None
    pieces = sp.text.strip("`").split()
    plain = [w for w in pieces if w.isalpha() and w.islower() and w in common_lowercase_words()]
    if len(plain) >= 2 and 2 * len(plain) >= len(pieces):
        return None  # a message in backticks ("variable is unused"), not code: it is quoted, and checked as a quote
    words = tokens(sp.text)
    if len(words) >= 2 and all(w in index.toks for w in words) and any(
            all(w in tok_set for w in words) for tok_set in index.tok_sets):
        return " ".join(words)
    return None


# -- figures the summarizer computed ------------------------------------------------------------

_OF_TOTAL = lazy(r"\s*(?:of|out\s+of|/)\s*\d")
_FIGURE = lazy(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])\d+(?:\.\d+)?(?![\w])")


_ORDINAL_WORDS = {w: i + 1 for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split())}
_WORD_FIGURE = re.compile(r"\b[A-Za-z]+\b")


# "the other 8", "the remaining 3": a remainder the summarizer computed from a whole the sources count
_REMAINDER = re.compile(r"\b(?:other|remaining|rest\s+of\s+the)\s+$", re.I)


def _figures(line: str, *, words: bool = False) -> list[float]:
    """The figures a line states in digits; with ``words``, also in words ("Five of the 37", "the
    fourth")."""
    out = [float(m.group(0).replace(",", "")) for m in _FIGURE.finditer(line)]
    if not words:
        return out
    for m in _WORD_FIGURE.finditer(line):
        w = m.group(0).lower()
        n = _ORDINAL_WORDS.get(w) or (parse_number(w) if w not in ("a", "an") else None)
        if n is not None and n > 1:
            out.append(float(n))
    return out


def _line_at(text: str, offset: int) -> str:
    a = text.rfind("\n", 0, offset) + 1
    b = text.find("\n", offset)
    return text[a : b if b >= 0 else len(text)]


def computed(sp: Specific, text: str, index: SourceIndex) -> str:
    """How a number no source states could be the summarizer's own arithmetic, or "": a position or
    count out of a total ("job 4 of 7"); a sum, difference or percentage of two figures stated
    together (on one line of the summary, or one line of a source: "2 failed, 311 passed" gives
    313); a figure a source states in another unit of the same dimension, to the precision it is
    written with ("18874368" KiB is "about 18 GiB"). Only figures stated together count: in a long
    session almost any number is the sum of some two others."""
    if sp.category not in ("number", "quantity"):
        return ""
    if sp.category == "number" and _OF_TOTAL.match(text, sp.end):
        return "a count out of a total"
    if sp.category == "quantity":
        dim, values = sp.value
        v = values[0]
        if dim == "%":
            return _percentage(v, text, sp, index) or observation_arithmetic(sp, text, index)
        return _converted(dim, values, text, sp, index) or observation_arithmetic(sp, text, index)
    return _arithmetic(float(sp.value), text, sp, index)


def _pairs_in(lines: list[list[float]]):
    for figures in lines:
        for i, a in enumerate(figures):
            for b in figures[i + 1 :]:
                yield a, b


def _lines_with_figures(text: str, sp: Specific, index: SourceIndex) -> list[list[float]]:
    """The figures of the summary's own line (without ``sp``), and of each source line that shares
    one of them: arithmetic counts only over figures the summary itself states or cites."""
    start = text.rfind("\n", 0, sp.start) + 1
    own = _line_at(text, sp.start)
    mine = _figures(own[: sp.start - start] + " " + own[sp.end - start :])
    out = [mine]
    anchors = {f for f in mine}
    if not anchors:
        return out
    for t in index.texts:
        if len(t) > 200_000:
            continue
        for line in t.split("\n"):
            if any(c.isdigit() for c in line):
                figures = _figures(line)
                if 2 <= len(figures) <= 12 and anchors.intersection(figures):
                    out.append(figures)
    return out


def _arithmetic(v: float, text: str, sp: Specific, index: SourceIndex) -> str:
    lines = _lines_with_figures(text, sp, index)
    for figures in lines:
        if len(figures) > 2 and sum(figures) == v:
            return "the total of the figures stated together"
    start = text.rfind("\n", 0, sp.start) + 1
    own = _line_at(text, sp.start)
    spoken = _figures(own[: sp.start - start] + " " + own[sp.end - start :], words=True)
    for a, b in _pairs_in([spoken, *lines[1:]]):
        if v in (a + b, abs(a - b)) and v not in (a, b):
            return f"the sum or difference of {a:g} and {b:g}, stated together"
    return ""


def _percentage(v: float, text: str, sp: Specific, index: SourceIndex) -> str:
    step = max(0.5, 10.0 ** -len(sp.text.split(".", 1)[1].rstrip("% ")) if "." in sp.text else 0.5)
    for a, b in _pairs_in(_lines_with_figures(text, sp, index)):
        for part, whole in ((a, b), (b, a)):
            if whole and 0 < part <= whole and abs(100 * part / whole - v) <= step:
                return f"{part:g} of {whole:g}, as a percentage"
    return ""


def _converted(dim: str, values: tuple[float, ...], text: str, sp: Specific, index: SourceIndex) -> str:
    from projections.grounding.specifics import unit_factors

    written = _first_figure(sp.text)
    if written is None:
        return ""
    step = _written_step(sp.text)
    start = text.rfind("\n", 0, sp.start) + 1
    own = set(_figures(_line_at(text, sp.start)[: sp.start - start]))  # figures the summary states before it
    for n in own & index.numbers:
        if n < 100:
            continue  # a short figure converts into too many others by chance
        for f in unit_factors(dim):
            for v in values:
                scale = v / written if written else 0
                if f and scale and f != scale and abs(n * f - v) <= max(step * scale, 0.1 * v if sp.hedge else 0):
                    return f"{n:g} in another unit"
    return ""


def _first_figure(text: str) -> float | None:
    m = _FIGURE.search(text)
    return float(m.group(0).replace(",", "")) if m else None


def _written_step(text: str) -> float:
    m = _FIGURE.search(text)
    if m is None:
        return 0.0
    digits = m.group(0).replace(",", "")
    return 0.5 * 10.0 ** -len(digits.split(".", 1)[1]) if "." in digits else 0.5
