"""Following a conversation without a header through a whole-history rewrite.

A client that compacts its own history sends ``[system, "<summary of the earlier turns>", <next
turn>, ...]`` — or, as Claude Code's automatic compaction does, the summary alone with the next
instruction at its end: its opening changed, so by its opening it is a new conversation. The proxy
takes it as a rewrite of a conversation it recorded when ALL of these hold (the rule docs/proxy.md
states, with its measured precision):

1. same client: the same credentials (a hash, never stored) and User-Agent;
2. same system prompt and the same tools;
3. the first message after the system prompt is one plain text part (the shape of a summary);
4. the request holds fewer messages than that conversation's history did (a rewrite shrinks it);
5. and the summary is that conversation's, by one of two kinds of evidence:
   a. QUOTED: it reproduces a long reply (``QUOTED_CHARS``+) the model gave in exactly one such
      conversation — word for word up to markup (``QUOTED_SHARE`` of the reply's ``SHINGLE``-word
      runs are in the summary; Claude Code turns the model's ``<summary>`` tags into "Summary:").
      This is what a client that asked the model for the summary through the proxy sends, and
      the only evidence taken for a request that is the summary ALONE: a lone message is how
      every conversation opens, so only a reply the model wrote in that conversation ties it to one.
   b. WORDS, when the summary is followed by at least one more message (the next turn): its
      distinctive words (identifiers, numbers, words of 5+ letters) are that conversation's: at
      least ``MIN_SHARED`` of them, ``MIN_SCORE`` of their weight (a word found in fewer of the
      candidate conversations weighs more), and ``MARGIN`` times the runner-up's score.
   An ambiguous match (two conversations quoted, or a runner-up within the margin) joins nothing.

Anything else is a new conversation, as before: a conversation is never joined on a guess.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable
from hashlib import blake2b

__all__ = ["Follower", "distinctive", "MIN_SCORE", "MIN_SHARED", "MARGIN"]

MIN_SCORE = 0.3  # weighted share of the summary's distinctive words found in the conversation
MIN_SHARED = 2  # fewest distinctive words in common
MARGIN = 2.0  # the best conversation's score over the runner-up's
QUOTED_CHARS = 200  # a reply this long reproduced in the summary tells its conversation
QUOTED_SHARE = 0.8  # of the reply's word runs found in the summary
SHINGLE = 8  # words per run: a run of 8 words rarely recurs by chance
SAMPLE = 64  # word runs kept per reply (the smallest hashes: a fixed-size sample of any reply)
REPLIES_KEPT = 4
WORDS_KEPT = 20_000  # distinctive words remembered per conversation (the most recent)
CONVERSATIONS_KEPT = 1024

_TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./:-]*[A-Za-z0-9_]|[0-9]")
_COMMON = frozenset(
    "about above after again against because before being below between could didn doesn during every "
    "further having might other should their there these those through under until where which while "
    "would conversation summary summarized earlier previous continue continued session please thanks "
    "assistant answer question questions asked users user there here below above first second third".split()
)


def distinctive(text: str) -> set[str]:
    """The words of ``text`` that tell conversations apart: identifiers, numbers, words of 5+ letters."""
    out = set()
    for m in _TOKEN.finditer(text):
        w = m.group().lower().strip(".:-/")
        if not w or w in _COMMON:
            continue
        if len(w) >= 5 or any(c.isdigit() for c in w) or "_" in w or "." in w or "/" in w:
            out.add(w)
    return out


_WORD = re.compile(r"[A-Za-z0-9_]+")


def _runs(text: str) -> set[int]:
    """Hashes of the ``SHINGLE``-word runs of ``text``, its words lower-cased and its markup and
    punctuation ignored (a reply and a client's reformatting of it share them)."""
    words = _WORD.findall(text.lower())
    if len(words) < SHINGLE:
        return {hash(tuple(words))} if words else set()
    return set(map(hash, zip(*(words[k:] for k in range(SHINGLE)))))


def _sample(text: str) -> frozenset[int]:
    return frozenset(sorted(_runs(text))[:SAMPLE])


def fingerprint(client: str, system_hash: str, tools: bytes | None) -> str:
    """Who is talking and with what instructions: credentials and User-Agent (hashed here, never
    kept), the system prompt's hash, the tools' bytes."""
    h = blake2b(digest_size=12)
    for part in (client.encode("utf-8", "replace"), system_hash.encode(), tools or b"-"):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


class _Conversation:
    __slots__ = ("fingerprint", "words", "messages", "replies")

    def __init__(self, fp: str):
        self.fingerprint = fp
        self.words: OrderedDict[str, None] = OrderedDict()
        self.messages = 0  # messages in its latest request (and replies since)
        self.replies: list[frozenset[int]] = []  # samples of the word runs of its latest long replies


class Follower:
    """The conversations this proxy recorded without a header, and the rule above. Written by the
    store thread (what was recorded), read by the event loop (which session a request goes to)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conversations: OrderedDict[str, _Conversation] = OrderedDict()
        self._joined: OrderedDict[tuple[str, str], str] = OrderedDict()  # (client, a rewrite's opening) -> its conversation
        # a sampled word run -> the (conversation, reply sample) holding it: a summary is checked
        # against every kept reply by looking up its own runs, not by visiting each conversation
        self._quoted: dict[int, set[tuple[str, frozenset[int]]]] = {}

    def _index(self, name: str, samples: Iterable[frozenset[int]], add: bool) -> None:
        for sample in samples:
            for h in sample:
                if add:
                    self._quoted.setdefault(h, set()).add((name, sample))
                else:
                    holders = self._quoted.get(h)
                    if holders is not None:
                        holders.discard((name, sample))
                        if not holders:
                            del self._quoted[h]

    def register(self, name: str, fp: str) -> None:
        with self._lock:
            if name not in self._conversations:
                self._conversations[name] = _Conversation(fp)
                while len(self._conversations) > CONVERSATIONS_KEPT:
                    gone, c = self._conversations.popitem(last=False)
                    self._index(gone, set(c.replies), add=False)

    def tracks(self, name: str) -> bool:
        return name in self._conversations

    def recorded(self, name: str, texts: Iterable[str], messages: int, replies: Iterable[str] = ()) -> None:
        """What a call recorded in ``name``: the texts of new spans, the size of the client's view,
        the model's replies."""
        samples = [_sample(reply) for reply in replies if len(reply) >= QUOTED_CHARS]
        with self._lock:
            c = self._conversations.get(name)
            if c is None:
                return
            if samples:
                old = set(c.replies)
                c.replies = [*c.replies, *samples][-REPLIES_KEPT:]
                self._index(name, old - set(c.replies), add=False)
                self._index(name, set(c.replies) - old, add=True)
            for text in texts:
                for w in distinctive(text):
                    c.words[w] = None
                    c.words.move_to_end(w)
            while len(c.words) > WORDS_KEPT:
                c.words.popitem(last=False)
            c.messages = messages

    def rewritten(self, fp: str, summary: str, messages: int, *, alone: bool = False) -> str | None:
        """The conversation a request of ``messages`` messages opening with ``summary`` rewrites,
        or None (then it is a new conversation). ``alone``: nothing follows the summary (then only
        a quoted reply counts)."""
        # Every conversation of this client and prompt competes, the shrink (rule 4) is asked of the
        # winner only: a conversation already rewritten must not leave its continuation to the next best.
        runs = _runs(summary)
        words = set() if alone else distinctive(summary)
        with self._lock:
            hits: Counter[tuple[str, frozenset[int]]] = Counter()
            for h in runs & self._quoted.keys():  # the runs some kept reply has (C-level intersection)
                hits.update(self._quoted[h])
            quoted = sorted({name for (name, sample), k in hits.items()
                             if k >= QUOTED_SHARE * len(sample) and self._conversations[name].fingerprint == fp})
            if len(quoted) == 1:
                return quoted[0] if messages < self._conversations[quoted[0]].messages else None
            if alone or len(quoted) > 1 or len(words) < MIN_SHARED:
                return None
            candidates = [(name, c) for name, c in self._conversations.items() if c.fingerprint == fp]
            if not candidates:
                return None
            sizes = {name: c.messages for name, c in candidates}
            df = {w: sum(1 for _, c in candidates if w in c.words) for w in words}
            n = len(candidates)
            weight = {w: math.log((n + 1) / (max(k, 1) + 0.5)) for w, k in df.items()}
            total = sum(weight.values()) or 1.0
            scores = sorted(
                ((sum(weight[w] for w in words if w in c.words) / total, sum(1 for w in words if w in c.words), name)
                 for name, c in candidates),
                reverse=True,
            )
        score, shared, name = scores[0]
        if score < MIN_SCORE or shared < MIN_SHARED:
            return None
        if len(scores) > 1 and scores[1][0] * MARGIN > score:
            return None  # two conversations could have written it: join neither
        return name if messages < sizes[name] else None

    def join(self, fp: str, opening: str, name: str) -> None:
        """This client's requests that open like this one (the summary and what follows it) go to ``name``."""
        with self._lock:
            self._joined[(fp, opening)] = name
            self._joined.move_to_end((fp, opening))
            while len(self._joined) > CONVERSATIONS_KEPT:
                self._joined.popitem(last=False)

    def joined(self, fp: str, opening: str) -> str | None:
        """The conversation this client's rewrite opening like this was recognised as, if any."""
        return self._joined.get((fp, opening))
