"""A figure stated in another unit, rounded, as a ratio or in another time zone: the one
conversion principle of the ``literal`` rule.

A figure the summary writes with a unit is stated by a source quantity of the same dimension that,
converted to the summary's unit and rounded to the precision the summary writes, is the summary's
figure: ``912384716800 bytes`` is "912 GB", ``sleep 120`` is "two minutes", ``2Gi`` is "2048Mi",
``18423.77 USD`` is "$18,400", ``02:00 UTC`` is "03:00 CET", ``errors=64 total=2000`` is "3.2%".

What keeps chance out, in a session of 400 sources where some figure lands near almost any other:

- the precision is what the summary writes: half a unit of its last significant digit ("2 minutes":
  1.5 to 2.5 minutes; "912 GB": 911.5 to 912.5 GB; "$18,400": $18,350 to $18,450); a hedge ("about")
  widens it as ``SourceIndex`` already allows;
- an exact conversion (120 s is 2 minutes, 2Gi is 2048Mi) is as good as the figure written verbatim;
- a source quantity is a figure with its unit, or a bare figure with the unit its label writes
  (``timeout_ms: 30000``, ``"size_bytes": 1024``, ``sleep 120``: POSIX sleep counts seconds), or whose
  language's time idiom gives it one (``500 * time.Millisecond``, ``setTimeout(f, 3100)``, ``timedelta(minutes=5)``);
- a rounding of a source quantity is accepted only when the window is fine (at most ``FINE`` of the
  figure: a chance value rarely lands in it) or the source names what the summary's sentence names
  (``Pairing``); a printed fraction is a ratio, a quantity like these (``0.0031`` is 0.31%); any
  other bare figure, read in the summary's own unit, counts only when the source names it so, and
  then exactly or in a fine window; a ratio of two figures of one source line only on a line that
  names it so;
- a time in a named zone converts only through the fixed offsets below, and only from a source time
  whose zone is written.
"""

from __future__ import annotations

import re

from projections.grounding.lazy import lazy
from projections.grounding.specifics import SourceIndex, Specific, parse_number, tokens, unit_factors, unit_of
from projections.grounding.text import STOP_WORDS, stem

__all__ = ["FINE", "ZONE_OFFSETS", "precision", "converted", "labelled_quantities", "ratio_as_percent", "time_in_zone", "rounds_to"]

FINE = 0.01  # a rounding window at most this share of the figure is too narrow for chance to land in

# Fixed UTC offsets (minutes) of zone names: each is one offset all year. Names that mean several
# zones (IST: India, Ireland, Israel; CST: US Central, China) are not converted.
ZONE_OFFSETS = {
    "utc": 0, "gmt": 0, "z": 0, "wet": 0, "west": 60, "bst": 60, "cet": 60, "cest": 120, "eet": 120,
    "eest": 180, "msk": 180, "jst": 540, "kst": 540, "aest": 600, "aedt": 660, "nzst": 720, "nzdt": 780,
    "est": -300, "edt": -240, "cdt": -300, "mst": -420, "mdt": -360, "pst": -480, "pdt": -420,
    "akst": -540, "akdt": -480, "hst": -600,
}
_ZONE_AFTER = lazy(r"\s*\(?\s*(?:(?P<name>[A-Za-z]{1,5})\b|(?P<off>[+-]\d{2}:?\d{2})\b)")
_ZONE_IN = lazy(r"(?:(?<=\d)Z|\b(?:UTC|GMT)|[+-]\d{2}:?\d{2})\s*$", re.I)
_OFFSET = lazy(r"([+-])(\d{2}):?(\d{2})")

_FIGURE = lazy(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+")
_SENTENCE_END = lazy(r"[.!?;](?:\s|$)")
# a bare figure whose label writes its unit: ``timeout_ms: 30000``, ``"size_bytes": 1024``,
# ``ttlSeconds=60``, ``bytes: 912384716800``, a metric ``node_filesystem_size_bytes{...} 9.1e+11``;
# an amount after its currency code (``USD 18,423.77``); and ``sleep 120`` (POSIX sleep counts seconds)
_UNIT_WORD = r"ms|msec|millis|milliseconds|s|sec|secs|seconds|min|mins|minutes|h|hr|hours|days|bytes|kb|kib|mb|mib|gb|gib|pct|percent|usd|eur"
_LABELLED = lazy(
    rf"(?:\b[A-Za-z][A-Za-z0-9_-]*?(?:[_-](?P<u1>{_UNIT_WORD})|(?<=[a-z0-9])(?P<u2>Ms|Millis|Sec|Secs|Seconds|Minutes|Hours|Days|Bytes|Kb|Mb|Gb|Pct|Percent))|\b(?P<u3>bytes|seconds|milliseconds))"
    r"(?:\{[^{}\n]{0,300}\})?[\"']?\s*[:=]?\s*[\"']?(?P<num>\d+(?:\.\d+)?(?:e[+-]?\d+)?)(?![\w.])"
    r"|\b(?P<code>USD|EUR|GBP)\s?(?P<amount>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\w.])"
    r"|\bsleep\s+(?P<sleep>\d+(?:\.\d+)?)(?![\w.])",
)

# a figure a language's own time idiom gives its unit: Go's ``500 * time.Millisecond``, Java's
# ``Duration.ofSeconds(30)`` and ``Thread.sleep(500)`` (ms), Rust's ``Duration::from_millis(250)``,
# Python's ``time.sleep(0.5)`` (s) and ``timedelta(minutes=5)``, JavaScript's ``setTimeout(f, 3100)`` (ms)
_NUM_ARG = r"(?P<{}>\d+(?:\.\d+)?)"
_CODE_DURATION = lazy(
    r"(?<![\w.])" + _NUM_ARG.format("go") + r"\s*\*\s*time\.(?P<go_unit>Nanosecond|Microsecond|Millisecond|Second|Minute|Hour)\b"
    r"|\bDuration(?:\.of|::from_)(?P<du_unit>Millis|Seconds|Minutes|Hours|Days|millis|secs|mins)\(\s*" + _NUM_ARG.format("du") + r"L?\s*\)"
    r"|\btimedelta\(\s*(?P<td_unit>milliseconds|seconds|minutes|hours|days)\s*=\s*" + _NUM_ARG.format("td") + r"\s*[,)]"
    r"|\b(?:time\.sleep|asyncio\.sleep)\(\s*" + _NUM_ARG.format("pys") + r"\s*\)"
    r"|\b(?:Thread\.sleep|setTimeout\([^;\n]{0,200}?,)\s*\(?\s*" + _NUM_ARG.format("ms") + r"L?\s*\)"
)
_CODE_UNITS = {"nanosecond": 1e-9, "microsecond": 1e-6, "millisecond": 1e-3, "second": 1.0, "minute": 60.0, "hour": 3600.0,
               "millis": 1e-3, "seconds": 1.0, "secs": 1.0, "minutes": 60.0, "mins": 60.0, "hours": 3600.0, "days": 86400.0,
               "milliseconds": 1e-3}


def _code_durations(text: str) -> list[tuple[float, int]]:
    """(seconds, offset) of each duration ``text`` writes in a language's time idiom."""
    out = []
    for m in _CODE_DURATION.finditer(text):
        for group, unit in (("go", "go_unit"), ("du", "du_unit"), ("td", "td_unit"), ("pys", None), ("ms", None)):
            if m.group(group) is not None:
                factor = _CODE_UNITS[m.group(unit).lower()] if unit else (1.0 if group == "pys" else 1e-3)
                out.append((float(m.group(group)) * factor, m.start(group)))
                break
    return out


def precision(written: str) -> float:
    """One unit of the last significant digit of the first figure in ``written``: "2" -> 1,
    "5.4" -> 0.1, "18,400" -> 100 (trailing zeros of a whole number may be rounding)."""
    m = _FIGURE.search(written)
    if m is None:
        return _word_precision(written)
    digits = m.group(0).replace(",", "")
    if "." in digits:
        return 10.0 ** -len(digits.split(".", 1)[1])
    stripped = digits.rstrip("0")
    return 10.0 ** (len(digits) - len(stripped)) if stripped else 1.0


def _word_precision(written: str) -> float:
    words = written.split()
    n = next((n for k in range(len(words), 0, -1) if (n := parse_number(" ".join(words[:k]))) is not None), None)
    if n is None or n < 10 or n != int(n):
        return 1.0
    digits = str(int(n))
    return 10.0 ** (len(digits) - len(digits.rstrip("0")))


_COMPOUND = lazy(r"(?:\d+[hm] ?)+(?P<last>\d+(?:\.\d+)?)(?P<unit>[ms])$", re.I)


def reading(sp: Specific) -> tuple[float, float, set[float]] | None:
    """How a quantity is written: (its figure, one unit of its last significant digit, the factors
    of its unit to the base unit): "2 minutes" -> (2, 1, {60}); "6m40s" -> (400, 1, {1}), in its
    last unit; "two minutes" -> (2, 1, {60})."""
    _dim, values = sp.value
    compound = _COMPOUND.search(sp.text)
    if compound:
        factor = 60.0 if compound.group("unit").lower() == "m" else 1.0
        return values[0] / factor, precision(compound.group("last")), {factor}
    m = _FIGURE.search(sp.text)
    if m is not None:
        written = float(m.group(0).replace(",", ""))
        step = precision(sp.text)
    else:
        words = sp.text.split()
        written = next((n for k in range(len(words) - 1, 0, -1) if (n := parse_number(" ".join(words[:k]))) is not None), None)
        step = _word_precision(sp.text)
    if not written:
        return None
    return written, step, {v / written for v in values}


def rounds_to(source: float, written: float, step: float) -> str:
    """"exact" when ``source`` (in the summary's unit) is ``written``, "rounded" when it rounds to
    it at ``step`` (half a step either side), else ""."""
    if abs(source - written) <= 1e-9 * max(1.0, abs(written)):
        return "exact"
    if abs(source - written) <= step / 2 * (1 + 1e-9):
        return "rounded"
    return ""


# -- what the summary's sentence is about -----------------------------------------------------------


def _sentence_at(text: str, start: int, end: int) -> str:
    a = text.rfind("\n", 0, start) + 1
    b = text.find("\n", end)
    line = text[a : b if b >= 0 else len(text)]
    lo, hi = start - a, end - a
    cut = 0
    for m in _SENTENCE_END.finditer(line, 0, lo):
        cut = m.end()
    m = _SENTENCE_END.search(line, hi)
    return line[cut : m.end() if m else len(line)]


_NOT_SUBJECT = frozenset(unit for unit in ("s", "ms", "min", "h", "b", "kb", "mb", "gb", "kib", "mib", "gib", "x"))


def _root(word: str) -> str:
    """A word's stem, with "retries"/"retried" and "retry" one root."""
    if len(word) > 4 and word.endswith(("ies", "ied")):
        word = word[:-3] + "y"
    return stem(word)


def subject_words(sentence: str) -> set[str]:
    """The words a sentence names its subject with: its tokens, stemmed, without stop words,
    figures and units."""
    out = set()
    for t in tokens(sentence):
        if len(t) < 3 or t.isdigit() or t in STOP_WORDS or t in _NOT_SUBJECT or unit_of(t) or parse_number(t) is not None:
            continue
        out.add(_root(t))
    return out


def _window(source_text: str, offset: int) -> str:
    """The source line at ``offset`` with the line above it (a table's header)."""
    a = source_text.rfind("\n", 0, offset)
    a = source_text.rfind("\n", 0, a) + 1 if a > 0 else 0
    b = source_text.find("\n", offset)
    window = source_text[a : b if b >= 0 else len(source_text)]
    return window if len(window) <= 400 else source_text[max(a, offset - 200) : offset + 200]


class Pairing:
    """Is a source figure plausibly the one a summary figure names? Its source line (with the line
    above) or the rest of its unit of evidence (the tool call that printed it; where calls are not
    joined to results by an id, the source before it) names a word the summary's sentence names,
    or states another specific of that sentence."""

    def __init__(self, sp: Specific, text: str, index: SourceIndex, found: list[Specific], units: list[tuple[int, ...]] | None):
        a = text.rfind("\n", 0, sp.start) + 1
        sentence = _sentence_at(text, sp.start, sp.end)
        lo = text.find(sentence, a)
        hi = lo + len(sentence)
        self.words = subject_words(sentence)
        self.others = [o for o in found if lo <= o.start and o.end <= hi and o.start != sp.start and o.category != "quote"]
        self.index = index
        self.units = units

    def __call__(self, i: int, offset: int) -> bool:
        texts = self.index.texts
        if self.words and any(_root(t) in self.words for t in tokens(_window(texts[i], offset))):
            return True
        unit = self.units[i] if self.units is not None and i < len(self.units) else (i,)
        if len(unit) == 1 and i > 0:
            unit = (i - 1, i)  # calls not joined to results by an id: the call printed what follows it
        for j in unit:
            if j != i and self.words and any(_root(t) in self.words for t in tokens(texts[j][:4000])):
                return True
            for o in self.index.per_text[j]:
                if any(o.category == x.category and _same_value(o, x) for x in self.others):
                    return True
        return False


def _same_value(a: Specific, b: Specific) -> bool:
    if a.category == "quantity":
        return a.value[0] == b.value[0] and not set(a.value[1]).isdisjoint(b.value[1])
    return a.value == b.value


# -- quantities -------------------------------------------------------------------------------------


def labelled_quantities(index: SourceIndex) -> list[tuple[str, float, int, int, bool]]:
    """The quantities of ``_quantities`` whose unit is written in their label or a language's
    idiom rather than after them (``timeout_ms: 30000``, ``500 * time.Millisecond``)."""
    return [q for q in _quantities(index) if q[4]]


def _quantities(index: SourceIndex) -> list[tuple[str, float, int, int, bool]]:
    """(dimension, value in the base unit, text, offset, labelled) of every source quantity: a
    figure with its unit, and a bare figure whose label or idiom writes its unit."""
    cached = index.derived.get("quantities")
    if cached is not None:
        return cached
    out = []
    for i, found in enumerate(index.per_text):
        for o in found:
            if o.category == "quantity":
                out.extend((o.value[0], base, i, o.start, False) for base in set(o.value[1]))
    for i, t in enumerate(index.texts):
        if len(t) > 400_000 or not any(c.isdigit() for c in t):
            continue
        for m in _LABELLED.finditer(t):
            if m.group("sleep") is not None:
                out.append(("s", float(m.group("sleep")), i, m.start("sleep"), True))
                continue
            if m.group("code") is not None:  # "USD 18,423.77": the currency written before
                found = unit_of(m.group("code"))
                if found is not None:
                    out.append((found[0], float(m.group("amount").replace(",", "")), i, m.start("amount"), True))
                continue
            unit = (m.group("u1") or m.group("u2") or m.group("u3")).lower()
            found = unit_of(unit)
            if found is None:
                continue
            dim, factors = found
            n = float(m.group("num"))
            out.extend((dim, n * f, i, m.start("num"), True) for f in factors)
        if "(" in t or "*" in t:
            out.extend(("s", seconds, i, at, True) for seconds, at in _code_durations(t))
    index.derived["quantities"] = out
    return out


def converted(sp: Specific, text: str, index: SourceIndex, *, found: list[Specific] = (),
              units: list[tuple[int, ...]] | None = None) -> bool:
    """Is the quantity ``sp`` (of ``text``) a source quantity converted to its unit and rounded to
    its written precision, by the principle of this module? ``found``: the specifics of ``text``;
    ``units``: for each source, the sources of its unit of evidence."""
    dim, _values = sp.value
    how_written = reading(sp)
    if how_written is None:
        return False
    written, step, factors = how_written
    fine = step / 2 <= FINE * written
    plausible = Pairing(sp, text, index, list(found), units)
    # source quantities: with their unit, or bare with the unit their label writes
    for dim_, base, i, offset, _ in _quantities(index):
        if dim_ != dim:
            continue
        how = next((h for f in factors if (h := rounds_to(base / f, written, step))), "")
        if how == "exact" or (how and (fine or plausible(i, offset))):
            return True
    # bare figures: in the summary's own unit, or in the base unit of its dimension (bytes,
    # seconds: ``912384716800`` is "912 GB", ``ttl: 300`` is "5 minutes"); a printed fraction is a
    # percentage (0.0031 is "0.3%")
    readings = {1.0} | (set(factors) if dim in ("s", "B", "$", "€", "£") else set()) | ({0.01} if dim == "%" else set())
    lo, hi = written - step / 2, written + step / 2
    near: list[tuple[float, float]] = []
    for n in index.bare_numbers:
        for f in readings:
            if lo <= n / f <= hi and (f != 0.01 or 0 < n < 1):
                near.append((abs(n / f - written), n))
                break
    for _distance, n in sorted(near)[:8]:
        how, f_used = max(((rounds_to(n / f, written, step), f) for f in readings if f != 0.01 or 0 < n < 1),
                          key=lambda hf: len(hf[0]))
        if dim != "%" or n >= 1:
            # a bare count near a coarse figure ("about 40"): too likely by chance. A figure in the base
            # unit converted to the summary's (48318382080 bytes as "about 48 GB") is no bare count: a
            # figure of that many digits lands in the window by chance no more than a stated one
            if how == "rounded" and not fine and (f_used == 1.0 or n < 1000 * written):
                continue
        for i, offset in _occurrences(n, index):
            if plausible(i, offset):
                return True
    return False


def _occurrences(n: float, index: SourceIndex, limit: int = 40):
    """(text, offset) where a source writes the figure ``n`` on its own."""
    forms = {f"{n:g}", f"{n:.2f}", f"{n:,.2f}", f"{n:,.0f}", str(int(n)) if n == int(n) else f"{n}"}
    rx = re.compile(r"(?<![\w.,])(?:" + "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)) + r")(?![\w]|[.,]\d)")
    seen = 0
    for i, t in enumerate(index.texts):
        for m in rx.finditer(t):
            yield i, m.start()
            seen += 1
            if seen >= limit:
                return


def ratio_as_percent(sp: Specific, text: str, index: SourceIndex) -> bool:
    """A percentage that is a ratio of two figures one source line states (``errors=64
    total=2000`` is "3.2%"), on a line that names what the summary's sentence names."""
    dim, values = sp.value
    if dim != "%":
        return False
    v = values[0]
    step = precision(sp.text)
    words = subject_words(_sentence_at(text, sp.start, sp.end))
    if not words:
        return False
    for i, t in enumerate(index.texts):
        if len(t) > 400_000:
            continue
        pos = 0
        for line in t.split("\n"):
            start, pos = pos, pos + len(line) + 1
            if not any(c.isdigit() for c in line):
                continue
            figures = [float(m.group(0).replace(",", "")) for m in _FIGURE.finditer(line)]
            if not 2 <= len(figures) <= 8:
                continue
            if not any(_root(w) in words for w in tokens(line)):
                continue
            for a in figures:
                for b in figures:
                    if 0 < a < b and rounds_to(100 * a / b, v, step):
                        return True
    return False


# -- times in named zones ---------------------------------------------------------------------------


def _zone_after(text: str, end: int) -> int | None:
    """The UTC offset (minutes) of a zone written right after a time, or None."""
    m = _ZONE_AFTER.match(text, end)
    if m is None:
        return None
    if m.group("off"):
        return _offset_minutes(m.group("off"))
    return ZONE_OFFSETS.get(m.group("name").lower())


def _offset_minutes(written: str) -> int | None:
    m = _OFFSET.fullmatch(written)
    if m is None:
        return None
    sign = -1 if m.group(1) == "-" else 1
    return sign * (int(m.group(2)) * 60 + int(m.group(3)))


def _source_zone(o: Specific, t: str) -> int | None:
    """The zone a source time writes: inside the match (``13:30:00Z``, ``+02:00``, ``UTC``) or as
    the word after it."""
    inside = _ZONE_IN.search(o.text)
    if inside:
        z = inside.group(0).strip().lower()
        return 0 if z in ("z", "utc", "gmt") else _offset_minutes(z)
    return _zone_after(t, o.end)


def time_in_zone(sp: Specific, text: str, index: SourceIndex) -> bool:
    """A clock time the summary gives in a named zone ("03:00 CET") that a source gives, with its
    zone written, in another (``02:00 UTC``): the same instant, by the zones' fixed offsets."""
    zone = _zone_after(text, sp.end)
    if zone is None:
        inside = _ZONE_IN.search(sp.text)
        zone = 0 if inside and inside.group(0).strip().lower() in ("z", "utc", "gmt") else None
    if zone is None:
        return False
    date, (h, m, s) = sp.value
    mine = h * 60 + m
    for i, found in enumerate(index.per_text):
        for o in found:
            if o.category != "time":
                continue
            ozone = _source_zone(o, index.texts[i])
            if ozone is None or ozone == zone:
                continue
            odate, (oh, om, os_) = o.value
            if s is not None and s != os_:
                continue
            shifted = oh * 60 + om - ozone + zone
            if date is not None and odate is not None and shifted // 1440 == 0 and date != odate:
                continue
            if date is not None and odate is not None and shifted // 1440 != 0:
                continue  # the day changes with the zone: not attempted
            if shifted % 1440 == mine:
                return True
    return False
