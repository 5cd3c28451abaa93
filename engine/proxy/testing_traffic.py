"""Real sessions replayed as traffic, for the proxy's tests and benchmarks.

- ``article_conversations``: conversations built from the XSumFaith articles (a real BBC article
  read in parts, then compacted by the client into the article's real, human-written summary, then
  one more turn), plus distractors that OPEN with a summary of an article no conversation read.
  All share one system prompt and one client: the hardest case for following without a header.
- ``claude_code_requests``: the Anthropic Messages requests a Claude Code transcript's client sent,
  rebuilt from its lines (each model call's history; after its compaction boundary, the summary
  message and what followed).
- ``real_replay``: several such transcripts replayed at once through a proxy WITHOUT a header, their
  requests interleaved (many sessions in flight, one client, one system prompt), and what the proxy
  made of it: compactions recognised as rewrites of the right conversation, wrong joins, sessions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Conversation", "article_conversations", "interleaved", "send_interleaved", "claude_code_requests", "real_replay", "ReplayOutcome",
           "SYSTEM"]

UNIQUE_CHARS = 40  # a message text this long, sent by one transcript only, tells which transcript a session holds
SYSTEM = "You are a research assistant. Read what the user shares and answer briefly."


@dataclass
class Conversation:
    """One conversation's requests (OpenAI chat message lists), in order; ``compaction`` is the index
    of the request that rewrites the whole history (None for a distractor)."""

    label: str
    requests: list[list[dict[str, Any]]] = field(default_factory=list)
    compaction: int | None = None
    summary: str = ""


def _parts(text: str, n: int) -> list[str]:
    sentences = [s.strip() for s in text.replace("\" ", "\"\n").split(". ") if s.strip()]
    size = max(1, len(sentences) // n)
    return [". ".join(sentences[i : i + size]) for i in range(0, len(sentences), size)][:n]


def article_conversations(path: str | Path, n: int, distractors: int, parts: int = 3) -> list[Conversation]:
    """``n`` compacted conversations and ``distractors`` fresh ones, from the gold-summary records."""
    gold = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d["system"].lower().startswith("gold") and len(d["source"]) > 400:
                gold.append(d)
    if len(gold) < n + distractors:
        raise ValueError(f"{path} has {len(gold)} usable articles; {n + distractors} asked for")
    out = []
    for d in gold[:n]:
        c = Conversation(label=d["bbcid"], summary=f"Summary of our conversation so far: {d['summary']}.")
        history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        for k, chunk in enumerate(_parts(d["source"], parts)):
            history = [*history, {"role": "user", "content": f"Part {k + 1} of a report: {chunk}"}]
            c.requests.append(history)
            history = [*history, {"role": "assistant", "content": None}]  # the reply, filled in by the replay
        c.compaction = len(c.requests)
        c.requests.append([history[0], {"role": "user", "content": c.summary},
                           {"role": "user", "content": "What should we look at next?"}])
        out.append(c)
    for d in gold[n : n + distractors]:
        c = Conversation(label=f"fresh-{d['bbcid']}")
        c.requests.append([{"role": "system", "content": SYSTEM},
                           {"role": "user", "content": f"Summary of our conversation so far: {d['summary']}."},
                           {"role": "user", "content": "What should we look at next?"}])
        out.append(c)
    return out


def interleaved(conversations: list[Conversation]) -> Iterator[tuple[Conversation, int]]:
    """(conversation, request index) round-robin: every conversation's first request, then every
    second one, and so on (many conversations in flight at once)."""
    longest = max(len(c.requests) for c in conversations)
    for k in range(longest + 1):
        for c in conversations:
            if k < len(c.requests):
                yield c, k


def send_interleaved(client: Any, conversations: list[Conversation]) -> dict[tuple[str, int], dict[str, Any]]:
    """Send ``conversations`` through ``client`` (an httpx client on a chat-completions proxy),
    interleaved, each request carrying the replies its conversation got so far; a compacted
    conversation's last request is its compaction plus one more turn. Returns the replies by
    (label, request index)."""
    replies: dict[tuple[str, int], dict[str, Any]] = {}
    for c, k in interleaved(conversations):
        if k == len(c.requests):
            if c.compaction is None:
                continue
            messages = [*c.requests[-1], replies[(c.label, k - 1)], {"role": "user", "content": "And then?"}]
        else:
            it = iter(replies[(c.label, r)] for r in range(k))
            messages = [next(it) if m["role"] == "assistant" else m for m in c.requests[k]]
        r = client.post("/v1/chat/completions", json={"model": "m", "messages": messages}).json()
        replies[(c.label, k)] = r["choices"][0]["message"]
    return replies


# -- a Claude Code transcript as the requests its client sent ---------------------------------------


def _merged(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The transcript's model-visible messages in file order, assistant lines of one message id
    merged (Claude Code writes each content block of a reply on its own line)."""
    messages: list[dict[str, Any]] = []
    last_id = None
    for d in lines:
        kind = d.get("type")
        if kind not in ("user", "assistant") or d.get("isSidechain"):
            last_id = None if kind in ("user", "assistant") else last_id
            continue
        m = d.get("message") or {}
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        if kind == "assistant":
            if m.get("id") and m.get("id") == last_id and messages and messages[-1]["role"] == "assistant":
                messages[-1]["content"].extend(blocks)
                continue
            last_id = m.get("id")
            messages.append({"role": "assistant", "content": blocks, "_line": d})
        else:
            last_id = None
            messages.append({"role": "user", "content": blocks, "_line": d})
    return messages


def claude_code_requests(transcript: str | Path, system: str) -> tuple[list[dict[str, Any]], int]:
    """The Messages request bodies the client sent (one per model reply, each holding the history
    before it and the reply to send back), and the index of the first request after the compaction.

    Each body is ``{"model", "system", "messages", "_reply"}``: ``_reply`` is the assistant message
    the fake upstream should answer with."""
    lines = [json.loads(x) for x in Path(transcript).read_text(encoding="utf-8").splitlines() if x.strip()]
    boundary = next((i for i, d in enumerate(lines) if d.get("type") == "system" and d.get("subtype") == "compact_boundary"), None)
    before = _merged(lines[:boundary] if boundary is not None else lines)
    after = _merged(lines[boundary:]) if boundary is not None else []
    requests: list[dict[str, Any]] = []

    def calls(messages: list[dict[str, Any]], start: list[dict[str, Any]]) -> None:
        for i, m in enumerate(messages):
            if m["role"] == "assistant":
                history = [*start, *messages[:i]]
                if history and history[-1]["role"] == "user":
                    requests.append({"model": m["_line"]["message"].get("model", "claude"), "system": system,
                                     "max_tokens": 4096, "messages": [_clean(x) for x in history], "_reply": _clean(m)})

    calls(before, [])
    compaction_call = _compaction_call(Path(transcript))
    if compaction_call is not None and before:
        # the summarizing call itself: the history and the compaction prompt, answered with the summary
        prompt, reply = compaction_call
        requests.append({"model": reply["_line"]["message"].get("model", "claude"), "system": system, "max_tokens": 20000,
                         "messages": [*(_clean(x) for x in before), _clean(prompt)], "_reply": _clean(reply)})
    first_after = len(requests)
    calls(after, [])
    return requests, first_after


def _compaction_call(transcript: Path) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The compaction call's prompt and reply, from the sidechain Claude Code writes beside the session."""
    for side in sorted((transcript.parent / transcript.stem / "subagents").glob("agent-acompact-*.jsonl")):
        lines = [json.loads(x) for x in side.read_text(encoding="utf-8").splitlines() if x.strip()]
        merged = _merged([{**d, "isSidechain": False} for d in lines])
        if len(merged) >= 2 and merged[0]["role"] == "user" and merged[-1]["role"] == "assistant":
            return merged[0], merged[-1]
    return None


def _clean(m: dict[str, Any]) -> dict[str, Any]:
    return {"role": m["role"], "content": m["content"]}


# -- several real sessions replayed at once ---------------------------------------------------------


@dataclass
class ReplayOutcome:
    """What a proxy made of a mixed replay of real transcripts (by transcript label)."""

    transcripts: int
    requests: int
    sessions: int  # sessions the proxy started (one per transcript is right)
    recognised: list[str]  # transcripts whose compaction is a rewrite, with their summary, of their own session
    missed: list[str]  # transcripts whose compaction is not
    wrong_joins: list[str]  # sessions holding more than one transcript
    stray: int  # sessions holding no transcript's opening (a compaction that started a new session)


def _text_of(message: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in message["content"] if isinstance(b, dict) and b.get("type") == "text").strip()


def real_replay(transcripts: list[str | Path], system: str, url: str, answer: Callable[[dict[str, Any]], None],
                open_ledger: Callable[[], Any], headers: dict[str, str] | None = None) -> ReplayOutcome:
    """Send every transcript's requests (``claude_code_requests``) to the proxy at ``url``, round-robin
    across transcripts, without a session header, all from one client; ``answer(reply)`` is called
    before each request with the reply the upstream must give it. Then read the proxy's ledger."""
    import httpx

    runs = []
    for path in transcripts:
        requests, first_after = claude_code_requests(path, system)
        label = (re.findall(r"[0-9a-f]{8}", Path(path).stem) or [Path(path).stem])[0]
        summary = _text_of(requests[first_after]["messages"][0]) if first_after < len(requests) else ""
        runs.append((label, requests, _text_of(requests[0]["messages"][0]), summary))
    sent = 0
    with httpx.Client(base_url=url, timeout=120, headers=headers or {"x-api-key": "sk-ant-replay",
                                                                       "user-agent": "claude-cli/2.1.39"}) as client:
        for k in range(max(len(r[1]) for r in runs)):
            for _, requests, _, _ in runs:
                if k < len(requests):
                    answer(requests[k]["_reply"])
                    body = {key: v for key, v in requests[k].items() if key != "_reply"}
                    r = client.post("/v1/messages", json=body)
                    r.raise_for_status()
                    sent += 1
    # A session holds a transcript when it holds a message text only that transcript sent (its
    # opening, its summary, any of its long messages): more than one is a wrong join, wherever it happened.
    seen: dict[str, set[str]] = {}
    for label, requests, _, _ in runs:
        for r in requests:
            for m in (*r["messages"], r["_reply"]):
                text = _text_of(m)
                if len(text) >= UNIQUE_CHARS:
                    seen.setdefault(text, set()).add(label)
    owner_of = {text: next(iter(labels)) for text, labels in seen.items() if len(labels) == 1}
    summaries = {label: summary for label, _, _, summary in runs}
    recognised, wrong, stray = [], [], 0
    ledger = open_ledger()
    try:
        infos = ledger.sessions()
        for info in infos:
            s = ledger.session(info.name)
            events = list(s.events())
            texts = [e.text.strip() for e in events if type(e).__name__ in ("Observed", "Rewritten")]
            owners = {owner_of[t] for t in texts if t in owner_of}
            rewrites = [e for e in events if type(e).__name__ == "Rewritten"]
            if len(owners) > 1:
                wrong.append(info.name)
            elif not owners or not any(e.text.strip() == t for e in events if type(e).__name__ == "Observed"
                                       for t in (_text_of(r[1][0]["messages"][0]) for r in runs)):
                stray += 1  # a session that does not hold a transcript's opening: a compaction that started anew
            elif summaries[label := next(iter(owners))] and any(summaries[label] in e.text for e in rewrites):
                recognised.append(label)
    finally:
        ledger.close()
    missed = [label for label, *_ in runs if label not in recognised]
    return ReplayOutcome(len(runs), sent, len(infos), recognised, missed, wrong, stray)
