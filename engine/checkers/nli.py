"""A local NLI cross-encoder as a drift checker: does some source ENTAIL each summary sentence?

Point it at a directory holding an ONNX export of a sequence-pair classifier and its tokenizer:
``model.onnx``, ``tokenizer.json`` (the Hugging Face ``tokenizers`` format) and ``config.json``
with ``id2label`` naming the ``entailment`` and ``contradiction`` labels. Nothing is downloaded:
the files are whatever you exported or copied there. Each summary sentence is paired with every
source chunk; a sentence no chunk entails is unsupported, and contradicted when a chunk's
contradiction score is the stronger. Extra ``nli`` (onnxruntime, tokenizers, numpy).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.errors import CheckerError, InvalidInputError
from projections.grounding import Source

__all__ = ["NLIChecker"]

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


class NLIChecker:
    """``NLIChecker("/models/nli-deberta-onnx")``. ``threshold``: the entailment probability a
    sentence needs from its best source chunk; ``chunk_chars``: how much source text one pair holds."""

    def __init__(self, model_dir: str | Path, *, threshold: float = 0.5, chunk_chars: int = 1_200, batch_size: int = 16, max_length: int = 512):
        if not 0 < threshold < 1:
            raise InvalidInputError(f"threshold must be between 0 and 1, not {threshold!r}")
        self.model_dir = Path(model_dir)
        self.threshold = threshold
        self.chunk_chars = chunk_chars
        self.batch_size = batch_size
        self.max_length = max_length
        self.name = f"nli:{self.model_dir.name}"
        self._loaded: tuple[Any, Any, int, int] | None = None

    def __repr__(self) -> str:
        return f"NLIChecker({str(self.model_dir)!r}, threshold={self.threshold})"

    def _load(self) -> tuple[Any, Any, int, int]:
        if self._loaded is not None:
            return self._loaded
        try:
            import numpy  # noqa: F401
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError:
            raise CheckerError("the NLI checker needs the nli extra: pip install 'ctxledger[nli]'") from None
        files = {n: self.model_dir / n for n in ("model.onnx", "tokenizer.json", "config.json")}
        missing = [n for n, p in files.items() if not p.is_file()]
        if missing:
            raise CheckerError(f"{self.model_dir} lacks {', '.join(missing)}: the NLI checker needs model.onnx, tokenizer.json and config.json")
        try:
            config = json.loads(files["config.json"].read_text(encoding="utf-8"))
            labels = {int(k): str(v).lower() for k, v in config["id2label"].items()}
            entail = next(i for i, v in labels.items() if v.startswith("entail"))
            contra = next(i for i, v in labels.items() if v.startswith("contradict"))
        except (ValueError, KeyError, StopIteration, AttributeError, TypeError) as e:
            raise CheckerError(f"{files['config.json']}: id2label must name entailment and contradiction labels ({e})") from None
        try:
            tokenizer = Tokenizer.from_file(str(files["tokenizer.json"]))
            tokenizer.enable_truncation(self.max_length)
            tokenizer.enable_padding()
            session = onnxruntime.InferenceSession(str(files["model.onnx"]), providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 - the libraries' own parse errors
            raise CheckerError(f"cannot load the NLI model in {self.model_dir}: {type(e).__name__}: {' '.join(str(e).split())[:300]}") from None
        self._loaded = (tokenizer, session, entail, contra)
        return self._loaded

    def scores(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[tuple[float, float]]:
        """(entailment, contradiction) probabilities for each (premise, hypothesis) pair."""
        import numpy as np

        tokenizer, session, entail, contra = self._load()
        wanted = {i.name for i in session.get_inputs()}
        out: list[tuple[float, float]] = []
        pairs = list(zip(premises, hypotheses))
        for start in range(0, len(pairs), self.batch_size):
            batch = tokenizer.encode_batch(pairs[start : start + self.batch_size])
            feed = {
                "input_ids": np.array([e.ids for e in batch], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in batch], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in batch], dtype=np.int64),
            }
            try:
                (logits,) = session.run(None, {k: v for k, v in feed.items() if k in wanted})[:1]
            except Exception as e:  # noqa: BLE001
                raise CheckerError(f"the NLI model failed: {type(e).__name__}: {' '.join(str(e).split())[:300]}") from None
            logits = logits - logits.max(axis=1, keepdims=True)
            probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
            out.extend((float(p[entail]), float(p[contra])) for p in probs)
        return out

    def _chunks(self, sources: Sequence[Source]) -> list[str]:
        chunks: list[str] = []
        for src in sources:
            current = ""
            for sentence in _SENTENCE.split(src.text):
                if current and len(current) + len(sentence) > self.chunk_chars:
                    chunks.append(current)
                    current = ""
                current = f"{current} {sentence}".strip()
            if current:
                chunks.append(current)
        return chunks

    def check(self, summary: str, sources: Sequence[Source]) -> list[dict]:
        sentences = [s.strip() for s in _SENTENCE.split(summary) if len(s.strip()) > 3]
        chunks = self._chunks(sources)
        if not sentences or not chunks:
            return []
        premises = [c for _ in sentences for c in chunks]
        hypotheses = [s for s in sentences for _ in chunks]
        scores = self.scores(premises, hypotheses)
        out: list[dict] = []
        offset = 0
        for i, sentence in enumerate(sentences):
            mine = scores[i * len(chunks) : (i + 1) * len(chunks)]
            best_entail = max(e for e, _ in mine)
            best_contra = max(c for _, c in mine)
            at = summary.find(sentence, offset)
            offset = max(offset, at)
            if best_entail >= self.threshold:
                continue
            contradicted = best_contra >= self.threshold and best_contra > best_entail
            out.append(
                {
                    "kind": "contradicted-claim" if contradicted else "unsupported-claim",
                    "category": "sentence",
                    "value": sentence,
                    "severity": "error",
                    "message": (
                        f"{sentence!r} is " + ("contradicted by a source" if contradicted else "entailed by no source")
                        + f" (entailment {best_entail:.2f}, contradiction {best_contra:.2f})"
                    ),
                    "offset": max(at, 0),
                    "checker": self.name,
                }
            )
        return out
