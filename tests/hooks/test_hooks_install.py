"""``ctxledger hooks install|uninstall|status``: merged into the agent's settings without touching the
user's own hooks, idempotent, undone exactly; a settings file that is not a JSON object is refused."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import main
from engine.errors import InvalidInputError
from engine.hooks.install import EVENTS, install, plugin_dir, settings_path, status, uninstall

USERS_OWN = {
    "permissions": {"allow": ["Bash(npm test:*)"]},
    "hooks": {
        "PreCompact": [{"matcher": "auto", "hooks": [{"type": "command", "command": "cp $T ~/backup.jsonl"}]}],
        "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "npx prettier --write"}]}],
    },
}


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "home" / ".claude"))
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "home" / ".codex"))
    monkeypatch.delenv("CTXLEDGER_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    project = tmp_path / "shop"
    project.mkdir()
    monkeypatch.chdir(project)
    return tmp_path


@pytest.mark.parametrize("agent, scope, where", [
    ("claude-code", "project", "shop/.claude/settings.json"),
    ("claude-code", "user", "home/.claude/settings.json"),
    ("codex", "project", "shop/.codex/hooks.json"),
    ("codex", "user", "home/.codex/hooks.json"),
])
def test_install_merges_is_idempotent_and_uninstall_restores(home, agent, scope, where):
    path = home / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(USERS_OWN, indent=2))
    r = CliRunner().invoke(main, ["hooks", "install", agent, "--scope", scope, "--db", "sqlite:///x.db"])
    assert r.exit_code == 0, r.output
    assert settings_path(agent, scope) == path
    once = path.read_text()
    data = json.loads(once)
    assert data["permissions"] == USERS_OWN["permissions"]
    assert data["hooks"]["PostToolUse"] == USERS_OWN["hooks"]["PostToolUse"]
    assert data["hooks"]["PreCompact"][0] == USERS_OWN["hooks"]["PreCompact"][0]  # the user's stays first
    ours = data["hooks"]["PreCompact"][1]["hooks"][0]["command"]
    argv = shlex.split(ours)
    assert argv[:4] == [sys.executable, "-m", "engine.hooks", agent] and argv[-2:] == ["--db", "sqlite:///x.db"]
    assert CliRunner().invoke(main, ["hooks", "install", agent, "--scope", scope, "--db", "sqlite:///x.db"]).exit_code == 0
    assert path.read_text() == once
    st_ = CliRunner().invoke(main, ["hooks", "status", agent, "--scope", scope, "--json"])
    assert st_.exit_code == 0 and json.loads(st_.output)[0]["installed"] is True
    r = CliRunner().invoke(main, ["hooks", "uninstall", agent, "--scope", scope])
    assert r.exit_code == 0 and "removed" in r.output
    assert json.loads(path.read_text()) == USERS_OWN
    assert CliRunner().invoke(main, ["hooks", "status", agent, "--scope", scope]).exit_code == 1
    r = CliRunner().invoke(main, ["hooks", "uninstall", agent, "--scope", scope])
    assert r.exit_code == 0 and "no ctxledger hooks" in r.output


def test_a_new_db_replaces_our_entries_only(home):
    install("claude-code", db="sqlite:///a.db")
    install("claude-code", db="sqlite:///b.db", budget=800)
    st_ = status("claude-code")
    assert st_.installed and len(st_.commands) == 1
    assert st_.commands[0].endswith("--db sqlite:///b.db --budget 800")
    groups = json.loads(Path(st_.path).read_text())["hooks"]
    assert {e: len(g) for e, g in groups.items()} == {e: 1 for e in EVENTS}


def test_the_default_store_is_in_the_users_data_directory(home):
    r = CliRunner().invoke(main, ["hooks", "install", "claude-code", "--json"])
    assert r.exit_code == 0
    assert json.loads(r.output)["db"] == f"sqlite:///{home / 'data' / 'ctxledger' / 'hooks.db'}"
    r = CliRunner().invoke(main, ["--db", "sqlite:///given.db", "hooks", "install", "claude-code", "--json"])
    assert json.loads(r.output)["db"] == "sqlite:///given.db"


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"hooks": []}', '{"hooks": {"PreCompact": {}}}'])
def test_a_settings_file_that_is_not_an_object_is_refused_and_kept(home, content):
    path = home / "shop" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    for verb in ("install", "uninstall", "status"):
        r = CliRunner().invoke(main, ["hooks", verb, "claude-code"])
        assert r.exit_code == 2, r.output
        assert "nothing was changed" in r.output or "not" in r.output
        assert path.read_text() == content


def test_bad_agent_and_scope(home):
    assert CliRunner().invoke(main, ["hooks", "install", "cursor"]).exit_code == 2
    assert CliRunner().invoke(main, ["hooks", "install", "codex", "--scope", "global"]).exit_code == 2
    with pytest.raises(InvalidInputError):
        settings_path("cursor", "project")


_handler = st.fixed_dictionaries({"type": st.just("command"), "command": st.text(min_size=1, max_size=20)},
                                 optional={"timeout": st.integers(1, 600)})
_group = st.fixed_dictionaries({"hooks": st.lists(_handler, max_size=3)},
                               optional={"matcher": st.sampled_from(["", "auto", "manual", "compact", "Bash"])})
_settings = st.fixed_dictionaries(
    {}, optional={
        "hooks": st.dictionaries(st.sampled_from(["PreCompact", "PostCompact", "SessionStart", "Stop", "PostToolUse"]),
                                 st.lists(_group, max_size=3), max_size=5),
        "model": st.sampled_from(["opus", "sonnet"]),
        "env": st.dictionaries(st.sampled_from(["A", "B"]), st.text(max_size=5)),
    })


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(original=_settings, agent=st.sampled_from(["claude-code", "codex"]))
def test_install_then_uninstall_is_the_identity_on_any_settings(home, original, agent):
    path = settings_path(agent, "project")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(original))
    install(agent, db="sqlite:///x.db")
    installed = json.loads(path.read_text())
    assert status(agent).installed
    for event, groups in original.get("hooks", {}).items():
        assert installed["hooks"][event][: len(groups)] == groups  # every group of the user's, as it was
    assert uninstall(agent) is True
    assert _same(json.loads(path.read_text()), original)


def _same(a: dict, b: dict) -> bool:
    """Equal settings, where an empty ``hooks`` object or an empty event list is the same as none
    (the agents read them alike; an uninstall cannot tell which of the two the user had written)."""
    def norm(d: dict) -> dict:
        hooks = {e: g for e, g in (d.get("hooks") or {}).items() if g}
        return {**{k: v for k, v in d.items() if k != "hooks"}, **({"hooks": hooks} if hooks else {})}
    return norm(a) == norm(b)


def test_the_plugin_directory():
    root = plugin_dir()
    manifest = json.loads((root / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "ctxledger"
    hooks = json.loads((root / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == set(EVENTS)
    assert hooks["SessionStart"][0]["matcher"] == "compact"
    for groups in hooks.values():
        assert groups[0]["hooks"][0]["command"] == "ctxledger hooks run claude-code"
    server = json.loads((root / ".mcp.json").read_text())["mcpServers"]["ctxledger"]
    assert [server["command"], *server["args"]] == ["ctxledger", "mcp", "--follow", "claude-code"]
    r = CliRunner().invoke(main, ["hooks", "plugin"])
    assert r.exit_code == 0 and Path(r.output.strip()) == root


def test_the_plugin_command_runs_like_the_installed_one(home, tmp_path):
    import os
    import subprocess

    cli = Path(sys.executable).with_name("ctxledger")
    env = {**os.environ, "CTXLEDGER_HOOKS_STATE": str(tmp_path / "state")}
    ignored = subprocess.run([str(cli), "hooks", "run", "claude-code"], input=b'{"hook_event_name": "SessionStart", "source": "startup"}',
                             capture_output=True, env=env, timeout=60)
    assert (ignored.returncode, ignored.stdout, ignored.stderr) == (0, b"", b"")
    bad = subprocess.run([str(cli), "hooks", "run", "claude-code"], input=b"{oops", capture_output=True, env=env, timeout=60)
    assert bad.returncode == 0 and bad.stdout == b""
    assert bad.stderr.decode().startswith("ctxledger hook: ") and bad.stderr.count(b"\n") == 1
