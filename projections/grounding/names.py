"""A name stated in another written form: the ``literal`` rule's identifier normalisation.

A name is its parts, whatever case and separators join them: ``max_replicas``, ``maxReplicas``,
``max-replicas`` and ``MaxReplicas`` are one name, and a source that writes a longer identifier
states each of its parts as a name (``Prometheus`` in ``kube-prometheus-stack``, ``prometheus.yml``
or ``kubePrometheusStack``). An acronym is the initials of words a source writes capitalized, in
order (``RDS`` for "Relational Database Service"; a digit after a letter counts that initial again:
``EC2`` for "Elastic Compute Cloud", ``S3`` for "Simple Storage Service"), small words between
them aside (``IAM``: "Identity and Access Management"). What no source writes in any form (a product
a port number suggests, a field the summarizer knows from elsewhere) is still not stated: world
knowledge grounds nothing.
"""

from __future__ import annotations

from projections.grounding.lazy import lazy
from projections.grounding.specifics import SourceIndex, grams, tokens

__all__ = ["name_stated", "acronym_stated"]

_CAMEL_PART = lazy(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_CAMEL_TOKEN = lazy(r"\b[A-Za-z][A-Za-z0-9]*[a-z0-9][A-Z][A-Za-z0-9]*\b")
_TITLE_RUN = lazy(r"\b[A-Z][a-z]+(?:[ \t]+(?:(?:of|and|for|the|on|&)[ \t]+)?[A-Z][a-z]+)+")
_SMALL_WORDS = frozenset(("of", "and", "for", "the", "on", "&"))
_ACRONYM = lazy(r"[A-Z][A-Z0-9]{1,7}s?")
_REPEAT = lazy(r"([a-z])([2-4])")


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
    joined = "".join(ps)
    return joined in index.toks or joined in index.grams or joined in _camel_parts(index)


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
                letters = "".join(w[0].lower() for w in m.group(0).split() if w not in _SMALL_WORDS)
                for a in range(len(letters)):
                    for b in range(a + 3, min(len(letters), a + 8) + 1):
                        cached.add(letters[a:b])
        index.derived["initials"] = cached
    return cached


def acronym_stated(written: str, index: SourceIndex) -> bool:
    """An acronym (three or more initials) the initials of capitalized words a source writes spell."""
    if not _ACRONYM.fullmatch(written):
        return False
    body = written[:-1] if written.endswith("s") else written
    letters = _REPEAT.sub(lambda m: m.group(1) * int(m.group(2)), body.lower())
    if len(letters) < 3 or not letters.isalpha():
        return False
    return letters in _initials(index)
