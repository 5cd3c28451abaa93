"""A name stated in another written form: the ``literal`` rule's identifier normalisation.

A name is its parts, whatever case and separators join them, its last part in any inflection
(``dev-dependencies`` is ``dev-dependency``, ``OOMKills`` is ``OOMKilled``): ``max_replicas``, ``maxReplicas``,
``max-replicas`` and ``MaxReplicas`` are one name, and a source that writes a longer identifier
states each of its parts as a name (``Prometheus`` in ``kube-prometheus-stack``, ``prometheus.yml``
or ``kubePrometheusStack``). An acronym is the initials of words a source writes capitalized, in
order (``RDS`` for "Relational Database Service"; a digit after a letter counts that initial again:
``EC2`` for "Elastic Compute Cloud", ``S3`` for "Simple Storage Service"), small words between
them aside (``IAM``: "Identity and Access Management"). What no source writes in any form (a product
a port number suggests, a field the summarizer knows from elsewhere) is still not stated: world
knowledge grounds nothing.

Nor does its absence show an invention: a word such as ``Prometheus``, ``HSTS`` or ``p99`` is the
field's vocabulary as often as the session's, and telling which takes the world knowledge the
checker lacks. A word name is a fact about the session when the summary makes it an actor, a person
who did or said something there (``Ravi deployed``, ``approved by Priya``, ``escalated to Rotili``):
``named_as_actor``. A joined identifier (``max_restarts``, ``LiveData``, ``billing-api``) is what a
codebase makes, so it stays a literal whatever its place.
"""

from __future__ import annotations

import re

from projections.grounding.lazy import lazy
from projections.grounding.specifics import SourceIndex, grams, tokens

__all__ = ["name_stated", "acronym_stated", "one_word", "named_as_actor", "spelled_out"]

_CAMEL_PART = lazy(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_CAMEL_TOKEN = lazy(r"\b[A-Za-z][A-Za-z0-9]*[a-z0-9][A-Z][A-Za-z0-9]*\b")
_TITLE_RUN = lazy(r"\b[A-Z][a-z]+(?:[ \t]+(?:(?:of|and|for|the|on|&)[ \t]+)?[A-Z][a-z]+)+")
_SMALL_WORDS = frozenset(("of", "and", "for", "the", "on", "&"))
_ACRONYM = lazy(r"[A-Z][A-Z0-9]{1,7}s?")
_REPEAT = lazy(r"([a-z])([2-4])")


_I = re.IGNORECASE
# what a person is the agent or the addressee of: "approved by X", "escalated to X", "asked X"
_ACT_BY = lazy(r"\b(?:approved|reviewed|requested|reported|written|filed|opened|raised|assigned|owned|signed off|"
               r"confirmed|suggested|proposed|authored|merged|rejected|flagged|asked|decided|chosen)[ \t]+by[ \t]+$", _I)
_ACT_TO = lazy(r"\b(?:escalated|assigned|handed(?:[ \t]+(?:it|this|off))?|delegated|forwarded|reported|messaged|"
               r"sent|passed|talked|spoke|replied|wrote)[ \t]+(?:back[ \t]+)?to[ \t]+$", _I)
_ADDRESSEE = lazy(r"\b(?:ask|asked|asking|tell|told|telling|ping|pinged|pinging|cc|cc'd|notify|notified|"
                  r"thank|thanked|remind|reminded|@)[ \t]*$", _I)
# what the name did in the session, right after it: an act in the past tense ("Ravi deployed"), or
# what only a person does ("Priya approves", "Omar is rewriting retry")
_PERSON_VERB = lazy(r"(?:'s[ \t]+)?[ \t]*(?:\([^)\n]{0,40}\)[ \t]*)?(?:also[ \t]+|then[ \t]+|has[ \t]+|had[ \t]+|have[ \t]+)?"
                    r"(?:[a-z]{2,}ed|ran|wrote|made|took|sent|found|saw|gave|left|kept|broke|chose|led|put|"
                    r"said|says|asked|asks|approved|approves|wants|wanted|agreed|agrees|decided|requested|"
                    r"reviewed|suggested|proposed|noted|mentioned|prefers|preferred|thinks|thought|told|replied|"
                    r"signed|confirmed|objected|insisted|promised|volunteered|owns|will[ \t]+(?:review|check|"
                    r"look|decide|approve|handle|take|do)|is[ \t]+(?:rewriting|reviewing|working|looking|handling|"
                    r"on[ \t]+call|out|away|owning)|(?:is|was)[ \t]+(?:the[ \t]+)?(?:owner|reviewer|on-call|oncall|"
                    r"author|lead|maintainer))\b", _I)
_WORD = lazy(r"[A-Za-z][A-Za-z0-9]*(?:'s)?")
_JOINED = lazy(r"[a-z][A-Z]|[A-Z][A-Z][a-z]{2}")


def one_word(name: str) -> bool:
    """A name written as one word of the language's form: ``Prometheus``, ``HSTS``, ``p99``,
    ``IPv6``; not a joined identifier (``LiveData``, ``OOMKills``, ``max_restarts``, ``billing-api``)."""
    return bool(_WORD.fullmatch(name)) and not _JOINED.search(name)


def named_as_actor(text: str, start: int, end: int) -> bool:
    """The name at ``text[start:end]`` names someone who took part in the session: the subject of
    an act in the past tense, or the agent or the addressee of an act only a person does."""
    before = text[max(0, start - 40) : start]
    if _ACT_BY.search(before) or _ACT_TO.search(before) or _ADDRESSEE.search(before):
        return True
    return bool(_PERSON_VERB.match(text, end)) and not _label_line(text, start) and not _DETERMINED.search(
        text[max(0, start - 30) : start])


# a name after an article or a determiner names a thing ("a months CTE computed", "the Kafka broker
# restarted"), not a person
_DETERMINED = lazy(r"\b(?:the|a|an|this|that|these|those|its|our|their|each|every)(?:[ \t]+[\w-]+)?[ \t]+$", _I)


def _label_line(text: str, at: int) -> bool:
    """The line holding ``at`` is a label, not a sentence: it ends with a colon ("Breakages left after
    OpenRewrite:"), or is a few words without a sentence's closing mark ("Gap found")."""
    a = text.rfind("\n", 0, at) + 1
    b = text.find("\n", at)
    line = text[a : b if b != -1 else len(text)].strip().strip("*").strip()
    return line.endswith(":") or (len(line.split()) <= 4 and not line.endswith((".", "!", "?", ";", ")")))


def _split(identifier: str) -> list[str]:
    out = []
    for chunk in identifier.replace("_", " ").replace("-", " ").replace(".", " ").replace("/", " ").split():
        out.extend(p.lower() for p in _CAMEL_PART.findall(chunk))
    return out


def _camel_parts(index: SourceIndex) -> set[str]:
    """Every run of name parts of the sources' camelCase tokens, joined (``kubePrometheusStack``
    gives prometheus, prometheusstack, ...): what ``SourceIndex``'s tokens keep as one word."""
    cached = index.derived.get("camel parts")
    if cached is None:
        cached = set()
        for t in index.texts:
            for m in _CAMEL_TOKEN.finditer(t):
                cached |= grams(_split(m.group(0)))
        index.derived["camel parts"] = cached
    return cached


def name_stated(written: str, index: SourceIndex) -> bool:
    """Are the name parts of ``written`` stated together, in order, by a source token (in any
    case, with any separators, or inside a longer camelCase identifier)?"""
    ps = _split(written.strip("`\"'"))
    if not ps or len(ps) > 4:
        return False
    head = "".join(ps[:-1])
    camel = None
    for last in _inflections(ps[-1]) if len(ps) > 1 else (ps[-1],):
        joined = head + last
        if joined in index.toks or joined in index.grams:
            return True
        camel = _camel_parts(index) if camel is None else camel
        if joined in camel:
            return True
    return False


def _inflections(word: str) -> tuple[str, ...]:
    """A joined name's last part in each inflection English gives it: ``dev-dependencies`` is
    ``dev-dependency``, ``OOMKills`` is ``OOMKilled``."""
    if not word.isalpha() or len(word) < 3:
        return (word,)
    base = word
    for suffix, repl in (("ies", "y"), ("ied", "y"), ("es", ""), ("ed", ""), ("ing", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)] + repl
            break
    forms = {word, base, base + "s", base + "es", base + "ed", base + "d", base + "ing"}
    if base.endswith("y"):
        forms |= {base[:-1] + "ies", base[:-1] + "ied"}
    if base.endswith("e"):
        forms |= {base[:-1] + "ing"}
    return (word, *sorted(forms - {word}))


def _initials(index: SourceIndex) -> set[str]:
    """The initials of every run of two or more capitalized words the sources write (small words
    between them aside), lower-cased: "Amazon Relational Database Service" gives ards, rds, ..."""
    cached = index.derived.get("initials")
    if cached is None:
        cached = set()
        for t in index.texts:
            if len(t) > 400_000:
                continue
            for m in _TITLE_RUN.finditer(t):
                letters = _letters(m.group(0)).lower()
                for a in range(len(letters)):
                    for b in range(a + 3, min(len(letters), a + 8) + 1):
                        cached.add(letters[a:b])
        index.derived["initials"] = cached
    return cached


def _letters(run: str) -> str:
    """The initials of a run of capitalized words, small words between them aside."""
    return "".join(w[0] for w in run.split() if w not in _SMALL_WORDS)


def spelled_out(text: str, acronyms: set[str]) -> list[str]:
    """Each run of capitalized words in ``text`` whose initials are one of ``acronyms``, the way a
    source spells the acronym out ("Mail Privacy Protection" for "MPP")."""
    out = []
    for m in _TITLE_RUN.finditer(text):
        words = [w for w in m.group(0).split() if w not in _SMALL_WORDS]
        out += [" ".join(words[a:b]) for a in range(len(words)) for b in range(a + 2, len(words) + 1)
                if _letters(" ".join(words[a:b])) in acronyms]
    return out


def acronym_stated(written: str, index: SourceIndex) -> bool:
    """An acronym (three or more initials) the initials of capitalized words a source writes spell."""
    if not _ACRONYM.fullmatch(written):
        return False
    body = written[:-1] if written.endswith("s") else written
    letters = _REPEAT.sub(lambda m: m.group(1) * int(m.group(2)), body.lower())
    if len(letters) < 3 or not letters.isalpha():
        return False
    return letters in _initials(index)
