"""An LLM judge: claims extracted from a summary and verified against its sources by a model.

One chat call per summary on any OpenAI-compatible endpoint. The model gets the numbered source
observations (with who said them) and the summary, and answers with JSON: every factual claim of
the summary, whether the sources support it, contradict it or say nothing of it, and which source
numbers it relied on. Unsupported and contradicted claims become findings. Calls, tokens and
latency are counted in ``stats`` (what an audit with the judge costs).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from engine.text_clip import clip
from engine.errors import CheckerError
from engine.sdk import check_connection, openai_client
from projections.grounding import Source

__all__ = ["LLMJudge", "JudgeStats", "SYSTEM_PROMPT", "UNSUPPORTED_CLAIM", "CONTRADICTED_CLAIM"]

UNSUPPORTED_CLAIM = "unsupported-claim"
CONTRADICTED_CLAIM = "contradicted-claim"

SYSTEM_PROMPT = """You check summaries written by an AI agent of its own earlier context against the \
original observations they were made from. Split the SUMMARY into its atomic factual claims (times, \
numbers, names, ids, quotes, who asked for what, what was done, what failed or succeeded, which fact \
belongs to which thing). For each claim decide, using ONLY the numbered SOURCES:
- "supported": a source states it (paraphrase is fine);
- "contradicted": a source states something incompatible (another value, the opposite outcome, \
another owner);
- "unsupported": no source states it (invented, or inferred beyond the sources).
A claim about what the user asked or said is supported only by a source whose role is user.
Answer with JSON only, no prose: {"claims": [{"claim": "...", "verdict": "supported" | \
"contradicted" | "unsupported", "sources": [source numbers], "evidence": "short quote or empty"}]}"""


class _Claim(msgspec.Struct):
    claim: str
    verdict: str
    sources: list[int] = []
    evidence: str = ""


class _Reply(msgspec.Struct):
    claims: list[_Claim]


_decode_reply = msgspec.json.Decoder(_Reply)
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


class JudgeStats(msgspec.Struct):
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    failures: int = 0

    @property
    def mean_latency(self) -> float:
        return self.seconds / self.calls if self.calls else 0.0


class LLMJudge:
    """``LLMJudge("gpt-4.1-mini")``, or ``LLMJudge("qwen2.5:7b", base_url="http://127.0.0.1:11434/v1")``.

    ``max_source_chars`` bounds what is sent per source (the start and the end are kept);
    ``client``: an ``openai.OpenAI``-compatible client to use instead of building one."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        max_source_chars: int = 6_000,
        temperature: float | None = 0.0,
        json_mode: bool = True,
        client: Any = None,
    ):
        check_connection(model, timeout, max_retries, "the judge")
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_source_chars = max_source_chars
        self.temperature = temperature
        self.json_mode = json_mode
        self.name = f"llm:{model}"
        self.stats = JudgeStats()
        self._client = client
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LLMJudge({self.model!r}, base_url={self.base_url!r})"

    # -- the Checker protocol ------------------------------------------------------------------

    def check(self, summary: str, sources: Sequence[Source]) -> list[dict]:
        reply = self._ask(self.prompt(summary, sources))
        out: list[dict] = []
        n = len(sources)
        for claim in reply.claims:
            verdict = claim.verdict.strip().lower()
            if verdict == "supported":
                continue
            if verdict not in ("unsupported", "contradicted"):
                raise CheckerError(f"{self.name} answered verdict {claim.verdict!r}; expected supported, contradicted or unsupported")
            cited = [i for i in claim.sources if isinstance(i, int) and 1 <= i <= n]
            kind = CONTRADICTED_CLAIM if verdict == "contradicted" else UNSUPPORTED_CLAIM
            what = "contradicts its sources" if verdict == "contradicted" else "is stated by none of its sources"
            evidence = f" (source {', '.join(map(str, cited))}: {claim.evidence!r})" if cited and claim.evidence else ""
            out.append(
                {
                    "kind": kind,
                    "category": "claim",
                    "value": claim.claim,
                    "severity": "error",
                    "message": f"the claim {claim.claim!r} {what}{evidence}",
                    "sources": cited,
                    "checker": self.name,
                }
            )
        return out

    # -- the call --------------------------------------------------------------------------------

    def prompt(self, summary: str, sources: Sequence[Source]) -> str:
        lines = ["SOURCES:"]
        for i, src in enumerate(sources, 1):
            text = src.text
            if len(text) > self.max_source_chars:
                half = self.max_source_chars // 2
                text = text[:half] + "\n[…]\n" + text[-half:]
            lines.append(f"[{i}] ({src.role or 'unknown'}) {text}")
        lines += ["", "SUMMARY:", summary]
        return "\n".join(lines)

    def _client_or_new(self) -> Any:
        if self._client is None:
            self._client = openai_client(
                base_url=self.base_url, key=self.api_key, timeout=self.timeout, max_retries=self.max_retries,
                error=CheckerError, who="the LLM judge",
            )
        return self._client

    def _ask(self, prompt: str) -> _Reply:
        client = self._client_or_new()
        kwargs: dict[str, Any] = {}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        started = time.perf_counter()
        try:
            completion = client.chat.completions.create(
                model=self.model,
                messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}],
                **kwargs,
            )
        except Exception as e:  # the SDK's connection, status and timeout errors
            with self._lock:
                self.stats.failures += 1
            raise CheckerError(f"{self.name} could not be reached or refused the request: {type(e).__name__}: {_one_line(e)}") from None
        elapsed = time.perf_counter() - started
        usage = getattr(completion, "usage", None)
        with self._lock:
            self.stats.calls += 1
            self.stats.seconds += elapsed
            self.stats.prompt_tokens += int(getattr(usage, "prompt_tokens", 0) or 0)
            self.stats.completion_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        choices = getattr(completion, "choices", None) or []
        content = getattr(getattr(choices[0], "message", None), "content", None) if choices else None
        if not isinstance(content, str) or not content.strip():
            raise CheckerError(f"{self.name} returned no text to parse")
        return parse_reply(content, self.name)


def parse_reply(content: str, who: str = "the judge") -> _Reply:
    """The judge's JSON (code fences and prose around the object tolerated)."""
    text = _FENCE.sub("", content.strip())
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise CheckerError(f"{who} answered without a JSON object: {clip(content, 160)!r}")
    try:
        return _decode_reply.decode(text[start : end + 1])
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise CheckerError(f"{who} answered JSON that is not a claims list ({_one_line(e)}): {clip(content, 160)!r}") from None


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())[:300]

