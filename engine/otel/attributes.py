"""The attribute names ctxledger's spans carry, and the conventions they follow.

GenAI names follow the OpenTelemetry GenAI semantic conventions (status: Development) as published in
open-telemetry/semantic-conventions-genai after PR #162 ("semconv for compaction", merged
2026-06-01), the first revision with ``gen_ai.conversation.compacted`` and the ``compaction``
message part; generic names (``error.type``, ``server.*``) are the stable ones of semantic
conventions v1.41.1, which that revision links to. OpenInference names (``openinference.span.kind``,
``session.id``, ``llm.*``, ``input.value``/``output.value``) are added so Arize Phoenix groups and
shows the spans. Everything ctxledger-specific is under ``ctxledger.*``.
"""

from __future__ import annotations

__all__ = ["SEMCONV", "SCOPE", "SCOPE_VERSION"]

SEMCONV = "OpenTelemetry GenAI semantic conventions (Development), semantic-conventions-genai after PR #162"
SCOPE = "ctxledger"  # the instrumentation scope of every span
SCOPE_VERSION = "1"  # bumped when the mapping changes in a way a dashboard would notice

# -- GenAI -------------------------------------------------------------------------------------
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_STREAM = "gen_ai.request.stream"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
CONVERSATION_ID = "gen_ai.conversation.id"
COMPACTED = "gen_ai.conversation.compacted"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
OUTPUT_MESSAGES = "gen_ai.output.messages"  # opt-in content
EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "gen_ai.evaluation.name"
EVALUATION_LABEL = "gen_ai.evaluation.score.label"
EVALUATION_VALUE = "gen_ai.evaluation.score.value"
EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"
ERROR_TYPE = "error.type"

# -- OpenInference (Phoenix) -------------------------------------------------------------------
OI_KIND = "openinference.span.kind"
OI_SESSION = "session.id"
OI_MODEL = "llm.model_name"
OI_PROVIDER = "llm.provider"
OI_SYSTEM = "llm.system"
OI_PROMPT_TOKENS = "llm.token_count.prompt"
OI_COMPLETION_TOKENS = "llm.token_count.completion"
OI_TOTAL_TOKENS = "llm.token_count.total"
OI_OUTPUT = "output.value"  # opt-in content
OI_PROJECT = "openinference.project.name"  # a resource attribute: Phoenix's project

# -- ctxledger ---------------------------------------------------------------------------------
SESSION_UUID = "ctxledger.session.uuid"
POSITION = "ctxledger.position"
TURN_START = "ctxledger.turn.start"
TURN_END = "ctxledger.turn.end"
BUFFER_TOKENS = "ctxledger.buffer.tokens"
BUFFER_DERIVED = "ctxledger.buffer.derived_spans"
OBSERVED = "ctxledger.observed"
COMPACTION_KIND = "ctxledger.compaction.kind"
SPAN_ID = "ctxledger.span.id"
GENERATION = "ctxledger.generation"
SOURCES = "ctxledger.sources"
SOURCE_COUNT = "ctxledger.sources.count"
INPUTS = "ctxledger.inputs"
OFFENDING = "ctxledger.offending"
BY = "ctxledger.by"
REASON = "ctxledger.reason"
TOKENS_BEFORE = "ctxledger.tokens.before"
TOKENS_AFTER = "ctxledger.tokens.after"
BUFFER_TOKENS_BEFORE = "ctxledger.buffer.tokens.before"
BUFFER_TOKENS_AFTER = "ctxledger.buffer.tokens.after"
REFUSED = "ctxledger.refused"
VIOLATION = "ctxledger.violation"
COMMAND = "ctxledger.command"
TRIGGER = "ctxledger.trigger"
TOKENS = "ctxledger.tokens"
RESTORED = "ctxledger.restored"
LABEL = "ctxledger.label"
AUDIT_POSITION = "ctxledger.audit.position"
CHECKER = "ctxledger.audit.checker"
FINDING_VALUE = "ctxledger.finding.value"
FINDING_CATEGORY = "ctxledger.finding.category"
FINDING_SPANS = "ctxledger.finding.spans"
