"""The agent-CLI hook integration: Claude Code and Codex hooks that record, check and repair every
compaction as it happens.

    python -m engine.hooks claude-code --db sqlite:///$HOME/.local/share/ctxledger/hooks.db < payload.json

One command serves every compaction hook of an agent (the payload's ``hook_event_name`` says which):

- ``PreCompact``: the transcript is imported up to now (the resumable importer: nothing doubled), so
  the originals are in the ledger before they leave the window;
- ``PostCompact``: the boundary and the summary are imported and audited; a one-line status for the
  user (``systemMessage``);
- ``SessionStart`` with source ``compact``: the same, and the notice for the resumed model
  (``hookSpecificOutput.additionalContext``): the user's own words verbatim, the summary's unsupported
  statements with why, how to read the originals back.

A hook never breaks the agent: whatever fails, it exits 0 with one line on stderr, and what it wrote
is whole (the importer commits a chunk and its checkpoint together). ``ctxledger hooks install``
writes these commands into the agent's settings (``engine.hooks.install``).

The package imports lazily: ``python -m engine.hooks`` loads only what the event needs.
"""

__all__ = ["AGENTS"]

AGENTS = ("claude-code", "codex")  # the agents whose hooks ctxledger serves (= their importer names)
