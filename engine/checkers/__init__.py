"""Model-based drift checkers, pluggable beside the lexical default (``projections.grounding.checker``).

- ``LLMJudge``: claims extracted from a summary and verified against its cited sources by any
  OpenAI-compatible chat endpoint (OpenAI, vLLM, llama.cpp, Ollama, LiteLLM…); extra ``openai``.
- ``NLIChecker``: a local NLI cross-encoder (an ONNX model and its ``tokenizer.json`` in a
  directory you point at; nothing is downloaded); extra ``nli``.
- ``checker_from_spec("lexical" | "llm:MODEL[@BASE_URL]" | "nli:DIR")``: what the CLI's
  ``--checker`` option and ``$CTXLEDGER_CHECKER`` build.

Both implement ``projections.grounding.checker.Checker``: pass one to ``Ledger.open(url, checker=...)`` and
the audit, the grounding gate, blame, the report and the fleet view use it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LLMJudge", "NLIChecker", "checker_from_spec"]


def __getattr__(name: str) -> Any:
    if name == "LLMJudge":
        from engine.checkers.llm_judge import LLMJudge

        return LLMJudge
    if name == "NLIChecker":
        from engine.checkers.nli import NLIChecker

        return NLIChecker
    if name == "checker_from_spec":
        from engine.checkers.spec import checker_from_spec

        return checker_from_spec
    raise AttributeError(f"module 'engine.checkers' has no attribute {name!r}")
