"""``--checker`` / ``$CTXLEDGER_CHECKER`` values: ``lexical``, ``llm:MODEL[@BASE_URL]``, ``nli:DIR``."""

from __future__ import annotations

from engine.errors import InvalidInputError
from projections.grounding.checker import LEXICAL, Checker

__all__ = ["checker_from_spec", "SPEC_HELP"]

SPEC_HELP = "lexical (default), llm:MODEL[@BASE_URL] (an OpenAI-compatible judge), nli:DIR (a local ONNX NLI model)"


def checker_from_spec(spec: str | None) -> Checker:
    spec = (spec or "lexical").strip()
    if spec == "lexical":
        return LEXICAL
    kind, _, rest = spec.partition(":")
    if kind == "llm" and rest:
        from engine.checkers.llm_judge import LLMJudge

        model, _, base_url = rest.partition("@")
        if not model:
            raise InvalidInputError(f"bad checker {spec!r}: llm:MODEL[@BASE_URL] needs a model name")
        return LLMJudge(model, base_url=base_url or None)
    if kind == "nli" and rest:
        from engine.checkers.nli import NLIChecker

        return NLIChecker(rest)
    raise InvalidInputError(f"unknown checker {spec!r}; use {SPEC_HELP}")
