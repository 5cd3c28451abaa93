"""Rewriters: turn source spans into the text of a derived span.

A ``Rewriter`` is anything with ``name`` and ``rewrite(spans, *, instruction=None, max_tokens=None)``.
The engine only ever hands a rewriter ORIGINAL observed spans (a rewrite of live generation-0 spans,
or a rederive from the log), so no rewriter ever summarizes a summary.

- ``ExtractiveRewriter``: deterministic and offline; keeps the sentences that carry specifics.
- ``OpenAIRewriter``: any OpenAI-compatible server, via the official ``openai`` SDK (extra ``openai``).
- ``AnthropicRewriter``: the Messages API via the official ``anthropic`` SDK (extra ``anthropic``).

The model adapters turn every failure — timeout, connection error, API error after the SDK's
retries, a malformed or empty response — into ``RewriterError``. The caller writes nothing then:
an error message never becomes a summary.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from engine.errors import InvalidInputError, RewriterError
from engine.sdk import anthropic_client, check_connection, openai_client
from engine.spans import Span
from engine.tokens import EstimateCounter, TokenCounter

__all__ = [
    "Rewriter",
    "ExtractiveRewriter",
    "OpenAIRewriter",
    "AnthropicRewriter",
    "DEFAULT_INSTRUCTION",
    "format_sources",
]

DEFAULT_INSTRUCTION = (
    "Summarize the observations below for your own later use. Keep every specific verbatim: ids, "
    "names, numbers, times, paths, error messages. Keep distinct events distinct, even when they look "
    "alike. Do not add anything the observations do not state. Reply with the summary only."
)


@runtime_checkable
class Rewriter(Protocol):
    name: str

    def rewrite(
        self, spans: Sequence[Span], *, instruction: str | None = None, max_tokens: int | None = None
    ) -> str: ...


def format_sources(spans: Sequence[Span]) -> str:
    """The sources as a model reads them: one block per span, with its id, role and kind."""
    blocks = []
    for s in spans:
        head = f"[{s.id} {s.role}"
        if s.kind == "tool_call":
            head += f" tool call {s.meta.get('name', '')} {s.meta.get('tool_call_id', '')}"
        elif s.kind == "tool_result":
            head += f" tool result {s.meta.get('tool_call_id', '')}"
        blocks.append(f"{head}]\n{s.text}")
    return "\n\n".join(blocks)


def _check_spans(spans: Any) -> list[Span]:
    spans = list(spans) if isinstance(spans, (list, tuple)) else None
    if not spans or not all(isinstance(s, Span) for s in spans):
        raise InvalidInputError("a rewriter needs a non-empty list of Span objects")
    return spans


MIN_BUDGET = 16


def _check_max_tokens(max_tokens: Any, default: int) -> int:
    if max_tokens is None:
        return default
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < MIN_BUDGET:
        raise InvalidInputError(f"max_tokens must be an int >= {MIN_BUDGET}; got {max_tokens!r}")
    return max_tokens


# -- extractive ------------------------------------------------------------------------------------

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_SPECIFIC = re.compile(
    r"\d"  # numbers, times, versions, status codes
    r"|[A-Za-z_]+[-_/.:][A-Za-z0-9_]"  # identifiers, paths, hosts, dotted names
    r"|\b[A-Z][a-z]+[A-Z]"  # CamelCase
    r"|\b[A-Z]{2,}\b"  # acronyms, HTTP verbs
    r"|\b(?i:error|fail\w*|exception|timeout|timed out|refused|denied|crash\w*|panic|fatal|warn\w*)\b",
)


class ExtractiveRewriter:
    """Deterministic, offline: keeps the sentences that carry the most specifics (numbers, ids,
    paths, errors), in their original order and words, within a token budget. It cannot invent
    anything: every sentence it emits is a sentence of a source, tagged with that source's id."""

    name = "extractive"

    def __init__(self, max_tokens: int = 400, *, counter: TokenCounter | None = None):
        self.max_tokens = _check_max_tokens(max_tokens, 400)
        self.counter = counter or EstimateCounter()

    def __repr__(self) -> str:
        return f"ExtractiveRewriter(max_tokens={self.max_tokens})"

    def rewrite(
        self, spans: Sequence[Span], *, instruction: str | None = None, max_tokens: int | None = None
    ) -> str:
        spans = _check_spans(spans)
        budget = _check_max_tokens(max_tokens, self.max_tokens)
        candidates: list[tuple[int, int, str, str]] = []  # (order, score, span id, sentence)
        order = 0
        for s in spans:
            for sentence in _SENTENCE.split(s.text):
                sentence = " ".join(sentence.split())
                if not sentence:
                    continue
                score = len(_SPECIFIC.findall(sentence))
                candidates.append((order, score, s.id, sentence))
                order += 1
        # Sentences without specifics only when no sentence has any. Highest score first; among
        # equals, the earlier sentence. Then emit in source order.
        specific = [c for c in candidates if c[1] > 0]
        ranked = sorted(specific or candidates, key=lambda c: (-c[1], c[0]))
        header = f"Extract of {len(spans)} observations (sentences kept verbatim):"
        used = self.counter.count(header)
        kept: list[tuple[int, int, str, str]] = []
        for c in ranked:
            line = f"- {c[2]}: {c[3]}"
            cost = self.counter.count(line) + 1
            if used + cost > budget:
                if kept:
                    continue
                line = _truncate(line, budget - used, self.counter)  # at least something, within budget
                cost = self.counter.count(line)
                c = (c[0], c[1], c[2], line[len(f"- {c[2]}: "):])
            kept.append(c)
            used += cost
        kept.sort(key=lambda c: c[0])
        return "\n".join([header] + [f"- {c[2]}: {c[3]}" for c in kept])


def _truncate(line: str, budget: int, counter: TokenCounter) -> str:
    words = line.split(" ")
    while len(words) > 3 and counter.count(" ".join(words) + " …") > max(budget, 1):
        words = words[: max(3, len(words) * 3 // 4)]
    return " ".join(words) + " …"


# -- model adapters ---------------------------------------------------------------------------------


class _ModelRewriter:
    name = "model"
    _extra = ""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        max_tokens: int = 1024,
        temperature: float | None = None,
        system: str | None = None,
        client: Any = None,
    ):
        check_connection(model, timeout, max_retries, "a model rewriter")
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.max_tokens = _check_max_tokens(max_tokens, 1024)
        self.temperature = temperature
        self.system = system or (
            "You compact an agent's context window. You only ever see original observations; "
            "your output is stored as a derived span and marked as such."
        )
        self._client = client
        self.name = f"{self.name}:{model}"

    def __repr__(self) -> str:
        where = f", base_url={self.base_url!r}" if self.base_url else ""
        return f"{type(self).__name__}({self.model!r}{where})"

    def _sdk_client(self) -> Any:
        raise NotImplementedError

    def _call(self, client: Any, prompt: str, max_tokens: int) -> str:
        raise NotImplementedError

    def rewrite(
        self, spans: Sequence[Span], *, instruction: str | None = None, max_tokens: int | None = None
    ) -> str:
        spans = _check_spans(spans)
        budget = _check_max_tokens(max_tokens, self.max_tokens)
        prompt = f"{instruction or DEFAULT_INSTRUCTION}\nAt most {budget} tokens.\n\n{format_sources(spans)}"
        try:
            client = self._client = self._client or self._sdk_client()
            text = self._call(client, prompt, budget)
        except RewriterError:
            raise
        except Exception as e:
            raise RewriterError(
                f"{self.name} failed: {type(e).__name__}: {_first_line(e)}; nothing was written"
            ) from e
        if not isinstance(text, str) or not text.strip():
            raise RewriterError(f"{self.name} returned no text; nothing was written")
        return text.strip()


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else ""


class OpenAIRewriter(_ModelRewriter):
    """Chat Completions on any OpenAI-compatible server (``base_url`` for vLLM, llama.cpp, Ollama…).

    ``max_tokens_param`` names the request field for the output cap: ``max_tokens`` (what local
    servers accept) or ``max_completion_tokens`` (newer OpenAI models)."""

    name = "openai"
    _extra = "openai"

    def __init__(self, model: str, *, max_tokens_param: str = "max_tokens", **kw: Any):
        if max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise InvalidInputError("max_tokens_param must be max_tokens or max_completion_tokens")
        self.max_tokens_param = max_tokens_param
        super().__init__(model, **kw)

    def _sdk_client(self) -> Any:
        return openai_client(
            base_url=self.base_url, key=self.api_key, timeout=self.timeout, max_retries=self.max_retries,
            error=RewriterError, who=type(self).__name__,
        )

    def _call(self, client: Any, prompt: str, max_tokens: int) -> str:
        completion = client.chat.completions.create(
            model=self.model,
            messages=[{"role": "system", "content": self.system}, {"role": "user", "content": prompt}],
            **({} if self.temperature is None else {"temperature": self.temperature}),
            **{self.max_tokens_param: max_tokens},
        )
        choices = getattr(completion, "choices", None)
        if not choices:
            raise RewriterError(f"{self.name} returned a response without choices; nothing was written")
        message = getattr(choices[0], "message", None)
        content = getattr(message, "content", None)
        if not isinstance(content, str):
            raise RewriterError(f"{self.name} returned a message without text content; nothing was written")
        return content


class AnthropicRewriter(_ModelRewriter):
    """The Anthropic Messages API (``base_url`` for a proxy or gateway)."""

    name = "anthropic"
    _extra = "anthropic"

    def _sdk_client(self) -> Any:
        return anthropic_client(
            base_url=self.base_url, key=self.api_key, timeout=self.timeout, max_retries=self.max_retries,
            error=RewriterError, who=type(self).__name__,
        )

    def _call(self, client: Any, prompt: str, max_tokens: int) -> str:
        message = client.messages.create(
            model=self.model,
            max_tokens=max_tokens,
            system=self.system,
            messages=[{"role": "user", "content": prompt}],
            # newer SDKs dropped the keyword; the API still takes it for models that support it
            **({} if self.temperature is None else {"extra_body": {"temperature": self.temperature}}),
        )
        blocks = getattr(message, "content", None)
        if not isinstance(blocks, list):
            raise RewriterError(f"{self.name} returned a response without content; nothing was written")
        texts = [b.text for b in blocks if getattr(b, "type", None) == "text" and isinstance(getattr(b, "text", None), str)]
        if not texts:
            raise RewriterError(f"{self.name} returned no text block; nothing was written")
        return "".join(texts)
