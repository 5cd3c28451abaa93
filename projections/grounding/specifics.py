"""Specifics: the checkable facts in a text, and what counts as the same fact written differently.

A *specific* is a piece of text a summary can get wrong in a way a reader cannot repair from context:
a number, a quantity with its unit, a time, a date, a version, an identifier (UUID, hash, ticket or
error code), a file path, a URL, an email address, a quoted string, or a name (a service, a host, a
person, a CamelCase or snake_case identifier). ``extract(text)`` finds them with regular expressions
(deterministic, offline, no model); ``SourceIndex(texts)`` indexes what a set of source texts states so
that ``SourceIndex.supports(specific)`` can answer whether a derived text's specific is grounded.

Normalization is deliberately forgiving where a careful reviewer would be, and strict elsewhere:
case and separators never matter (``billing-api`` = ``Billing API`` = ``BillingAPI``); ``14:02`` is
supported by ``14:02:00`` or ``14:02:37`` but ``14:02:37`` is not supported by ``14:02``; ``30s`` =
``30 seconds`` = ``half a minute`` is not attempted but ``90 seconds`` = ``1.5 minutes`` is; ``three``
= ``3``; ``v2`` = ``2.0``; a hedged number ("about 1,200") may round; a short path or hash may stand
for a longer one it is a suffix or prefix of.
"""

from __future__ import annotations

import datetime
import functools
import re
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, NamedTuple

from projections.grounding.lazy import lazy
from projections.grounding.vocabulary import common_lowercase_words, known_words

__all__ = ["Specific", "SourceIndex", "extract", "tokens", "grams", "CATEGORIES"]

CATEGORIES = (
    "time",
    "date",
    "quantity",
    "number",
    "version",
    "uuid",
    "hash",
    "code",
    "identifier",
    "path",
    "url",
    "email",
    "host",
    "quote",
    "name",
)


class Specific(NamedTuple):
    """One specific found in a text.

    ``value`` is the parsed, normalized form used for matching (its shape depends on the category);
    ``weak`` marks specifics a faithful summary may legitimately produce without copying them (a small
    count it arrived at by counting, a capitalized word at the start of a sentence)."""

    category: str
    text: str
    start: int
    end: int
    value: Any
    weak: bool = False
    hedge: str = ""  # "approx", "over" or "under" for hedged numbers
    noun: str = ""  # the word after a bare number ("3 retries" -> "retries")

    @property
    def key(self) -> str:
        """A stable string for de-duplicating and reporting."""
        return f"{self.category}:{self.value!r}"


# -- vocabulary --------------------------------------------------------------------------------

_SMALL = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_NUMWORD = "|".join(sorted([*_SMALL, *_TENS, *_SCALES], key=len, reverse=True))

_MONTHS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4, "april": 4,
    "may": 5, "jun": 6, "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8, "sep": 9, "sept": 9,
    "september": 9, "oct": 10, "october": 10, "nov": 11, "november": 11, "dec": 12, "december": 12,
}
_WEEKDAYS = {
    "monday": 1, "mon": 1, "tuesday": 2, "tue": 2, "tues": 2, "wednesday": 3, "wed": 3,
    "thursday": 4, "thu": 4, "thur": 4, "thurs": 4, "friday": 5, "fri": 5, "saturday": 6, "sat": 6,
    "sunday": 7, "sun": 7,
}
_MONTH_RE = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
_WEEKDAY_RE = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"

# unit -> (dimension, factors to the base unit). Sizes accept both decimal and binary readings, so a
# summary that converts 1536 MB to 1.5 GB is not flagged.
_UNITS: dict[str, tuple[str, tuple[float, ...]]] = {}


def _unit(names: str, dim: str, *factors: float) -> None:
    for n in names.split():
        _UNITS[n] = (dim, factors)


_unit("ns nanosecond nanoseconds", "s", 1e-9)
_unit("us µs microsecond microseconds", "s", 1e-6)
_unit("ms msec msecs millis millisecond milliseconds", "s", 1e-3)
_unit("s sec secs second seconds", "s", 1)
_unit("m min mins minute minutes", "s", 60)
_unit("h hr hrs hour hours", "s", 3600)
_unit("d day days", "s", 86400)
_unit("wk wks week weeks", "s", 604800)
_unit("mo month months", "month", 1)
_unit("yr yrs year years", "year", 1)
_unit("b byte bytes", "B", 1)
_unit("kb kilobyte kilobytes", "B", 1e3, 1024)
_unit("kib", "B", 1024)
_unit("mb megabyte megabytes", "B", 1e6, 1024**2)
_unit("mib", "B", 1024**2)
_unit("gb gigabyte gigabytes", "B", 1e9, 1024**3)
_unit("gib", "B", 1024**3)
_unit("tb terabyte terabytes", "B", 1e12, 1024**4)
_unit("tib", "B", 1024**4)
_unit("ki", "B", 1024)  # Kubernetes' binary suffixes: 2Gi is 2048Mi
_unit("mi", "B", 1024**2)
_unit("gi", "B", 1024**3)
_unit("ti", "B", 1024**4)
_unit("% percent pct", "%", 1)
_unit("rps qps req/s reqs/s requests/s", "rps", 1)
_unit("x", "x", 1)
_unit("ghz", "Hz", 1e9)
_unit("mhz", "Hz", 1e6)
_unit("cores vcpu vcpus cpus", "cpu", 1)
_unit("usd dollars", "$", 1)
_unit("eur euros", "€", 1)
_unit("gbp pounds", "£", 1)
# single letters are units only when glued to the number ("30s", "5m", "2h", "3d", "512b")
_GLUED_ONLY = {"s", "m", "h", "d", "b", "x", "ki", "mi", "gi", "ti"}

def unit_of(word: str) -> tuple[str, tuple[float, ...]] | None:
    """(dimension, factors to its base unit) of a unit's name (``"GiB"``, ``"minutes"``), or None."""
    return _UNITS.get(word.lower())


def unit_factors(dim: str) -> tuple[float, ...]:
    """Every factor to the base unit of the units of one dimension (seconds, bytes, ...)."""
    return tuple(sorted({f for d, fs in _UNITS.values() if d == dim for f in fs}))


_UNIT_RE = "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True) if u != "%")

# Words that hedge a number: the summary does not claim the exact figure.
_APPROX = r"(?:about|around|approximately|approx\.?|roughly|nearly|almost|~|some|circa|ca\.)"
_OVER = r"(?:over|more\s+than|above|at\s+least|upwards\s+of|>=?|exceeding)"
_UNDER = r"(?:under|less\s+than|fewer\s+than|below|at\s+most|up\s+to|<=?|within)"

# Parts that make a hyphenated word a service/host name rather than an English compound.
TECH_PARTS = frozenset(
    """api apis service services svc srv server servers db database worker workers proxy gateway gw
    queue mq cache cluster node nodes pod pods job jobs app web frontend backend fe be prod production
    staging stage dev qa canary primary replica master leader follower shard auth billing payment
    payments search cart checkout inventory notification notifications mail email edge lb ingress
    egress k8s redis postgres postgresql pg mysql mongo kafka rabbitmq nginx envoy cdn dns vpc
    s3 ec2 lambda etl cron scheduler broker daemon agent controller operator ledger store storage
    bucket index indexer router registry vault iam sso ldap oauth grpc http https rest graphql
    ws websocket webhook consumer producer pipeline runner builder deploy deployer monitor metrics
    logging logs log tracing collector exporter sidecar mesh east west north south central eu us
    ap sa ca uk de fr jp region zone az host vm container svc1 users user orders order accounts
    account profile profiles session sessions cache-1 ui admin portal console mobile ios android
    analytics reporting report reports export import sync async stream streams events event""".split()
)

_HOST_TLDS = "com|net|org|io|dev|internal|local|lan|cloud|svc|cluster|prod|staging|corp|ai|co|uk|de|app"
_FILE_EXTS = (
    "py|pyc|js|mjs|cjs|ts|tsx|jsx|go|rs|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|scala|sql|yaml|yml|"
    "json|jsonl|toml|ini|cfg|conf|config|env|log|txt|md|rst|sh|bash|zsh|ps1|csv|tsv|lock|xml|html|"
    "htm|css|scss|tf|tfvars|proto|db|sqlite|gz|tgz|zip|tar|bz2|xz|whl|jar|war|pem|crt|key|pid|sock|"
    "service|timer|socket|dockerfile|mk|gradle|pom|pb|parquet|avro|ipynb|bak|tmp|out|err|pdf|png|jpg|svg"
)

# Capitalized words that are not names when they start a sentence or head a line.
# (Mid-sentence capitals are names unless they are in _NOT_NAMES.)
_NOT_NAMES = frozenset(
    """i i'm i've i'll i'd ok okay fyi tldr tl dr eta todo note notes nb ps re fw fwd am pm utc gmt
    est edt pst pdt cet cest bst ist z id ids n/a na tbd wip pr prs mr asap aka eg ie etc vs and or not the a an of in on at to for
    by with from is are was were be been it its this that these those yes no error errors warning
    warnings info debug trace fatal critical summary status update updates result results action
    actions next step steps cause root impact resolution resolved fixed open closed done pending
    failed failure success succeeded timeline context background todo incident outage issue issues
    problem problems question answer user assistant system tool observed derived http https api apis
    url urls uri json xml yaml html css sql rest cli sdk ui ux os cpu cpus gpu ram io uuid""".split()
)

_COMMON = frozenset(
    """a about above after again against all almost also although always among an and another any
    anything anyway are around as at attempt attempts back be because been before being below
    between both but by can cannot could did do does doing done down during each either else even
    ever every everything few first for from further had has have having he her here hers him his
    how however if in into is it its itself just last later least less like likely many may maybe
    me meanwhile might more most much must my never new next no nobody none nor not nothing now of
    off often on once one only onto or other others otherwise our ours out over own per perhaps
    please quite rather really same several she should since so some something soon still such
    than that the their theirs them then there therefore these they this those though through thus
    to together too toward towards under until up upon us very via was we well were what whatever
    when whenever where whether which while who whoever whole whom whose why will with within
    without would yet you your yours yesterday today tomorrow tonight earlier later currently
    initially eventually finally first second third then afterwards overall additionally also
    again instead summary summarized summarizing status update updated updates result results
    error errors warning warnings failure failures failed fails failing fail success successful
    succeeded completed complete completes completing started starts start starting stopped stop
    stops finished finish running ran run runs retried retry retries retrying restarted restart
    restarts deploy deployed deploying deployment deployments rollout rolled rollback rolled back
    migration migrations migrated migrating migrate upgrade upgraded upgrading downgrade
    downgraded install installed installing build builds built building test tests tested testing
    check checks checked checking fix fixes fixed fixing patch patched investigate investigated
    investigating investigation found find finds finding noticed observed reported reports
    reporting report logged logs log alert alerts alerted paged page pages timeout timeouts timed
    crash crashed crashes crashing outage outages incident incidents issue issues problem problems
    cause caused causes causing root impact impacted affected affecting resolved resolve resolving
    resolution mitigated mitigation mitigate workaround applied apply applying action actions next
    steps step plan plans planned pending open opened closed close closing done todo note notes
    user users customer customers request requests response responses requested responded
    returned returns returning return sent send sending received receive receiving read write
    wrote written writes reads config configuration configured setting settings enabled disabled
    enable disable added add adding removed remove removing deleted delete deleting created create
    creating updated update updating changed change changes changing moved move renamed rename
    connection connections connected connect connecting refused rejected denied allowed blocked
    latency throughput memory cpu disk network traffic load usage queue database server service
    services cluster node nodes pod pods host hosts job jobs worker workers process processes
    thread threads file files directory directories path paths table tables row rows column
    columns index indexes query queries schema data record records event events message messages
    session sessions token tokens context buffer agent agents model models tool tools call calls
    output outputs input inputs value values count counts total number numbers version versions
    release released releases environment production staging development local remote primary
    replica backup backups snapshot snapshots cache cached caching api apis endpoint endpoints
    health healthy unhealthy degraded available unavailable down up online offline high low slow
    fast spike spikes spiked increased increase decreased decrease dropped drop drops rising rose
    fell stable unstable intermittent repeated repeatedly multiple several various both two three
    all none most some many few single separate different same similar related unrelated
    previous previously earlier initial final current latest recent recently old new older newer
    critical severe minor major main key important likely possible possibly probably apparently
    seems seemed appears appeared confirmed unconfirmed unknown known suspected expected
    unexpected because due so therefore thus hence meanwhile afterwards subsequently then during
    while overall everything nothing something anything the this that these those there here
    we i you they he she it our their his her its my your agent assistant user system tool
    observed derived background timeline context question answer meeting team teams engineer
    see saw seen take took taken use used uses using get got make made go went gone come came keep
    kept let tried try tries trying rerun reran retrying traced traces tracked shows showed shown
    look looked looking verify verified verifying confirm confirms wait waited waiting need needs
    needed want wanted ask asked asking tell told say said says state states stated note noted
    notes mention mentioned mentions suggest suggested suggests recommend recommended recommends
    rolled roll reverted revert reverting scaled scale scaling paused pause resumed resume queued
    spent spend took took hit hits hitting caught catch throw threw thrown raised raise raises
    high higher highest low lower lowest more less most least best worst good bad better worse
    root cause causes yes no ok okay overall why how what who where when which whose whom
    engineers oncall on-call manager owner owners review reviewed approved approval merged merge
    branch commit commits pr pull code bug bugs feature features ticket tickets task tasks""".split()
)


# -- patterns ------------------------------------------------------------------------------------

_I = re.IGNORECASE
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"
# number words by their grammar ("twenty-five", "two hundred and ten", "3 thousand" is a number with
# a scale); never across a line break, never two figures in a row ("three three" is two numbers)
_SEP = r"(?:[ \t]+|-)"
_UNITW = "|".join(sorted(_SMALL, key=len, reverse=True))
_TENSW = "|".join(_TENS)
_UNDER100 = rf"(?:(?:{_TENSW})(?:{_SEP}(?:{_UNITW}))?|(?:{_UNITW}))"
_UNDER1000 = rf"(?:{_UNDER100}(?:{_SEP}hundred(?:{_SEP}(?:and{_SEP})?{_UNDER100})?)?)"
_NUMWORDS_RE = rf"(?:{_UNDER1000}(?:{_SEP}(?:thousand|million|billion)(?:{_SEP}(?:and{_SEP})?{_UNDER1000})?)?)"

def _deferred(pattern: str, flags: int = 0) -> tuple[str, int]:
    return pattern, flags


_PATTERN_SOURCES: list[tuple[str, tuple[str, int]]] = [
    ("url", _deferred(r"\b(?:https?|ftp|wss?|s3|gs)://[^\s<>\"'`\])}]+", _I)),
    ("email", _deferred(r"\b[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b")),
    ("uuid", _deferred(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", _I)),
    (
        "datetime",
        _deferred(
            r"(?:\b|(?<=_))(\d{4})-(\d{2})-(\d{2})[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?"
            r"(?:\s*(?:Z|UTC|GMT|[+-]\d{2}:?\d{2})\b)?",
            _I,
        ),
    ),
    (
        "path",
        _deferred(
            r"(?<![\w/:.@-])(?:~|\.{1,2})?/(?:[\w.@%+=-]+/)*[\w.@%+=-]*[\w@%+=-]"
            r"|\b[A-Za-z]:\\(?:[\w. -]+\\)*[\w. -]*\w"
            r"|(?<![\w/.@-])(?:[\w@%+=-]+/)+[\w.@%+=-]*\.(?:" + _FILE_EXTS + r")\b"
            r"|(?<![\w/.@-])(?:[\w@%+=-]+/){2,}[\w.@%+=-]*\w"
            r"|(?<![\w/.@-])[\w-]+\.(?:" + _FILE_EXTS + r")\b(?!\.\w)",
        ),
    ),
    (
        "isodate",
        _deferred(r"(?:\b|(?<=_))(\d{4})-(\d{1,2})-(\d{1,2})\b|\b(\d{4})/(\d{1,2})/(\d{1,2})\b"),
    ),
    ("slashdate", _deferred(r"\b(\d{1,2})/(\d{1,2})/(\d{2}|\d{4})\b")),
    # a ctime stamp (``Tue Jun 18 09:05:47 2024``, as date, helm and git print it): one time with its date
    (
        "ctime",
        _deferred(
            rf"\b(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s+({_MONTH_RE})\s+(\d{{1,2}})\s+(\d{{1,2}}):(\d{{2}})(?::(\d{{2}}))?"
            rf"(?:\s+[A-Z]{{3,4}})?\s+(\d{{4}})\b",
            _I,
        ),
    ),
    (
        "textdate",
        _deferred(
            rf"\b(?:(\d{{4}})\s+)?{_MONTH_RE}\s+(\d{{1,2}})(?:st|nd|rd|th)?\b(?:,?\s+(\d{{4}})\b)?"
            rf"|\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_RE}(?:,?\s+(\d{{4}})\b)?"
            rf"|\b{_MONTH_RE}\s+(\d{{4}})\b",
            _I,
        ),
    ),
    ("weekday", _deferred(rf"\b{_WEEKDAY_RE}\b", _I)),
    (
        "time",
        _deferred(
            r"(?<![\d:.])([01]?\d|2[0-3]):([0-5]\d)(?::([0-5]\d)(?:[.,]\d+)?)?(?![\d:])"
            r"(?:\s*([ap])\.?m\.?\b)?(?:\s*(?:Z|UTC|GMT)\b)?"
            r"|\b(1[0-2]|0?[1-9])\s*([ap])\.?m\b\.?",
            _I,
        ),
    ),
    ("ip", _deferred(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?(?![\w.]*\d)")),
    (
        "version",
        _deferred(
            r"\bv\d+(?:\.\d+)*(?:[-+][0-9A-Za-z.]+)?\b"
            r"|(?<![\w.])\d+\.\d+\.\d+(?:\.\d+)*(?:-[0-9A-Za-z.]+)?(?:\+[0-9A-Za-z.]+)?(?![\w.]*\d)"
            r"|(?<=\bversion )\d+(?:\.\d+)+\b|(?<=\brelease )\d+(?:\.\d+)+\b",
            _I,
        ),
    ),
    ("hash", _deferred(r"\b0x[0-9a-f]+\b|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b", _I)),
    (
        "code",
        _deferred(
            r"\b[A-Z][A-Z0-9]{1,9}-\d+(?:-\d+)?\b"  # INC-4521, JIRA-12, CVE-2024-1234
            r"|\b[A-Z]{1,5}\d{2,}\b"  # E1234, SEV2 (digits >= 2)
            r"|\bSEV-?\d\b|\bP[0-4]\b"  # severities and priorities
            r"|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b"  # ERR_TIMEOUT
            r"|\bE[A-Z]{4,}\b"  # errno names: ECONNREFUSED
            r"|(?<![\w./-])[A-Za-z][\w.-]*/[\w.-]+#\d+\b"  # an issue of another repository: owner/repo#214
            r"|(?<![\w&])#\d+\b"  # PR #123
        ),
    ),
    # a duration written in several units ("6m40s", "1m48.2s", "2h 30m"): one quantity in seconds
    ("duration", _deferred(
        # "3d2h", "9h12m", "2m 3s"; spelled out, "10 minutes 22 seconds", "1 hour 15 minutes", "14 min 26 s"
        r"(?<![\w.])(?:(?P<sh>\d+)\s?(?:hours?|hrs?)\s+(?:and\s+)?)?(?P<sm>\d+)\s?(?:minutes?|mins?)\s+(?:and\s+)?"
        r"(?P<ss>\d+(?:\.\d+)?)\s?(?:seconds?|secs?|s)\b"
        r"|(?<![\w.])(?P<sh2>\d+)\s?(?:hours?|hrs?)\s+(?:and\s+)?(?P<sm2>\d+)\s?(?:minutes?|mins?)\b"
        r"|(?<![\w.])(?:(?P<d>\d+)d ?(?=\d))?(?:(?P<h>\d+)h ?(?=\d))?(?:(?P<m>\d+)m ?(?=\d))?(?P<last>\d+(?:\.\d+)?)(?P<unit>[hms])(?![\w]|\.\d)", _I)),
    (
        "currency",
        _deferred(rf"[$€£]\s?(?:{_NUM})(?:\s?(?:k|m|bn|million|billion|thousand)\b)?", _I),
    ),
    (
        "quantity",
        _deferred(
            rf"(?<![\w.])(?P<num>{_NUM})"
            rf"(?P<space>\s*|-)(?P<unit>%|(?:{_UNIT_RE})(?![\w%/]))(?P<half>\s+and\s+a\s+half\b)?",
            _I,
        ),
    ),
    (
        "wordquantity",
        _deferred(
            rf"\b(?P<num>{_NUMWORDS_RE}|an?|half\s+an?)"
            rf"(?P<space>\s*|-)(?P<unit>%|(?:{_UNIT_RE})(?![\w%/]))(?P<half>\s+and\s+a\s+half\b)?",
            _I,
        ),
    ),
    (
        "identifier",
        # letters and digits mixed in one token (req-8f3a2b, db-01, node7, us-east-1, i-0abc12)
        _deferred(
            r"(?<![\w.-])(?<!\d,)(?=[\w.-]*[A-Za-z])(?=[\w.-]*\d)[A-Za-z0-9]+(?:[-_.][A-Za-z0-9]+)*(?![\w-])"
        ),
    ),
    (
        "number",
        _deferred(
            # a rate first: "1,245/s", "2,310/sec" (the figure, per unit of time)
            rf"(?<![\w.#/:-])(?P<rnum>\d{{1,3}}(?:,\d{{3}})+|\d+)(?=/(?:s|sec|min|h|hr|day)\b)"
            # a figure; a count over a count written with thousands separators ("7,190/23,808") is two
            rf"|(?:(?<![\w.#/:-])|(?<=\d/)(?=\d{{1,3}}(?:,\d{{3}})+\b))(?P<num>[-+]?(?:{_NUM}))(?:st|nd|rd|th)?"
            rf"(?:\s+(?P<scale>thousand|million|billion|trillion)\b)?(?![\w]|/(?!\d{{1,3}}(?:,\d{{3}})+\b)|\.\d|:\d)"
            rf"(?:(?=[ \t]+(?P<noun>[a-z][a-z-]+)))?",
            _I,
        ),
    ),
    (
        "numword",
        _deferred(
            rf"\b(?P<num>{_NUMWORDS_RE})\b"
            rf"(?:(?=[ \t]+(?P<noun>[a-z][a-z-]+)))?",
            _I,
        ),
    ),
    ("quote", _deferred(r"\"([^\"\n]{2,200})\"|“([^”\n]{2,200})”|`([^`\n]{1,200})`|(?<![\w'])'([^'\n]{2,120})'(?![\w'])")),
    (
        "host",
        _deferred(
            r"(?<![\w.@/-])(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?\.)+"
            r"(?:" + _HOST_TLDS + r")\b(?![\w-])",
            _I,
        ),
    ),
    ("snake", _deferred(r"(?<![\w.-])[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+(?![\w-])")),
    ("kebab", _deferred(r"(?<![\w.-])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+(?![\w-])")),
    ("camel", _deferred(r"\b(?:[A-Z]+[a-z0-9]+[A-Z][A-Za-z0-9]*|[a-z]+[0-9]*[A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z]{2,}[A-Za-z0-9]*)\b")),
    ("capword", _deferred(r"\b[A-Z][a-z]+(?:'[a-z]+)?\b|\b[A-Z]{2,6}s?\b")),
]

_COMPILED: list[tuple[str, re.Pattern[str]]] = []


def _patterns() -> list[tuple[str, re.Pattern[str]]]:
    """The patterns in priority order, compiled on first use (compiling them costs more than
    importing the rest of ctxledger, and most processes never check grounding)."""
    if not _COMPILED:
        _COMPILED.extend((kind, re.compile(p, f)) for kind, (p, f) in _PATTERN_SOURCES)
    return _COMPILED

_SENTENCE_START = lazy(r"(?:^|[.!?:;]\s+|\n\s*(?:[-*•>]\s*|\d+[.)]\s*)?|[\"'(\[]\s*|[-*•]\s+)$")
_TOKEN = lazy(r"[^\W_]+")


# -- parsing helpers -----------------------------------------------------------------------------


def parse_number(text: str) -> float | None:
    """``"1,234.5"`` -> 1234.5, ``"twenty-five"`` -> 25, ``"a"`` -> 1; None if not a number."""
    t = text.strip().lower().replace(",", "")
    if not t:
        return None
    if t in ("a", "an"):
        return 1.0
    if t.startswith("half"):
        return 0.5
    try:
        return float(t)
    except ValueError:
        pass
    total, current, seen = 0.0, 0.0, False
    for w in re.split(r"[\s-]+", t):
        if w == "and":
            continue
        if w in _SMALL:
            current += _SMALL[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = (current or 1) * 100
        elif w in _SCALES:
            total += (current or 1) * _SCALES[w]
            current = 0
        else:
            return None
        seen = True
    return total + current if seen else None


def _canon(x: float) -> float:
    return round(x, 9)


def tokens(text: str) -> list[str]:
    """Lower-cased alphanumeric runs: the unit of name matching."""
    return _TOKEN.findall(text.casefold())


def grams(toks: list[str], n: int = 4) -> set[str]:
    """Every run of 1..n consecutive tokens joined without separators (``billing api`` ->
    ``billingapi``), so names match whatever separators or case they are written with."""
    out = set(toks)
    for width in range(2, n + 1):  # zip/map/join run in C: ~2x the plain double loop
        out.update(map("".join, zip(*(toks[i:] for i in range(width)))))
    return out


def _norm_text(text: str) -> str:
    """Casefolded, every non-alphanumeric run collapsed to one space: for quote matching."""
    return " " + " ".join(tokens(text)) + " "


def _at_sentence_start(text: str, start: int) -> bool:
    return bool(_SENTENCE_START.search(text[max(0, start - 8) : start]))


def _time_value(h: int, m: int, s: int | None, ampm: str | None) -> tuple[int, int, int | None]:
    if ampm:
        ampm = ampm.lower()
        if ampm == "p" and h < 12:
            h += 12
        elif ampm == "a" and h == 12:
            h = 0
    return (h, m, s)


def _year(y: str | None) -> int | None:
    if not y:
        return None
    n = int(y)
    return n + 2000 if n < 100 else n


def _month(word: str) -> int:
    return _MONTHS[word.lower().rstrip(".")]


def _version_value(text: str) -> tuple[tuple[int, ...], str]:
    t = text.lower().lstrip("v")
    m = re.match(r"([\d.]*)(.*)", t)
    core, rest = m.group(1), m.group(2)
    parts = [int(p) for p in core.strip(".").split(".") if p.isdigit()]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts), rest.strip("-+.")


# -- extraction ----------------------------------------------------------------------------------


_WORD = lazy(r"[a-z]+")
_NUMBER_WORDS = frozenset([*_SMALL, *_TENS, *_SCALES])
_SPELLED_UNITS = frozenset(u for u in _UNITS if len(u) > 2 and u.isalpha())
_MONTH_WORDS = frozenset(_MONTHS)
_WEEKDAY_WORDS = frozenset(w for w in _WEEKDAYS if len(w) > 4)
_HAS_UPPER = lazy(r"[A-Z]")
_HAS_LETTER = lazy(r"[^\W\d_]")


def _wanted(kind: str, text: str, words: set[str], digits: bool) -> bool:
    """A cheap test that a pattern can match at all: most texts need only a few of the patterns."""
    if kind in ("uuid", "datetime", "isodate", "slashdate", "ip", "hash", "currency", "duration", "quantity", "identifier", "number", "version"):
        return digits
    if kind == "url":
        return "://" in text
    if kind == "email":
        return "@" in text
    if kind == "path":
        return "/" in text or "\\" in text or "." in text
    if kind == "textdate":
        return not words.isdisjoint(_MONTH_WORDS)
    if kind == "weekday":
        return not words.isdisjoint(_WEEKDAY_WORDS)
    if kind == "ctime":
        return digits and not words.isdisjoint(_MONTH_WORDS)
    if kind == "time":
        return digits
    if kind == "code":
        return "#" in text or "_" in text or digits or "E" in text
    if kind == "wordquantity":
        return not words.isdisjoint(_SPELLED_UNITS) and (
            not words.isdisjoint(_NUMBER_WORDS) or not words.isdisjoint(("a", "an", "half"))
        )
    if kind == "numword":
        return not words.isdisjoint(_NUMBER_WORDS)
    if kind == "host":
        return "." in text
    if kind == "snake":
        return "_" in text
    if kind == "kebab":
        return "-" in text
    if kind in ("camel", "capword"):
        return bool(_HAS_UPPER.search(text))
    return True


# Tokens: runs between white space and the punctuation that separates values (``timeout=45``,
# ``(10.0.3.12)``, ``latency:850ms``, ``~30``); a specific can only start where a token does.
_TOKEN_AT = lazy(r"[^\s(\[{<>=,;\"'`“”)\]}~*|]+")
_HAS_DIGIT = lazy(r"\d")
_PLAIN_INTERESTING = frozenset([*_MONTHS, *_WEEKDAYS, *_SMALL, *_TENS, *_SCALES, "a", "an", "half"])


def _candidates(text: str, words: set[str]) -> dict[str, list[int]]:
    """For each pattern kind, the token starts where it is worth trying (cheap string tests)."""
    out: defaultdict[str, list[int]] = defaultdict(list)
    months = not words.isdisjoint(_MONTH_WORDS)
    cache = _KINDS_CACHE[months]
    if len(cache) > 200_000:  # bounded: texts of many distinct tokens do not grow it for ever
        cache.clear()
    for m in _TOKEN_AT.finditer(text):
        pos = m.start()
        if pos and not (text[pos - 1].isspace() or text[pos - 1] in "([{<>=,;:\"'`“~*|"):
            continue
        tok = m.group(0)
        kinds = cache.get(tok)
        if kinds is None:
            kinds = cache[tok] = _token_kinds(tok, months)
        for k in kinds:
            out[k].append(pos)
        if ":" in tok:
            # a key and its measure glued by a colon (the kernel's "anon-rss:7812340kB")
            for g in _KEYED_MEASURE.finditer(tok):
                out["quantity"].append(pos + g.start(1))
        if tok[0].isdigit() and "/" in tok:
            # a count over a count ("7,190/23,808"): the second figure starts after the slash
            for i in range(pos, m.end()):
                if text[i] == "/" and _RATIO_SLASH.match(text, i):
                    out["number"].append(i + 1)
        if "_" in tok and "/" not in tok and "\\" not in tok:
            # a date glued after an underscore (``backfill__2024-06-15T00:00:00``, a run id) is a date
            for g in _GLUED_DATE.finditer(tok):
                out["datetime"].append(pos + g.end())
                out["isodate"].append(pos + g.end())
    return out


_GLUED_DATE = lazy(r"_(?=\d{4}-\d\d-\d\d)")
_KEYED_MEASURE = lazy(r"[A-Za-z_-]:(\d+(?:\.\d+)?[A-Za-z]{1,5})\b")
_RATIO_SLASH = lazy(r"(?<=\d)/(?=\d{1,3}(?:,\d{3})+\b)")  # matched at the slash


# The kinds a token can start depend only on the token (and on whether the text names a month):
# texts repeat their tokens, so the classification is remembered per token.
_KINDS_CACHE: dict[bool, dict[str, tuple[str, ...]]] = {False: {}, True: {}}


def _token_kinds(tok: str, months: bool) -> tuple[str, ...]:
    """The pattern kinds worth trying where ``tok`` starts, in the order they are tried."""
    c = tok[0]
    if tok.isalpha() and tok.islower():  # a plain lower-case word: most tokens
        plain: list[str] = []
        if tok in _PLAIN_INTERESTING:
            if tok in _MONTHS:
                plain.append("textdate")
            if tok in _WEEKDAY_WORDS:
                plain.append("weekday")
            if tok in _NUMBER_WORDS:
                plain += ("numword", "wordquantity")
            elif tok in ("a", "an", "half"):
                plain.append("wordquantity")
        return tuple(plain)
    has_digit = _HAS_DIGIT.search(tok) is not None
    kinds: list[str] = []
    if has_digit and "/" in tok and "#" in tok and "://" not in tok:
        kinds.append("code")  # owner/repo#214
    if "://" in tok:
        kinds.append("url")
    if "@" in tok:
        kinds.append("email")
    if "/" in tok or "\\" in tok or ("." in tok and not tok.endswith(".")) or (c == "." and len(tok) > 1) or c == "~":
        kinds.append("path")
    if "." in tok[:-1]:
        kinds.append("host")
    if has_digit:
        kinds += ("uuid", "hash", "identifier")
        if c.isdigit():
            kinds += ("datetime", "isodate", "slashdate", "time", "ip", "version", "duration", "quantity", "number")
            if months:
                kinds.append("textdate")
        elif c in "+-." and len(tok) > 1 and tok[1].isdigit():
            kinds += ("number", "quantity")
        elif c in "vV":
            kinds.append("version")
        elif c in "$€£":
            kinds.append("currency")
        elif c == "#":
            kinds.append("code")
    low = tok.lower().strip(".,:;!?'\")")
    if not c.isdigit():
        if low in _MONTHS or (low.rstrip(".") in _MONTHS):
            kinds.append("textdate")
        if low in _WEEKDAY_WORDS:
            kinds.append("weekday")
        if months and low in _WEEKDAYS:
            kinds.append("ctime")
        head = low.split("-")[0]
        if head in _NUMBER_WORDS:
            kinds += ("wordquantity", "numword")
        elif head in ("a", "an", "half"):
            kinds.append("wordquantity")
    if c.isupper():
        kinds.append("code")
    if "_" in tok:
        kinds.append("snake")
    if "-" in tok:
        kinds.append("kebab")
    if c.isupper() or _HAS_UPPER.search(tok):
        kinds += ("camel", "capword")
    return tuple(kinds)


_LOWER_WORD = lazy(r"[a-z][a-z'-]*")
_WORD_LIST = lazy(r"[a-z]+(?:/[a-z]+)+")  # no root, no extension, no digits or separators
_NAME_LIST = lazy(r"[A-Z][A-Za-z0-9+#-]*(?:/[A-Z][A-Za-z0-9+#-]*)+")


# What ``extract`` found in each text it read (with the default vocabulary): one audit reads a source
# in several places (the sources' index, the user's words, a unit of evidence, the write-time gate), and
# sessions repeat texts. Bounded by the characters of the texts it keys.
_EXTRACTED: dict[str, tuple[Specific, ...]] = {}
_EXTRACTED_LIMIT = 64_000_000
_extracted_chars = 0


def extract(text: str, *, lowercase_vocabulary: frozenset[str] | None = None) -> list[Specific]:
    """Every specific in ``text``, in order of appearance, without overlaps (the first pattern to
    claim a stretch of text wins: a number inside a URL is part of the URL).

    ``lowercase_vocabulary``: for texts with no capital letters at all (lower-cased summaries hide
    the capitals that mark names), a set of common lower-case words; any other word is then treated
    as a possible name. By default the words a tokenizer learned in lower case
    (``common_lowercase_words``)."""
    global _extracted_chars
    if lowercase_vocabulary is not None:
        return _extract(text, lowercase_vocabulary)
    found = _EXTRACTED.get(text)
    if found is None:
        if _extracted_chars + len(text) > _EXTRACTED_LIMIT:
            _EXTRACTED.clear()
            _extracted_chars = 0
        found = _EXTRACTED[text] = tuple(_extract(text, None))
        _extracted_chars += len(text)
    return list(found)


def _extract(text: str, lowercase_vocabulary: frozenset[str] | None) -> list[Specific]:
    if lowercase_vocabulary is None and not _HAS_UPPER.search(text) and _HAS_LETTER.search(text):
        lowercase_vocabulary = common_lowercase_words()
    claimed: list[tuple[int, int]] = []
    found: list[Specific] = []
    mask = bytearray(len(text) + 1)  # 1 where a specific already claimed the character

    def free(a: int, b: int) -> bool:
        if a < b:
            return mask.find(1, a, b) == -1
        for x, y in claimed:  # an empty span: free unless strictly inside a claimed one
            if a < y and x < b:
                return False
        return True

    def add(sp: Specific) -> None:
        claimed.append((sp.start, sp.end))
        if sp.end > sp.start:
            mask[sp.start : sp.end] = b"\x01" * (sp.end - sp.start)
        found.append(sp)

    words = set(_WORD.findall(text.lower()))
    digits = any(map(str.isdigit, text))
    starts = _candidates(text, words)
    patterns = _patterns()
    for kind, rx in patterns:
        if kind == "quote":
            continue  # quotes overlap the specifics inside them; handled below
        at = starts.get(kind)
        if not at or not _wanted(kind, text, words, digits):
            continue
        # Match only where a specific of this kind can start (a few token starts), not at every
        # character: the patterns are anchored there with ``match``.
        match = rx.match
        for pos in at:
            if mask[pos]:
                continue
            m = match(text, pos)
            if m is None or m.end() == pos:
                continue
            sp = _make(kind, m, text)
            if sp is not None and (mask.find(1, sp.start, sp.end) == -1 if sp.start < sp.end else free(sp.start, sp.end)):
                add(sp)
    quotes = dict(patterns)["quote"].finditer(text) if ('"' in text or "'" in text or "`" in text or "“" in text) else ()
    for m in quotes:
        inner = next(g for g in m.groups() if g is not None)
        if len(inner) < 2:
            continue  # `q`: consumed, so its closing backtick does not open the next span
        if _HAS_LETTER.search(inner):
            found.append(Specific("quote", m.group(0), m.start(), m.end(), _norm_text(inner).strip()))
    if lowercase_vocabulary is not None and not re.search(r"[A-Z]", text):
        for m in re.finditer(r"\b[a-z][a-z'-]*[a-z]\b", text):
            a, b = m.span()
            w = m.group(0)
            if not free(a, b) or w in lowercase_vocabulary or w in _COMMON or len(w) < 3:
                continue
            stem = w.split("'")[0]
            if stem in lowercase_vocabulary or stem in _COMMON:
                continue
            add(Specific("name", w, a, b, "".join(tokens(stem)), weak=True))
    found.sort(key=lambda s: s.start)
    if "\n" in text or _LIST_MARKER.match(text) or "**" in text:
        found = _layout(text, found)
    return found


# A numbered list's marker ("2. Key concepts", "3) next") is layout, not a stated number; a heading
# line ("2. Key Technical Concepts:", "## Errors and Fixes") capitalizes words that name nothing
# (its other specifics, a path or a time, still count).
_LIST_MARKER = lazy(r"[ \t]*(?:\d{1,3}[.)])(?=[ \t])", re.M)
_BOLD_LABEL = lazy(r"^[ \t]*(?:\d{1,3}[.)][ \t]+|[-*•][ \t]+)?\*\*[^*\n]{1,80}\*\*[ \t]*:", re.M)  # "- **Solved**:"
_HEADING = lazy(
    r"^[ \t]*(?:#{1,6}[ \t]+|\d{1,3}[.)][ \t]+|[-*•][ \t]+)?(?:[A-Z][\w'/-]*[ \t]+(?:(?:and|or|of|the|to|for|in|on|with|&)[ \t]+)?)*"
    r"[A-Z][\w'/-]*[ \t]*:?[ \t]*$",
    re.M,
)


def _layout(text: str, found: list[Specific]) -> list[Specific]:
    markers = set()
    for line in re.finditer(r"^.*$", text, re.M):
        m = _LIST_MARKER.match(text, line.start())
        if m:
            digits = m.group(0).strip()[:-1]
            markers.add(m.start() + m.group(0).index(digits))
    headings = [(m.start(), m.end()) for m in _HEADING.finditer(text)]
    headings += [(m.start(), m.end()) for m in _BOLD_LABEL.finditer(text)]
    out = []
    for sp in found:
        if sp.category == "number" and sp.start in markers:
            continue
        if sp.category == "name" and any(a <= sp.start and sp.end <= b for a, b in headings):
            continue
        out.append(sp)
    return out


_HEDGE_BEFORE = lazy(rf"(?:(?P<approx>{_APPROX})|(?P<over>{_OVER})|(?P<under>{_UNDER}))\s*$", _I)


# The last word of every hedge above (a hedge ends right before its number, so the text there must
# end with one of these, or with one of the symbols): a cheap test that spares most numbers the search.
_HEDGE_LAST_WORDS = frozenset(
    "about around approximately approx roughly nearly almost some circa ca over than above least of "
    "exceeding under below most to within".split()
)


def _hedge(text: str, start: int) -> str:
    """"approx", "over" or "under" when the number at ``start`` is hedged ("about 30", "over 2 GB")."""
    lo = max(0, start - 24)
    tail = text[lo:start].rstrip()
    if not tail:
        return ""
    if tail[-1] not in "~<>=":
        end = len(tail) - 1 if tail[-1] == "." else len(tail)
        i = end
        while i > 0 and tail[i - 1].isalpha():
            i -= 1
        if tail[i:end].casefold() not in _HEDGE_LAST_WORDS:
            return ""
    m = _HEDGE_BEFORE.search(text, lo, start)
    if m is None:
        return ""
    if m.start() > 0 and text[m.start() - 1].isalnum():
        return ""
    return m.lastgroup or ""


def _make(kind: str, m: re.Match[str], text: str) -> Specific | None:
    a, b = m.span()
    s = m.group(0)
    if kind == "url":
        s = s.rstrip(".,;:!?")
        b = a + len(s)
        v = s.lower().rstrip("/")
        return Specific("url", s, a, b, v)
    if kind == "email":
        return Specific("email", s, a, b, s.lower())
    if kind == "uuid":
        return Specific("uuid", s, a, b, s.lower())
    if kind == "datetime":
        y, mo, d, h, mi, sec = m.groups()
        return Specific(
            "time", s, a, b, ((int(y), int(mo), int(d)), _time_value(int(h), int(mi), int(sec) if sec else None, None))
        )
    if kind == "path":
        s = s.rstrip(".,;:")
        b = a + len(s)
        if s in ("/", "//") or not _ASCII_LETTER.search(s.rsplit(".", 1)[0] if "/" not in s else s):
            return None
        if _NAME_LIST.fullmatch(s):
            return None  # "Elixir/Phoenix/Ash": names joined by slashes, not a path (its names are checked as names)
        if _WORD_LIST.fullmatch(s) and all(w in common_lowercase_words() for w in s.split("/")):
            return None  # "compiled/tested/committed": English words as alternatives, not a path
        return Specific("path", s, a, b, s.lower().rstrip("/"))
    if kind == "isodate":
        g = m.groups()
        y, mo, d = (g[0], g[1], g[2]) if g[0] else (g[3], g[4], g[5])
        if not (1 <= int(mo) <= 12 and 1 <= int(d) <= 31):
            return None
        return Specific("date", s, a, b, (int(y), int(mo), int(d), None))
    if kind == "slashdate":
        p, q, y = m.groups()
        p, q = int(p), int(q)
        if not (1 <= p <= 31 and 1 <= q <= 31) or (p > 12 and q > 12):
            return None
        # month/day or day/month: both readings are kept and either may match
        readings = tuple({(_year(y), p, q, None) if p <= 12 else None, (_year(y), q, p, None) if q <= 12 else None} - {None})
        return Specific("date", s, a, b, readings)
    if kind == "textdate":
        g = m.groups()
        words = re.findall(_MONTH_RE, s, _I)
        mon = _month(words[0]) if words else None
        if g[1] is not None:  # [year] Month day[, year]
            y, d = g[0] or g[2], int(g[1])
        elif g[3] is not None:  # day Month [year]
            y, d = g[4], int(g[3])
        else:  # Month year
            y, d = g[5], None
        if d is not None and not 1 <= d <= 31:
            return None
        if words and words[0].lower().rstrip(".") == "may" and d is None:
            return None  # "may 2024" is far more often the verb than the month
        return Specific("date", s, a, b, (_year(y), mon, d, None))
    if kind == "weekday":
        return Specific("date", s, a, b, (None, None, None, _WEEKDAYS[s.lower()]))
    if kind == "ctime":
        mon, d, h, mi, sec, y = m.groups()
        if not 1 <= int(d) <= 31 or int(h) > 23:
            return None
        return Specific("time", s, a, b, ((int(y), _month(mon), int(d)), _time_value(int(h), int(mi), int(sec) if sec else None, None)))
    if kind == "time":
        g = m.groups()
        if g[0] is not None:
            return Specific("time", s, a, b, (None, _time_value(int(g[0]), int(g[1]), int(g[2]) if g[2] else None, g[3])))
        return Specific("time", s, a, b, (None, _time_value(int(g[4]), 0, None, g[5])))
    if kind == "ip":
        return Specific("host", s, a, b, s)
    if kind == "version":
        return Specific("version", s, a, b, _version_value(s))
    if kind == "hash":
        return Specific("hash", s, a, b, s.lower())
    if kind == "code":
        return Specific("code", s, a, b, s.lower())
    if kind == "currency":
        sym = s[0]
        num = re.search(_NUM, s)
        value = parse_number(num.group(0)) if num else None
        if value is None:
            return None
        mult = re.search(r"(k|m|bn|million|billion|thousand)\s*$", s, _I)
        if mult:
            value *= {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}[mult.group(1).lower()]
        return Specific("quantity", s, a, b, (sym, (_canon(value),)))
    if kind == "duration":
        if m.group("sm") is not None or m.group("sm2") is not None:  # spelled out: one figure, not two
            hours, minutes = m.group("sh") or m.group("sh2") or 0, m.group("sm") or m.group("sm2")
            seconds = int(hours) * 3600 + int(minutes) * 60 + float(m.group("ss") or 0)
            return Specific("quantity", s, a, b, ("s", (_canon(seconds),)), hedge=_hedge(text, a))
        d, h, mi, last, unit = m.group("d"), m.group("h"), m.group("m"), m.group("last"), m.group("unit").lower()
        if d is None and h is None and mi is None:
            return None  # one unit ("30s"): a plain quantity
        if (unit == "h" and (h is not None or mi is not None)) or (unit == "m" and mi is not None) \
                or (h is not None and mi is None and unit == "s") or (d is not None and h is None and unit != "h"):
            return None  # "2h30h", "1m2m", "1h30s", "3d5m": no duration
        seconds = int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi or 0) * 60 + float(last) * {"h": 3600, "m": 60, "s": 1}[unit]
        return Specific("quantity", s, a, b, ("s", (_canon(seconds),)), hedge=_hedge(text, a))
    if kind == "quantity" or kind == "wordquantity":
        if m.group("unit") == "M" and not m.group("space"):
            return None  # "77.2M documents": a million, not minutes (a scaled number, read as an identifier)
        unit = m.group("unit").lower()
        if unit not in _UNITS and unit != "%":
            return None
        num_text = m.group("num")
        if unit in _GLUED_ONLY and m.group("space") and not (unit in "sh" and kind == "quantity" and "." in num_text):
            return None  # "3 s" is rarely seconds, but "2.799 s" is
        if num_text.lower() in ("a", "an") and unit in _GLUED_ONLY | {"%"}:
            return None
        value = parse_number(num_text)
        if value is None:
            return None
        if num_text.lower() in ("a", "an", "half a", "half an") and unit in ("s", "m", "h", "d", "b", "x"):
            return None
        dim, factors = _UNITS["%"] if unit == "%" else _UNITS[unit]
        if m.group("half"):
            value += 0.5
        article = num_text.lower() in ("a", "an") or num_text.lower().startswith("half")
        if article and len(unit) < 3:
            return None  # "an hour", "half a minute": only a quantity when the unit is spelled out
        return Specific(
            "quantity", s, a, b, (dim, tuple(_canon(value * f) for f in factors)),
            weak=article, hedge=_hedge(text, a),
        )
    if kind == "identifier":
        if _ORDINAL.fullmatch(s) or _LETTER_DIGIT.fullmatch(s):
            return None
        if s.count("-") >= 3 and any(len(w) > 1 and w in _FUNCTION_WORDS for w in s.lower().split("-")):
            return None  # "exit-1-on-missing-directory": an English compound modifier, as for kebab names
        if _XX.fullmatch(s):  # "5xx errors" for a 503 in the sources
            return Specific("code", s, a, b, ("xx", int(s[0])))
        if _DOTTED_NUMBER.fullmatch(s):  # numeric ranges or dotted numbers: left to number
            return None
        if "-" in s and _FIGURE_HEAD.fullmatch(s.split("-", 1)[0].lower()) and s.split("-", 1)[1] in common_lowercase_words():
            return None  # "200M-row", "5-minute": a measure modifying a noun, no identifier
        if _SCALED.fullmatch(s):  # 3k, 2M: a number with a scale
            value = parse_number(s[:-1])
            mult = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9}[s[-1]]
            return Specific("number", s, a, b, _canon(value * mult))
        if _TECH_TERMS.fullmatch(s):
            return Specific("name", s, a, b, "".join(tokens(s)))
        return Specific("identifier", s, a, b, s.lower())
    if kind == "number":
        if m.group("rnum"):
            value = parse_number(m.group("rnum"))
            if value is None:
                return None
            return Specific("number", m.group("rnum"), m.start("rnum"), m.end("rnum"), _canon(value),
                            hedge=_hedge(text, m.start("rnum")), noun="per")
        num_text = m.group("num")
        value = parse_number(num_text)
        if value is None:
            return None
        if m.group("scale"):
            value *= _SCALES[m.group("scale").lower()] if m.group("scale").lower() in _SCALES else 1e12
        noun = (m.group("noun") or "").lower()
        if noun in _FUNCTION_WORDS or noun in _MONTHS:
            noun = ""  # "2214905 Apr  2" in a listing: a date follows the figure, it counts no months
        end = m.end("scale") if m.group("scale") else m.end("num")
        tail = text[end : end + 2]
        if not m.group("scale") and _ORDINAL_SUFFIX.match(tail):
            end += 2
        start = m.start("num")
        weak = value == int(value) and 0 <= value <= 12 and bool(noun) and noun not in _UNIT_WORDS
        return Specific(
            "number", text[start:end], start, end, _canon(value), weak=weak,
            hedge=_hedge(text, start), noun=noun,
        )
    if kind == "numword":
        num_text = m.group("num")
        if num_text.lower() in ("one", "zero"):
            return None  # "one of the pods", "zero-downtime": too often not a figure
        value = parse_number(num_text)
        if value is None:
            return None
        start = m.start("num")
        return Specific(
            "number", text[start : m.end("num")], start, m.end("num"), _canon(value), weak=True,
            hedge=_hedge(text, start), noun=_noun(m.group("noun")),
        )
    if kind == "host":
        low = s.lower()
        if _FILE_TAIL.search(low) or all(len(p) <= 1 for p in low.split(".")):
            return None
        return Specific("host", s, a, b, "".join(tokens(s)))
    if kind == "camel" and s.lower() in known_words():
        return None  # written in camel case, but a word of the language ("JavaScript", "GitHub"), no identifier
    if kind in ("snake", "camel"):
        return Specific("name", s, a, b, "".join(tokens(s)))
    if kind == "kebab":
        parts = s.lower().split("-")
        if len(parts) >= 4 or not _FUNCTION_WORDS.isdisjoint(parts) or parts[-1] in _COMPOUND_HEADS:
            return None  # an English compound ("OS-level", "exactly-one-worker-per-session"), not a name
        if parts[0] in _ENGLISH_PREFIXES:
            return None  # "re-import", "post-GC", "non-printable-ASCII": a prefixed word
        if all(p in _MONTHS or p in _WEEKDAYS for p in parts):
            return None  # "January-March", "Mon-Fri": a range of months or days, named by the calendar
        if _participle(parts[-1]) and s.split("-")[-1].islower():
            return None  # "BOM-prefixed", "UTC-parsing": a participle heads a modifier, it names nothing
        if not (set(parts) & TECH_PARTS) and not any(c.isdigit() for c in s) and not any(c.isupper() for c in s[1:]):
            return None  # an English compound (follow-up, read-only), not a name
        return Specific("name", s, a, b, "".join(tokens(s)))
    if kind == "capword":
        low = s.lower()
        base = low.split("'")[0]
        if base in _NOT_NAMES or low in _NOT_NAMES:
            return None
        if s.isupper() and s.rstrip("s").lower() in known_words():
            return None  # an acronym the language has (CI, AWS, SQL): no name this session made up
        if s.isupper():  # an acronym: API, AWS
            return Specific("name", s, a, b, base.rstrip("s") if len(base) > 3 and base.endswith("s") else base, weak=False)
        if base in _MONTHS or base in _WEEKDAYS:
            return None
        if _at_sentence_start(text, a):
            # capitalized by grammar, not as a name: it names someone only as the subject of the
            # sentence ("Tom deployed …"), not when it is the sentence's own verb ("Rewrote as …")
            if base in _COMMON or base.endswith(("ing", "ed", "ly", "tion", "ment", "ness")):
                return None
            if base in common_lowercase_words() and _AUXILIARY_NEXT.match(text, b):
                # "Neither has been done", "Growth is speeding up": a word English writes in lower case
                # before an auxiliary; before a verb of action ("Ravi deployed …") it may be a person
                return None
            if not _SUBJECT_VERB.match(text, b):
                return None
            return Specific("name", s, a, b, base)
        if base in common_lowercase_words():
            return None  # a word English writes in lower case ("the Core module", "Major"), capitalized here
        if base in _COMMON and _title_run(text, a, b):
            return None  # a Title Case Heading, not a name
        return Specific("name", s, a, b, base)
    raise AssertionError(kind)


_AUXILIARY_NEXT = lazy(r"[ \t]+(?:is|are|was|were|has|have|had|will|would|can|could|does|did|seems?|looks?)\b")
# what follows the subject of a sentence: a verb in the past tense or an auxiliary ("Tom deployed",
# "Priya has approved", "Marcus also said")
_SUBJECT_VERB = lazy(
    r"[ \t]+(?:(?:also|then|just|already|now|later|never|first)[ \t]+)?"
    r"(?:[a-z]+ed|has|had|have|was|were|is|are|will|would|can|could|did|does|said|asked|told|ran|wrote|"
    r"made|took|went|got|sent|found|saw|knew|thought|gave|came|left|kept|began|broke|chose|led|paid|put|"
    r"read|set|spent|won|approved|merged|pushed|reported|confirmed)\b"
)
def _participle(word: str) -> bool:
    """An English past or present participle ("prefixed", "parsing", "cached")."""
    if not word.endswith(("ed", "ing")):
        return False
    words = common_lowercase_words()
    stem = word[:-3] if word.endswith("ing") else word[:-2]
    return word in words or any(w in words for w in (stem, stem + "e", word[:-1], stem[:-1] if len(stem) > 3 and stem[-1] == stem[-2] else ""))


# prefixes English joins to a word with a hyphen ("re-import", "non-blocking", "post-GC")
_ENGLISH_PREFIXES = frozenset("re non pre post un co sub anti self cross multi semi mid inter intra de over under".split())
_FIGURE_HEAD = lazy(r"\d+(?:\.\d+)?[kmb]?")  # "200M-row", "5-minute": a measure heading a compound
# the heads of English compound modifiers: "X-level", "X-based", "X-side" describe, they name nothing
_COMPOUND_HEADS = frozenset(
    "level based side wide like specific only safe aware friendly driven related free bound ready "
    "facing style sized scoped oriented centric heavy light proof enabled agnostic dependent".split()
)
_ID_RANGE = lazy(r"(.*?[.\-_#])(\d+)-(\d+)")
_UNIT_WORDS = frozenset(_UNITS)
_ORDINAL = lazy(r"\d+(?:st|nd|rd|th)", _I)
_ORDINAL_SUFFIX = lazy(r"st|nd|rd|th", _I)
_ASCII_LETTER = lazy(r"[A-Za-z]")
_LETTER_DIGIT = lazy(r"[A-Za-z]\d")
_XX = lazy(r"[1-5]xx", _I)
_DOTTED_NUMBER = lazy(r"(?:\d+[.-])+\d+")
_SCALED = lazy(r"\d+(?:\.\d+)?[kKMB]")
_TECH_TERMS = lazy(
    r"(?:x86|x64|ipv[46]|utf-?8|utf-?16|base64|sha\d+|md5|mp[34]|h[23]|http[23]?|oauth2|s3|ec2|k8s|p99|p95|p50|p999|2fa|mfa|i18n|l10n|a11y)",
    _I,
)
_NUM_RX = lazy(_NUM)
_ELAPSED = re.compile(r"(\d{1,3}):([0-5]\d):([0-5]\d\.\d+)")
_DIGITS = lazy(r"\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?")
_FILE_TAIL = lazy(r"\.(?:" + _FILE_EXTS + r")$")
_FUNCTION_WORDS = frozenset(
    """a an the at in on to for of and or but nor after before from with by into onto over under
    is was were are be been being has had have than then as so if when while since until per via
    across during about around against between through without within ago later earlier""".split()
)


def _noun(word: str | None) -> str:
    w = (word or "").lower()
    return "" if w in _FUNCTION_WORDS else w


def _title_run(text: str, a: int, b: int) -> bool:
    """Is this capitalized word part of a run of capitalized words (a heading in Title Case)?"""
    before = text[max(0, a - 20) : a].split()
    after = text[b : b + 20].split()
    near = (before[-1:] if before else []) + (after[:1] if after else [])
    return any(w[:1].isupper() for w in near)


# -- support ---------------------------------------------------------------------------------

# A file listing's line-number gutter (Claude Code's Read output: ``    50→  code``; ``cat -n``:
# ``    50<TAB>code``) is the harness's position marker, not a figure the file states: with it, every
# number below a listing's length would ground any count a summary invents ("500 lines", "212
# insertions"). The gutter grounds line positions ("line 50") and the listing's length only.
_ARROW_GUTTER = re.compile(r"(?m)(?:^|\\n)( *)(\d{1,7})→")  # also a listing quoted in JSON (its newlines escaped)
_TAB_GUTTER = re.compile(r"(?m)^( *)(\d{1,7})\t")


def _without_gutter(text: str) -> tuple[str, tuple[float, ...], float | None]:
    """``text`` with its listing gutters blanked (same length, so offsets hold), the line numbers
    they show (in order) and the listing's last one (None without a gutter)."""
    if "→" in text:
        matches = list(_ARROW_GUTTER.finditer(text))
    elif "\t" in text:
        matches = list(_TAB_GUTTER.finditer(text))
        # a tab after a number is a gutter only where the numbers count up line by line
        if not (len(matches) >= 3 and all(int(b.group(2)) == int(a.group(2)) + 1 for a, b in zip(matches, matches[1:]))):
            return text, (), None
    else:
        return text, (), None
    if not matches:
        return text, (), None
    chars = list(text)
    for m in matches:
        chars[m.start(2) : m.end(2)] = " " * (m.end(2) - m.start(2))
    shown = tuple(float(int(m.group(2))) for m in matches)
    return "".join(chars), shown, shown[-1]


class _Read(NamedTuple):
    """What ``SourceIndex.build`` reads in one source text, kept so that an index of some of the
    texts (``SourceIndex.subset``) is assembled without reading them again."""

    raw: str  # the text as given
    text: str  # without its listing gutter
    specifics: list[Specific]
    tokens: list[str]
    line_numbers: tuple[float, ...]
    listing_length: float | None
    figures: list[float]  # every number written in digits, outside clock times, in order
    own_tokens: bool  # ``tokens`` are ``tokens(text)`` (not given by the caller)
    # its specifics filed as ``SourceIndex`` files them, in order: by category, and the figures,
    # bare figures, figures of a noun (singular, value) and quantities (dimension, values) they state
    by_cat: dict[str, list[Specific]]
    numbers: list[float]
    bare_numbers: list[float]
    noun_numbers: list[tuple[str, float]]
    quantities: list[tuple[str, tuple[float, ...]]]


# What ``_read`` made of each text (with its own specifics and tokens): sessions repeat texts (the
# same file read twice, the same output), and one process may index the same sources more than once.
# Bounded by the characters of the texts it keys, like ``_EXTRACTED``.
_READ: dict[str, _Read] = {}
_read_chars = 0


def _read(raw: str, found: list[Specific] | None, toks: list[str] | None) -> _Read:
    global _read_chars
    if found is not None or toks is not None:
        return _read_afresh(raw, found, toks)
    got = _READ.get(raw)
    if got is None:
        if _read_chars + len(raw) > _EXTRACTED_LIMIT:
            _READ.clear()
            _read_chars = 0
        got = _READ[raw] = _read_afresh(raw, None, None)
        _read_chars += len(raw)
    return got


# a JSON object in a text: a tool call's arguments as a harness records them (``Edit({"old_string": …})``)
_JSON_OBJECT = lazy(r'\{\s*"[^"\n]{1,60}"\s*:')
_JSON_ESCAPE = lazy(r'\\(["\\/nrt])')
# the escapes read as blanks, not as line breaks: the arguments stay one line of the call, as the
# pairing rule's line windows have always seen them
_UNESCAPED = {"n": "  ", "r": "  ", "t": "  ", '"': ' "', "\\": " \\", "/": " /"}


def _json_decoded(text: str) -> str:
    """``text`` with the escapes of its JSON strings read as blanks (same length, so offsets hold):
    in the file an ``Edit`` call writes, ``\\ndefmodule`` is a line that starts ``defmodule``, not a
    word ``ndefmodule``."""
    if "\\" not in text or not _JSON_OBJECT.search(text):
        return text
    return _JSON_ESCAPE.sub(lambda m: _UNESCAPED[m.group(1)], text)


def _read_afresh(raw: str, found: list[Specific] | None, toks: list[str] | None) -> _Read:
    t, shown, length = _without_gutter(_json_decoded(raw))
    found = found if found is not None else extract(t)
    own_tokens = toks is None
    toks = toks if toks is not None else tokens(t)
    position_lines: set[float] = set()
    at = _positions(t, position_lines)  # ``x.exs:50``, grep's ``39:``: line positions, not figures
    # numbers inside identifiers, paths and URLs still count as stated for a bare number in a
    # summary ("port 8080" in a URL, "migration 0042" in 0042_add_index); the minutes of a clock
    # time do not ("retried 7 times" is not supported by "07:41"), but a date's year does; nor
    # does a line position, a digit of a UUID, a hash or an opaque token (base64, a key), or a
    # figure with a suffix glued to it (``50px``, ``spotter-4te``): that token's, no count
    blank = [(sp.start, sp.end) for sp in found if sp.category in ("time", "uuid", "hash") and sp.end > sp.start]
    blank += [(m.start(), m.end()) for m in _OPAQUE.finditer(t)]
    in_blank = bytearray(len(t) + 1)  # 1 inside a clock time, a UUID, a hash or an opaque token
    for a, b in blank:
        in_blank[a:b] = b"\x01" * (b - a)
    figures = []
    for m in _DIGITS.finditer(t):
        a, b = m.start(), m.end()
        if in_blank[a] or (at and a in at):
            continue
        if b < len(t) and t[b].isalpha() and (a == 0 or not t[a - 1].isalnum()):
            continue  # a figure with a suffix glued to it (50px, 4te): that token's, not a count
        figures.append(_canon(float(m.group(0).replace(",", ""))))
    by_cat: dict[str, list[Specific]] = {}
    numbers: list[float] = []
    bare: list[float] = []
    nouns: list[tuple[str, float]] = []
    quantities: list[tuple[str, tuple[float, ...]]] = []
    for sp in found:
        by_cat.setdefault(sp.category, []).append(sp)
        if sp.category == "number":
            if at and sp.start in at:
                continue  # a line position, not a figure
            numbers.append(sp.value)
            if not sp.noun:  # "timeout=30" may ground "a 30s timeout"; "64 files" grounds no "64 KB"
                bare.append(sp.value)
            else:
                nouns.append((_singular(sp.noun), sp.value))
        elif sp.category == "quantity":
            quantities.append(sp.value)
            num = _NUM_RX.search(sp.text)
            if num:
                numbers.append(_canon(float(num.group(0).replace(",", ""))))
        elif sp.category == "time" and (m := _ELAPSED.fullmatch(sp.text)):
            # a clock value with fractional seconds ("00:00:01.84", what an interval or a timer prints) is
            # read as an elapsed time too: 1.84 s
            h, mi, sec = m.groups()
            quantities.append(("s", (_canon(int(h) * 3600 + int(mi) * 60 + float(sec)),)))
    if position_lines:
        shown = tuple(shown) + tuple(sorted(position_lines))
    return _Read(raw, t, found, toks, shown, length, figures, own_tokens, by_cat, numbers, bare, nouns, quantities)


def _weekday_of(year: int | None, month: int | None, day: int | None) -> int | None:
    """The weekday (Monday 1, as ``_WEEKDAYS``) of a full date, None for a partial or impossible one."""
    if year is None or month is None or day is None:
        return None
    try:
        return datetime.date(year, month, day).isoweekday()
    except ValueError:
        return None


# A position in a file, as compilers, test runners and ``grep -n`` print it: ``session.ex:152``,
# ``decoder.ex:983:47``, a line ``39:matched text``. Like a listing's gutter it grounds line
# positions ("line 152"), not counts or measures.
_POSITION = re.compile(
    r"(?m)^(\d{1,6}):(?=[^\d\s]|\s*$)|(?P<file>[\w.-]*/)?[\w-]+\.(?P<ext>[A-Za-z][A-Za-z0-9]{0,5}):(\d{1,6})(?::(\d{1,4}))?(?![\w.])"
)
_HOST_TAILS = frozenset(_HOST_TLDS.split("|"))  # ``db.internal:5432`` is a host's port, not a position


# an opaque token: 20 or more letters and digits, mixed, unbroken by separators (base64, a key, a
# signature): its digits are characters, not figures
_OPAQUE = re.compile(r"(?<![\w+/])(?=[A-Za-z0-9+/]*\d[A-Za-z0-9+/]*\d)(?=[A-Za-z0-9+/]*[a-z])(?=[A-Za-z0-9+/]*[A-Z])[A-Za-z0-9+/]{20,}={0,2}")


def _positions(text: str, line_numbers: set[float]) -> set[int]:
    """The offsets of the line positions in ``text``; their numbers go to ``line_numbers``."""
    if ":" not in text:
        return set()
    out = set()
    for m in _POSITION.finditer(text):
        if m.group(1) is None and not m.group("file") and m.group("ext").lower() in _HOST_TAILS:
            continue
        for g in (1, 4, 5):
            if m.group(g) is not None:
                out.add(m.start(g))
        line = m.group(1) or m.group(4)
        line_numbers.add(float(int(line)))
    return out


@dataclass(slots=True)
class SourceIndex:
    """What a set of source texts states, indexed for ``supports``. Build once per set of sources;
    an index of some of them is ``subset``."""

    texts: tuple[str, ...]
    specifics: list[Specific] = field(default_factory=list)
    per_text: list[list[Specific]] = field(default_factory=list)
    by_cat: dict[str, list[Specific]] = field(default_factory=dict)
    numbers: set[float] = field(default_factory=set)
    bare_numbers: set[float] = field(default_factory=set)
    noun_numbers: dict[str, set[float]] = field(default_factory=dict)
    quantities: dict[str, set[float]] = field(default_factory=dict)
    toks: set[str] = field(default_factory=set)
    tok_lists: list[list[str]] = field(default_factory=list)
    _grams: set[str] | None = None
    _norm: str | None = None
    _tok_sets: list[frozenset[str]] | None = None
    _joined: tuple[str, list[int]] | None = None
    _reads: tuple[_Read, ...] = ()
    _lower: str | None = None
    line_numbers: set[float] = field(default_factory=set)  # positions a file listing's gutter shows
    listing_lengths: set[float] = field(default_factory=set)  # the last line number of each listing
    derived: dict[str, Any] = field(default_factory=dict)  # views a rule derives from the texts, on first use

    @classmethod
    def build(
        cls, texts: Iterable[str], specifics: list[list[Specific]] | None = None, tok_lists: list[list[str]] | None = None
    ) -> SourceIndex:
        """Index ``texts`` (``specifics`` and ``tok_lists``: their already extracted specifics and
        tokens, one list per text)."""
        return cls._assemble(tuple(
            _read(t, specifics[i] if specifics is not None else None, tok_lists[i] if tok_lists is not None else None)
            for i, t in enumerate(texts)
        ))

    def subset(self, keep: Iterable[int]) -> SourceIndex:
        """The index of the texts at ``keep`` (positions in ``texts``, in order): what ``build``
        makes of them with the specifics and tokens read here, without reading them again."""
        return self._assemble(tuple(self._reads[i] for i in keep))

    def read_from(self, texts: Sequence[str]) -> bool:
        """Was this index built from exactly ``texts`` (as given, before gutters were blanked)?"""
        return len(texts) == len(self._reads) and all(r.raw == t for r, t in zip(self._reads, texts))

    @classmethod
    def _assemble(cls, read: tuple[_Read, ...]) -> SourceIndex:
        idx = cls(tuple(r.text for r in read))
        idx._reads = read
        for r in read:
            idx.line_numbers.update(r.line_numbers)
            if r.listing_length is not None:
                idx.listing_lengths.add(r.listing_length)
        by_cat, numbers, noun_numbers, quantities = idx.by_cat, idx.numbers, idx.noun_numbers, idx.quantities
        distinct: dict[int, _Read] = {}  # a text read twice adds nothing more to the sets
        for r in read:
            idx.per_text.append(r.specifics)
            idx.specifics.extend(r.specifics)
            idx.tok_lists.append(r.tokens)
            for cat, found in r.by_cat.items():
                by_cat.setdefault(cat, []).extend(found)
            if id(r) in distinct:
                continue
            distinct[id(r)] = r
            idx.toks.update(r.tokens)
            numbers.update(r.numbers)
            idx.bare_numbers.update(r.bare_numbers)
            for noun, value in r.noun_numbers:
                noun_numbers.setdefault(noun, set()).add(value)
            for dim, values in r.quantities:
                quantities.setdefault(dim, set()).update(values)
        for r in distinct.values():
            numbers.update(r.figures)
        return idx

    @property
    def lower(self) -> str:
        """The texts lower-cased, one a line, built on first use."""
        if self._lower is None:
            self._lower = "\n".join(self.texts).lower()
        return self._lower

    @property
    def tok_sets(self) -> list[frozenset[str]]:
        """Each text's tokens as a set, built on first use."""
        if self._tok_sets is None:
            made: dict[int, frozenset[str]] = {}  # a text read twice holds the same token list
            self._tok_sets = [made.get(id(tk)) or made.setdefault(id(tk), frozenset(tk)) for tk in self.tok_lists]
        return self._tok_sets

    @property
    def norm(self) -> str:
        """The texts casefolded with punctuation runs collapsed (for quotes), built on first use."""
        if self._norm is None:
            self._norm = " ".join(
                " " + " ".join(r.tokens) + " " if r.own_tokens else _norm_text(r.text) for r in self._reads
            ) if len(self._reads) == len(self.texts) else " ".join(_norm_text(t) for t in self.texts)
        return self._norm

    @property
    def grams(self) -> set[str]:
        """Runs of up to four tokens joined (``billingapi``), built on first use: most checks are
        answered by the token set alone."""
        if self._grams is None:
            out: set[str] = set()
            done: set[int] = set()  # a text read twice holds the same token list: its grams once
            for tk in self.tok_lists:
                if id(tk) not in done:
                    done.add(id(tk))
                    out |= grams(tk)
            self._grams = out
        return self._grams

    def _has_name(self, key: str) -> bool:
        if key in self.toks:
            return True
        if self._grams is not None:
            return key in self._grams
        return self._joins(key)

    def _joins(self, key: str) -> bool:
        """``key in self.grams`` without making every gram: where ``key`` occurs in the texts'
        tokens written together, does it start at a token and end 1 to 4 tokens later? (A key found
        in too many places makes the grams after all.)"""
        if not key:
            return False
        if self._joined is None:
            bounds: list[int] = []
            at = 0
            for tk in self.tok_lists:
                ends = list(accumulate(map(len, tk), initial=at))
                bounds += ends
                at = ends[-1] + 1  # the texts apart: no key holds the "\0" between them
            self._joined = ("\0".join(map("".join, self.tok_lists)), bounds)
        joined, bounds = self._joined
        i = joined.find(key)
        for _ in range(64):
            if i < 0:
                return False
            k = bisect_left(bounds, i)
            if k < len(bounds) and bounds[k] == i and i + len(key) in bounds[k + 1 : k + 5]:
                return True
            i = joined.find(key, i + 1)
        return key in self.grams

    # each check returns (supported, near) where near lists source values of the same kind
    def supports(self, sp: Specific) -> tuple[bool, list[str]]:
        cat = sp.category
        fn = getattr(self, "_s_" + cat, None)
        ok = fn(sp) if fn is not None else self._s_default(sp)
        if ok:
            return True, []
        return False, self.near(sp)

    def near(self, sp: Specific) -> list[str]:
        """Source specifics of the same category (what the summary may have altered)."""
        seen: list[str] = []
        for other in self.by_cat.get(sp.category, ()):
            if sp.category == "number" and sp.noun and _singular(other.noun) != _singular(sp.noun):
                continue
            if other.text not in seen:
                seen.append(other.text)
            if len(seen) >= 3:
                break
        return seen

    def _s_default(self, sp: Specific) -> bool:
        return any(o.value == sp.value for o in self.by_cat.get(sp.category, ()))

    def _s_time(self, sp: Specific) -> bool:
        date, (h, m, s) = sp.value
        for o in self.by_cat.get("time", ()):
            odate, (oh, om, os_) = o.value
            if date is not None and odate is not None and date != odate:
                continue
            if (h, m) != (oh, om):
                continue
            if s is None or s == os_ or (s == 0 and os_ is None):
                if date is None or odate is not None or self._date_stated(date):
                    return True
        return False

    def _date_stated(self, date: tuple[int, int, int]) -> bool:
        probe = Specific("date", "", 0, 0, (*date, None))
        return self._s_date(probe)

    def _s_date(self, sp: Specific) -> bool:
        readings = sp.value if isinstance(sp.value[0], tuple) else (sp.value,)
        candidates = []
        for o in self.by_cat.get("date", ()):
            candidates.extend(o.value if isinstance(o.value[0], tuple) else (o.value,))
        for o in self.by_cat.get("time", ()):
            if o.value[0] is not None:
                candidates.append((*o.value[0], None))
        for y, mo, d, wd in readings:
            for oy, omo, od, owd in candidates:
                if wd is not None:
                    # a weekday is stated by a source naming it, or by a full date a source gives
                    # that falls on it (the weekday is a function of the date)
                    if owd == wd or (owd is None and _weekday_of(oy, omo, od) == wd):
                        return True
                    continue
                if owd is not None and oy is None:
                    continue
                if (y is None or oy is None or y == oy) and (mo is None or mo == omo) and (d is None or d == od):
                    if mo is None and d is None and oy is None:
                        continue
                    return True
            if wd is None and mo is None and d is None and y is not None and _canon(y) in self.numbers:
                return True
        return False

    def states_literally(self, sp: Specific) -> bool:
        """Does a source state the figure ``sp`` with what it counts or measures: a number with the
        same noun after it ("23 tests"), a quantity of the same dimension and value ("4.6 s" for
        "4600 ms")? A figure without a noun or unit has nothing to be stated with: False. Rounded
        forms: ``restated.rounded_in_dimension``."""
        if sp.category == "number":
            return bool(sp.noun) and sp.value in self.noun_numbers.get(_singular(sp.noun), ())
        if sp.category == "quantity":
            dim, values = sp.value
            stated = self.quantities.get(dim, set())
            return any(v in stated for v in values)
        return False

    def _s_number(self, sp: Specific) -> bool:
        v = sp.value
        if v in self.numbers:
            return True
        if sp.hedge:
            step = _precision(sp.text)
            return any(_close(v, o, sp.hedge, step) for o in self.numbers)
        if sp.weak and sp.noun and v == len(self.texts):
            return True  # "two failures" over two observations: a count of the sources themselves
        return False

    def _s_quantity(self, sp: Specific) -> bool:
        dim, values = sp.value
        stated = self.quantities.get(dim, set())
        for v in values:
            if v in stated:
                return True
            if sp.hedge and any(_close(v, o, sp.hedge, _precision(sp.text) * v / max(_first_number(sp.text), 1e-12)) for o in stated):
                return True
        # "timeout=30" in a config and "a 30s timeout" in the summary: the bare number stands
        num = _NUM_RX.search(sp.text)
        if num:
            bare = _canon(float(num.group(0).replace(",", "")))
            if bare in self.bare_numbers and dim in ("s", "%", "B") and not self.quantities.get(dim):
                return True
        return False

    def _s_version(self, sp: Specific) -> bool:
        parts, rest = sp.value
        for o in self.by_cat.get("version", ()):
            oparts, orest = o.value
            if oparts[: len(parts)] == parts and (not rest or rest == orest):
                return True
        if len(parts) <= 2 and not rest:  # "Python 3.11" against "3.11.4": a number in the sources
            return _canon(float(".".join(map(str, parts)) if len(parts) == 2 else parts[0])) in self.numbers
        return False

    def _s_hash(self, sp: Specific) -> bool:
        v = sp.value
        for o in [*self.by_cat.get("hash", ()), *self.by_cat.get("uuid", ()), *self.by_cat.get("identifier", ())]:
            ov = o.value.replace("-", "")
            if ov.startswith(v) or (len(ov) >= 7 and v.startswith(ov)):
                return True
        return v in self.lower

    def _s_uuid(self, sp: Specific) -> bool:
        return sp.value in self.lower

    def _s_code(self, sp: Specific) -> bool:
        if isinstance(sp.value, tuple):  # 5xx
            hundred = sp.value[1] * 100
            return any(hundred <= n < hundred + 100 and n == int(n) for n in self.numbers) or _word_in(sp.text.lower(), self.lower)
        return _word_in(sp.value, self.lower)

    def _s_identifier(self, sp: Specific) -> bool:
        if _word_in(sp.value, self.lower):
            return True
        if self._has_name("".join(tokens(sp.value))):
            return True
        # a range of numbered ids ("gqc.1-3" for gqc.1 to gqc.3): both ends stated
        m = _ID_RANGE.fullmatch(sp.value)
        if m and int(m.group(2)) < int(m.group(3)):
            return all(_word_in(m.group(1) + m.group(n), self.lower) for n in (2, 3))
        return False

    def _s_path(self, sp: Specific) -> bool:
        v = sp.value.lstrip("~").lstrip("./")
        if not v:
            return True
        for o in [*self.by_cat.get("path", ()), *self.by_cat.get("url", ())]:
            ov = o.value
            if ov == sp.value or ov.endswith("/" + v) or ov.lstrip("./~") == v or ov.endswith(v) and ov[-len(v) - 1 : -len(v)] in ("/", ""):
                return True
        return _word_in(v, self.lower)

    def _s_url(self, sp: Specific) -> bool:
        v = sp.value
        for o in self.by_cat.get("url", ()):
            if o.value == v or o.value.startswith(v + "/") or o.value.startswith(v + "?"):
                return True
        return v in self.lower

    def _s_email(self, sp: Specific) -> bool:
        return sp.value in self.lower

    def _s_host(self, sp: Specific) -> bool:
        if self._has_name(sp.value) or _word_in(sp.text.lower(), self.lower):
            return True
        return False

    def _s_quote(self, sp: Specific) -> bool:
        return f" {sp.value} " in self.norm

    def _s_name(self, sp: Specific) -> bool:
        v = sp.value
        if not v or self._has_name(v):
            return True
        if v.endswith("s") and self._has_name(v[:-1]):
            return True
        if self._has_name(v + "s") or self._has_name(v + "es"):
            return True
        # a possessive or plural of a stated name, or a name that is a prefix of a stated token
        # (kubernetes/k8s are not attempted)
        return False


def _singular(noun: str) -> str:
    n = noun.lower()
    if n.endswith("ies") and len(n) > 4:
        return n[:-3] + "y"
    if n.endswith(("ses", "xes", "ches", "shes")):
        return n[:-2]
    if n.endswith("s") and not n.endswith("ss"):
        return n[:-1]
    return n


def _close(v: float, o: float, hedge: str, step: float = 0.0) -> bool:
    """Does a hedged figure ``v`` ("about", "over", "under") fit the stated ``o``? ``step`` is the
    precision the figure was written with ("about 0.3 million" is good to 0.1 million)."""
    if hedge == "over":
        return o >= v and o <= v * 1.5 + 1
    if hedge == "under":
        return o <= v and o >= v * 0.5 - 1
    return abs(o - v) <= max(max(abs(v), abs(o)) * 0.1, step)


_SCALE_WORDS = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}


def _first_number(text: str) -> float:
    m = _NUM_RX.search(text)
    return float(m.group(0).replace(",", "")) if m else 1.0


def _precision(text: str) -> float:
    """The value of one unit in the last written digit: "1,200" -> 100, "0.3 million" -> 100,000."""
    m = _NUM_RX.search(text)
    if m is None:
        return 0.0
    digits = m.group(0).replace(",", "")
    if "." in digits:
        step = 10.0 ** -len(digits.split(".", 1)[1])
    else:
        stripped = digits.rstrip("0")
        step = 10.0 ** (len(digits) - len(stripped)) if stripped else 1.0
    for word, scale in _SCALE_WORDS.items():
        if word in text.lower():
            step *= scale
            break
    return step


def _word_in(needle: str, haystack: str) -> bool:
    if not needle:
        return True
    i = haystack.find(needle)
    while i >= 0:
        before = haystack[i - 1 : i]
        after = haystack[i + len(needle) : i + len(needle) + 1]
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        i = haystack.find(needle, i + 1)
    return False
