"""Writing the hooks into an agent's settings, and taking them out again, without touching the
user's own hooks.

- Claude Code: ``"hooks"`` of ``settings.json`` — ``.claude/settings.json`` of the project, or the
  user's (``$CLAUDE_CONFIG_DIR`` or ``~/.claude``). Shape (Claude Code hooks reference):
  ``{"hooks": {"PreCompact": [{"matcher": "", "hooks": [{"type": "command", "command": ..., "timeout": 60}]}]}}``.
- Codex: ``hooks.json`` next to its config layer — ``.codex/hooks.json`` of the project, or the
  user's (``$CODEX_HOME`` or ``~/.codex``); the same shape (Codex hooks docs).

Our entries are recognised by their command (``-m engine.hooks`` or ``ctxledger hooks run``); every
other key, event, group and handler stays as it was. Installing twice gives the same file; installing
with a new ``--db`` replaces our entries. The file is rewritten atomically, and a file that is not a
JSON object is refused, never overwritten.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import msgspec

from engine.errors import InvalidInputError
from engine.hooks import AGENTS

__all__ = ["settings_path", "hook_command", "install", "uninstall", "status", "HookStatus", "EVENTS", "plugin_dir"]

# event -> matcher ("" matches every trigger). SessionStart only for the compact source.
EVENTS = {"PreCompact": "", "PostCompact": "", "SessionStart": "compact"}
TIMEOUT = 60  # seconds; the hooks take about a second, the agent waits at most this long
_MARKERS = ("-m engine.hooks", "ctxledger hooks run")


class HookStatus(msgspec.Struct, frozen=True, kw_only=True):
    agent: str
    scope: str
    path: str
    events: tuple[str, ...]  # the events our command is installed for
    commands: tuple[str, ...] = ()

    @property
    def installed(self) -> bool:
        return set(self.events) == set(EVENTS)


def plugin_dir() -> Path:
    """The Claude Code plugin shipped with the package (manifest, hooks/hooks.json, .mcp.json)."""
    return Path(__file__).with_name("plugin")


def settings_path(agent: str, scope: str, cwd: str | os.PathLike | None = None) -> Path:
    if agent not in AGENTS:
        raise InvalidInputError(f"unknown agent {agent!r}; hooks exist for {', '.join(AGENTS)}")
    if scope not in ("project", "user"):
        raise InvalidInputError(f"scope must be 'project' or 'user', not {scope!r}")
    here = Path(cwd or os.getcwd())
    if agent == "claude-code":
        if scope == "project":
            return here / ".claude" / "settings.json"
        return Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / "settings.json"
    if scope == "project":
        return here / ".codex" / "hooks.json"
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "hooks.json"


def hook_command(agent: str, db: str, budget: int | None = None, python: str | None = None) -> str:
    """The shell command an agent runs: this interpreter, so the hook finds this installation."""
    argv = [python or sys.executable, "-m", "engine.hooks", agent, "--db", db]
    if budget is not None:
        argv += ["--budget", str(budget)]
    return shlex.join(argv)


def _ours(handler: Any) -> bool:
    return isinstance(handler, dict) and isinstance(handler.get("command"), str) and any(
        m in handler["command"] for m in _MARKERS)


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise InvalidInputError(f"cannot read {path}: {e.strerror or e}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as e:
        raise InvalidInputError(f"{path} is not valid JSON ({e}); fix it first, nothing was changed") from None
    if not isinstance(data, dict):
        raise InvalidInputError(f"{path} holds a JSON {type(data).__name__}, not an object; nothing was changed")
    hooks = data.get("hooks", {})
    if not isinstance(hooks, dict) or not all(isinstance(v, list) for v in hooks.values()):
        raise InvalidInputError(f"{path}: 'hooks' is not an object of event lists; nothing was changed")
    return data


def _without_ours(data: dict[str, Any]) -> dict[str, Any]:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return data
    kept: dict[str, Any] = {}
    for event, groups in hooks.items():
        new_groups = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                handlers = [h for h in group["hooks"] if not _ours(h)]
                if not handlers and group["hooks"]:
                    continue  # a group that held only our handler
                group = {**group, "hooks": handlers}
            new_groups.append(group)
        if new_groups or not groups:
            kept[event] = new_groups
    out = dict(data)
    if kept or not hooks:
        out["hooks"] = kept
    else:
        out.pop("hooks")  # it held only our hooks
    return out


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")
        with contextlib.suppress(OSError):
            os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def install(agent: str, *, scope: str = "project", db: str, budget: int | None = None,
            cwd: str | os.PathLike | None = None, python: str | None = None) -> Path:
    """Write our hooks for ``agent`` into its settings (merged, idempotent); the file written."""
    path = settings_path(agent, scope, cwd)
    data = _without_ours(_load(path))
    hooks = data.setdefault("hooks", {})
    command = hook_command(agent, db, budget, python)
    for event, matcher in EVENTS.items():
        group: dict[str, Any] = {"matcher": matcher} if matcher else {}
        group["hooks"] = [{"type": "command", "command": command, "timeout": TIMEOUT}]
        hooks.setdefault(event, []).append(group)
    _write(path, data)
    return path


def uninstall(agent: str, *, scope: str = "project", cwd: str | os.PathLike | None = None) -> bool:
    """Take our hooks out of ``agent``'s settings; whether there were any."""
    path = settings_path(agent, scope, cwd)
    data = _load(path)
    cleaned = _without_ours(data)
    if cleaned == data:
        return False
    _write(path, cleaned)
    return True


def status(agent: str, *, scope: str = "project", cwd: str | os.PathLike | None = None) -> HookStatus:
    path = settings_path(agent, scope, cwd)
    data = _load(path)
    events, commands = [], []
    for event, groups in (data.get("hooks") or {}).items():
        for group in groups:
            for h in (group.get("hooks") or []) if isinstance(group, dict) else []:
                if _ours(h):
                    events.append(event)
                    if h["command"] not in commands:
                        commands.append(h["command"])
    return HookStatus(agent=agent, scope=scope, path=str(path), events=tuple(dict.fromkeys(events)),
                      commands=tuple(commands))
