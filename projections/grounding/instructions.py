"""Rule ``instruction``: what a summary says the user asked for is in the user's own words.

A resumed agent executes what its summary says the user wanted, so "the user asked to …" must be
stated in the user's voice: a user message or a command the user typed -- not a tool's output, a
hook's injected context or the assistant's own plans. The claim is its verb phrase: quotations and parentheses
inside it cite evidence (an issue title read from a tool, "epic: …") and are checked as literals by
the ``literal`` rule, not as the user's words ("as the user asked" inside a clause points back at
that clause). A claim whose words no user message holds (a clipped or derived word is the word it
comes from: "ops" for "operations", "confirm" for "confirmation") is a warning (an instruction that appears nowhere); its literals that no source holds at all are errors
of the ``literal`` rule. A request may carry the values the session resolved the user's words to
("keep Kotlin where it is" told as "Kotlin stays at 1.8.22"): a value the user never gave is no
sign of invention when a source states it and the user gave that thing no other value. "as the
user required" points back at its own clause; in a relative clause ("the fallback the user asked to
keep is still there") the request is the noun phrase, kept; a concession after a request ("even
though …") is the summarizer's aside; a capitalised run that spells out an acronym the user wrote
("Mail Privacy Protection" for "MPP") is the user's word. A label that attributes its line to the
user ("User rule:", "Constraint from the user:") claims the user's words like a verb does, and a
request by pronoun ("They want …" after "User asked …") is one in any tense.
"""

from __future__ import annotations

import re

from projections.grounding.evidence import Evidence
from projections.grounding.lazy import lazy
from projections.grounding.names import spelled_out
from projections.grounding.registry import GroundingFinding, finding, rule
from projections.grounding.specifics import extract, tokens
from projections.grounding.text import clip, content_words, sentences, stem

__all__ = ["INVENTED_INSTRUCTION", "user_instructions", "INSTRUCTION_SUPPORT"]

INVENTED_INSTRUCTION = "invented-instruction"
INSTRUCTION_SUPPORT = 0.5  # share of the claim's content words one user message must state

_INSTRUCTION = lazy(
    r"\b(?:the\s+)?user(?:'s)?\s+(?:has\s+|had\s+|also\s+|then\s+|explicitly\s+|specifically\s+)?"
    r"(?:asked|requested|wants|wanted|instructed|told|insisted|prefers|preferred|would\s+like|needs|"
    r"expects|demanded|directed|approved|agreed|confirmed|said|mentioned|specified|chose|decided|"
    r"required|requires|stressed|emphasi[sz]ed|added\s+that|noted\s+that|made\s+clear)\b"
    r"|\b(?:per|following|according\s+to|as\s+per)\s+(?:the\s+)?user(?:'s)?\s+(?:request|instructions?|wishes|"
    r"preference|direction|guidance|orders?)\b"
    r"|\b(?:per|according\s+to)\s+the\s+user\s*,"
    r"|\bas\s+(?:the\s+)?user\s+(?:requested|asked|instructed|wanted|said)\b"
    r"|\buser(?:'s)?\s+(?:request|instruction|requirement|rule|constraint|preference|condition|directive|wish)(?:e?s)?\s*(?::|was|were|is|are)"
    r"|\b(?:request|instruction|requirement|rule|constraint|preference|condition|directive)s?\s+(?:from|by|of)\s+the\s+user\s*:"
    r"|\bthe\s+user(?:'s)?\s+(?:request|instruction|requirement|ask)\s+(?:was|is)\s+to\b",
    re.IGNORECASE,
)
# cited evidence inside a claim: "…", “…”, `…`, (…)
_CITED = re.compile(r"\"[^\"\n]{1,300}\"|“[^”\n]{1,300}”|`[^`\n]{1,300}`|\([^()\n]{1,300}\)")
_APPOSITIVE = re.compile(r"\s+[-–—]\s+|,\s+(?:a|an|the|which|whose|titled|called)\s+|\s+\(")
# the summarizer's own conclusion after the request: "asked for the first, so ops-7m2 is the task"
_CONSEQUENCE = re.compile(r",\s+(?:and\s+)?(?:so|therefore|hence|thus)\s+|;\s+"
                          r"|,?\s+(?:even\s+though|although|though|whereas)\s+")  # a concession is the summarizer's aside
# verbs coordinated with a sentence whose subject is the user share that subject:
# "User interrupted the wait, said "check again" and asked not to …"
_USER_WORD = re.compile(r"\buser\b", re.IGNORECASE)
_USER_SUBJECT = re.compile(r"^[\W\d]*(?:the\s+)?user\b", re.IGNORECASE)
_COORDINATED = re.compile(
    r"(?:,|\band\b|\bthen\b)\s+(?:also\s+|then\s+)?(?:asked|requested|instructed|told|insisted|demanded|"
    r"required|wants|wanted|said)\b",
    re.IGNORECASE,
)
# a request whose subject is left out or is a pronoun: "- Asked to leave app.js alone", "They also said …"
_BARE_REQUEST = lazy(
    r"\b(?:(?:they|he|she)\s+(?:also\s+|then\s+|later\s+)?"
    r"(?:asked|requested|wanted|insisted|instructed|told|said|stressed|specified|required|demanded|"
    r"wants?|asks?|insists?|requires?|prefers?)\b"
    r"|(?:asked|requested|wanted|insisted|instructed|told|said|stressed|specified|required|demanded)\b"
    r"(?=\s+(?:to|that|for|not|on|us|me|claude|the\s+agent|it)\b))",
    re.IGNORECASE,
)
_PRONOUN_REQUEST = lazy(
    r"\b(?:they|he|she)\s+(?:also\s+|then\s+|later\s+)?"
    r"(?:asked|requested|wanted|insisted|instructed|told|said|stressed|specified|required|demanded|"
    r"wants?|asks?|insists?|requires?|prefers?)\b",
    re.IGNORECASE,
)
_MARKER_PREFIX = re.compile(r"[\W\d]*")
_AS_ASKED = re.compile(r"as\s+(?:the\s+)?user\s+\w+", re.IGNORECASE)
_AS_BEFORE = re.compile(r"\bas\s+$", re.IGNORECASE)  # "built as online DDL as the user required"
# what makes the user that subject: a heading that lists the user's words ("6. All user messages:"), or
# an earlier sentence of the same paragraph whose request is the user's ("User asked to …. They also …")
_USER_HEADING = lazy(r"^[\W\d]*(?:all\s+)?(?:the\s+)?user(?:'s)?\s+(?:messages?|requests?|instructions?|feedback|asks?)\b",
                     re.IGNORECASE | re.MULTILINE)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_QUOTED = re.compile(r"\"([^\"\n]{4,300})\"|“([^”\n]{4,300})”")


@rule("instruction", (INVENTED_INSTRUCTION,),
      "What the summary says the user asked for is in a user message or a command the user typed.")
def check_instructions(ev: Evidence) -> list[GroundingFinding]:
    return user_instructions(ev)


def user_instructions(ev: Evidence) -> list[GroundingFinding]:
    """Claims about what the user asked for whose words no user source states."""
    text = ev.text
    out: list[GroundingFinding] = []
    if _INSTRUCTION.search(text) is None and _USER_WORD.search(text) is None:
        return out
    user_texts = ev.user_texts
    user_words = [content_words(t) for t in user_texts]
    user_index = ev.user_index
    for offset, sentence in sentences(text):
        resolved = _bare_request(sentence) is not None and _user_is_antecedent(text, offset)
        for m, claim in _requests(sentence, resolved):
            f = _judge(sentence, offset, m, claim, user_texts, user_words, user_index, ev.index)
            if f is not None:
                out.append(f)
    return out


def _bare_request(sentence: str) -> re.Match | None:
    """The request verb a sentence opens with when it leaves its subject out or names it by a pronoun."""
    m = _BARE_REQUEST.search(sentence)
    return m if m is not None and _MARKER_PREFIX.fullmatch(sentence[: m.start()]) else None


def _user_is_antecedent(text: str, offset: int) -> bool:
    """The user is the subject a subjectless or pronoun request at ``offset`` takes: the paragraph
    before it (back to a blank line) is headed by a list of the user's words, or reports a request of
    the user's in an earlier sentence."""
    breaks = [m.end() for m in _PARAGRAPH_BREAK.finditer(text, 0, offset)]
    before = text[breaks[-1] if breaks else 0 : offset]
    return _USER_HEADING.search(before) is not None or _INSTRUCTION.search(before) is not None


def _requests(sentence: str, resolved: bool = False) -> list[tuple[re.Match, str]]:
    """Each request a sentence reports, with the words that state it (up to the next request).
    ``resolved``: the user is the subject of a request that leaves its subject out ("Asked to …")."""
    marks = list(_INSTRUCTION.finditer(sentence))
    if not marks and resolved:
        marks = [_bare_request(sentence)]
    if marks or _USER_SUBJECT.match(sentence):
        first = marks[0].start() if marks else 0
        marks += [m for m in _COORDINATED.finditer(sentence) if m.start() > first]
        marks += [m for m in _PRONOUN_REQUEST.finditer(sentence) if m.start() > first]
        marks.sort(key=lambda m: m.start())
    out = []
    for i, m in enumerate(marks):
        if _CONDITION.search(sentence, 0, m.start()):
            continue  # "if the user wants fixes: …" is a condition on a wish, not a request made
        end = marks[i + 1].start() if i + 1 < len(marks) else len(sentence)
        if _BECAUSE.match(sentence) and (comma := sentence.find(",", m.end())) > 0:
            end = min(end, comma)  # "Because the user asked for X, Y": Y is what the summarizer did about it
        claim = sentence[m.end() : end].strip(" :,.-")
        as_asked = _AS_ASKED.fullmatch(m.group(0)) or _AS_BEFORE.search(sentence, 0, m.start())
        if i == 0 and as_asked and not _MARKER_PREFIX.fullmatch(sentence[: m.start()].replace("as", "", 1)):
            # "…, rounded to the nearest hundred as the user asked: EC2 $18,400": inside its clause,
            # "as the user asked" points back at it ("Recap: as the user asked, web …" opens one)
            before = _AS_BEFORE.sub("", sentence[: m.start()]).rstrip(" ,")  # "(no manual state surgery, as the user asked)"
            own = before[max(before.rfind(c) for c in ",;:(") + 1 :].strip(" :,.-")
            if own and not _MARKER_PREFIX.fullmatch(own) and len(own.split()) >= 3:
                claim = own
            elif own and len(claim) < 3:  # "still `false`, untouched, as the user asked": a bare predicate
                claim = before.strip(" :,.-")  # is said of what the sentence names before it
        elif (rel := _antecedent(sentence, m)) is not None:
            # "the root_path fallback the user asked to keep is still there": the request is its noun
            # phrase, kept; what the sentence goes on to say of it is the summarizer's
            verb = _TO_VERB.match(sentence, m.end())
            claim = f"{verb.group(1)} {rel}" if verb else rel
        elif len(claim) < 3 and i == 0:
            claim = sentence[: m.start()].strip(" :,.-")  # "Keep v1 until Friday, as the user asked."
        out.append((m, claim))
    return out


# a request in a relative clause: "the <noun phrase> the user asked (to keep)"
_DETERMINER = re.compile(r"\b(?:the|a|an|this|these|those|its|their|your)\s+", re.I)
_NOUN_PHRASE = re.compile(r"(?:[\w`'./-]+\s+){0,5}[\w`'./-]+", re.I)
_TO_VERB = re.compile(r"\s+to\s+([a-z]+)\b", re.I)
_NOT_NOUN = frozenset("that which what who as because since so and or but if when where how why than then also "
                      "is are was were be been has have had do does did not".split())


def _antecedent(sentence: str, m: re.Match) -> str | None:
    """The noun phrase a request mark directly follows, when the mark opens a relative clause on it
    ("the fallback the user asked to keep"); None when the mark follows anything else."""
    if not m.group(0).lower().startswith(("the user", "user")):
        return None
    before = sentence[: m.start()]
    last = None
    for last in _DETERMINER.finditer(before):
        pass
    if last is None:
        return None
    phrase = before[last.end() :].strip()
    if not _NOUN_PHRASE.fullmatch(phrase) or phrase.split()[-1].lower() in _NOT_NOUN:
        return None
    return phrase


# what the user may want, put as a condition: "Next, if the user wants fixes: …", "unless the user prefers …"
_CONDITION = re.compile(r"\b(?:if|unless|whether|in\s+case)\s+(?:\w+\s+)?$", re.IGNORECASE)
_BECAUSE = re.compile(r"[\W\d]*(?:because|since)\s+(?:the\s+)?user\b", re.IGNORECASE)


def _judge(sentence: str, offset: int, m: re.Match, claim: str, user_texts: list[str],
           user_words: list[set[str]], user_index, index=None) -> GroundingFinding | None:
    """A finding when no user message states the request ``claim`` (None when one does)."""
    if _quotes_a_user(claim, user_texts):
        return None  # the words quoted are the user's own
    # the request is the verb phrase: an appositive after it ("bead X - an epic with 3 tasks",
    # "bead X, a P1 epic titled …") describes what was read from a tool, and cited titles and
    # asides are evidence, checked as literals; a conclusion after it is the summarizer's own
    request = _CITED.sub(" ", _CONSEQUENCE.split(_APPOSITIVE.split(claim, 1)[0], 1)[0])
    words = content_words(request)
    specifics = [sp for sp in extract(request) if not sp.weak and sp.category != "quote"]
    if not words and not specifics:
        return None
    if words:
        # a capitalised run that spells out an acronym the user wrote is the user's word for it
        # ("Mail Privacy Protection" for the user's "MPP")
        user_words = [uw | _spelled_out(request, t) for uw, t in zip(user_words, user_texts)]
    best = max((_shared(words, uw) / len(words) for uw in user_words), default=0.0) if words else 1.0
    missing = [sp.text for sp in specifics if user_index is None or not user_index.supports(sp)[0]]
    if best >= INSTRUCTION_SUPPORT and not missing:
        return None
    if best >= INSTRUCTION_SUPPORT and index is not None and _made_concrete(
            request, [sp for sp in specifics if sp.text in missing], words, user_texts, user_words, index):
        return None
    who = "no user message" if not user_texts else "none of the user's messages"
    why = f" (the user never mentions {', '.join(repr(x) for x in missing[:3])})" if missing else ""
    return finding(
        "instruction", INVENTED_INSTRUCTION, "warning", sentence.strip(),
        f"the summary says the user asked for {clip(claim)!r}, which {who} among its sources says{why}",
        offset=offset + m.start(), category="instruction", support=round(best, 2),
    )


def _made_concrete(request: str, missing: list, words: set[str], user_texts: list[str],
                   user_words: list[set[str]], index) -> bool:
    """The user's words, with the values the session resolved them to: every value the user never
    gave is one a source states, and no user message that states the request's words gives the
    thing it is said of another value ("keep Kotlin where it is" is "Kotlin stays at 1.8.22"; "keep
    batches at 5k" is not "batches of 10k")."""
    if not all(index.supports(sp)[0] for sp in missing):
        return False
    saying = [t for t, uw in zip(user_texts, user_words) if words and _shared(words, uw) / len(words) >= INSTRUCTION_SUPPORT]
    for sp in missing:
        head = [stem(w.lower()) for w in _WORDS.findall(request[: sp.start]) if stem(w.lower()) in words]
        if not head:
            continue
        near = re.compile(r"\b" + re.escape(head[-1]) + r"\w*\b(.{0,40})", re.IGNORECASE | re.DOTALL)
        for t in saying:
            for m in near.finditer(t):
                if any(o.category == sp.category and not o.weak for o in extract(m.group(1))):
                    return False  # the user gave it a value of its own
    return True


_WORDS = re.compile(r"[A-Za-z][\w-]*")


_ACRONYM = re.compile(r"\b[A-Z]{2,6}\b")


def _spelled_out(request: str, user_text: str) -> set[str]:
    """The claim's words of each capitalised run whose initials are an acronym ``user_text`` writes."""
    acronyms = set(_ACRONYM.findall(user_text))
    return {w for run in spelled_out(request, acronyms) for w in content_words(run)} if acronyms else set()


def _shared(words: set[str], user: set[str]) -> int:
    """How many of a claim's words the user's message states, a word clipped or derived from
    another counting as it ("ops" for "operations", "confirm" for "confirmation")."""
    return sum(1 for w in words if w in user or any(_one_word(w, u) for u in user))


def _one_word(a: str, b: str) -> bool:
    """``a`` and ``b`` are one word: one is the other's plural or stem, the shorter begins the longer, which
    is longer by a suffix ("confirm" / "confirmation"), or is its clipped plural ("ops" / "operation", "docs" /
    "document")."""
    short, long = sorted((a, b), key=len)
    if short.isdigit():
        return False
    if long in (short + "s", short + "es") or (len(short) >= 5 and long == short + "e"):
        return True  # a plural, or one word's stems cut differently: "chang" (changes) / "change"
    if len(long) < len(short) + 2:
        return False
    if len(short) >= 4 and long.startswith(short):
        return True
    return len(short) >= 3 and short.endswith("s") and long.startswith(short[:-1]) and not long.startswith(short)


def _quotes_a_user(claim: str, user_texts: list[str]) -> bool:
    """The claim quotes the user's own words (what follows the quote is context, not the request)."""
    folded = [" ".join(tokens(t)) for t in user_texts]
    for m in _QUOTED.finditer(claim):
        quoted = " ".join(tokens(m.group(1) or m.group(2)))
        if quoted and any(quoted in f for f in folded):
            return True
    return False
