"""The one call of a rewriter, shared by ``Session.rederive`` and the compactor: a ``Rewriter``
(``.rewrite(spans, instruction=, max_tokens=)``) or a plain callable of the source spans, its
failure turned into ``RewriterError`` and its output validated as span text, so either caller
writes nothing when the rewriter fails."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine import validate
from engine.errors import InvalidInputError, RewriterError
from engine.spans import Span

__all__ = ["call_rewriter"]


def call_rewriter(
    rewriter: Any,
    sources: Sequence[Span],
    instruction: str | None,
    *,
    max_tokens: int | None = None,
    failing: str,
    output_note: str = "",
    span_id: str | None = None,
) -> str:
    """The rewriter's text for ``sources``. ``failing`` says what failed ("while re-deriving d3");
    ``output_note`` follows a bad output's message ("(for o1-o4)"); ``span_id`` goes on the error."""
    try:
        if hasattr(rewriter, "rewrite"):
            kwargs: dict[str, Any] = {"instruction": instruction}
            if max_tokens is not None:
                kwargs["max_tokens"] = max_tokens
            text = rewriter.rewrite(sources, **kwargs)
        else:
            text = rewriter(sources)
    except RewriterError:
        raise
    except Exception as e:
        raise RewriterError(
            f"the rewriter failed {failing}: {type(e).__name__}: {e}; nothing was written", span_id=span_id
        ) from e
    try:
        return validate.text(text, "the rewriter's output")
    except InvalidInputError as e:
        note = f" {output_note}" if output_note else ""
        raise RewriterError(f"{e.message}{note}; nothing was written", span_id=span_id) from None
