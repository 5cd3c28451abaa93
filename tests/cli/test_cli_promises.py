"""The CLI keeps the README's promises, command by command: exit codes (0 fine, 1 a check found a
problem, 2 bad input), ``--json`` where it was missing, every field in ``log --json``, the finding's
message in ``fleet --detail``, plurals, and progress on a terminal only (quiet when piped)."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys

import pytest
from click.testing import CliRunner

from engine import EstimateCounter, Ledger
from engine.cli import main

CLI = (sys.executable, "-c", "from engine.cli import main; main()")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("promises")
    url = f"sqlite:///{d / 'p.db'}"
    ledger = Ledger.open(url, token_counter=EstimateCounter())
    s = ledger.create_session("drifty", strict=False)
    a = s.observe("billing-api returned 503 at 10:02", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
    b = s.observe("auth-service returned 500 at 10:07", role="tool", kind="tool_result", meta={"tool_call_id": "c2"})
    d1 = s.rewrite([a.id], "billing-api returned 503 at 10:02", by="model-x")
    s.rewrite([d1.id, b.id], "the migration completed at 14:02", by="model-x")  # a summary of a summary, invented
    clean = ledger.create_session("clean")
    clean.observe("deploy of cart-service v1.1.1 finished", role="user")
    ledger.close()
    return url, d


def run(url: str, *args: str):
    return CliRunner().invoke(main, ["--db", url, *args])


# -- exit codes --------------------------------------------------------------------------------


def test_fleet_exits_1_when_it_lists_a_drifted_session_and_0_when_none(store):
    url, _ = store
    r = run(url, "fleet", "--drifted")
    assert r.exit_code == 1, r.output
    assert "drifty" in r.output and "clean" not in r.output
    assert run(url, "fleet", "--drifted", "--json").exit_code == 1
    r = run(url, "fleet", "--since", "2999-01-01")  # nothing listed
    assert r.exit_code == 0, r.output
    assert run(url, "fleet", "--since", "never").exit_code == 2


def test_fleet_separates_errors_and_warnings_and_detail_gives_the_message(store):
    url, _ = store
    r = run(url, "fleet", "--flagged", "--detail")
    assert r.exit_code == 1
    header, row = r.output.splitlines()[:2]
    assert "DRIFT E/W" in header
    errors, warnings = row.split()[3].split("/")
    ledger = Ledger.open(url)
    report = ledger.session("drifty").audit()
    assert (int(errors), int(warnings)) == (report.errors, report.warnings)
    assert "14:02" in r.output  # the finding's own message, not only "error from the audit"
    body = json.loads(run(url, "fleet", "--flagged", "--detail", "--json").output)
    assert any("14:02" in m for m in body[0]["messages"])
    ledger.close()


def test_blame_exits_1_on_not_grounded_text_0_on_grounded_1_on_absent(store):
    url, _ = store
    r = run(url, "blame", "drifty", "14:02")
    assert r.exit_code == 1 and "NOT GROUNDED" in r.output
    r = run(url, "blame", "clean", "cart-service")
    assert r.exit_code == 0 and "grounded" in r.output
    assert run(url, "blame", "clean", "nowhere-to-be-found").exit_code == 1
    assert run(url, "blame", "nope", "x").exit_code == 2


# -- --json where it was missing -----------------------------------------------------------------


def test_mark_json(store):
    url, _ = store
    before = Ledger.open(url).session("clean").position
    body = json.loads(run(url, "mark", "clean", "m1", "--json").output)
    assert body == {"session": "clean", "label": "m1", "position": before + 1}
    assert run(url, "mark", "clean", "", "--json").exit_code == 2


def test_keygen_and_checkpoint_json(store):
    pytest.importorskip("cryptography")
    url, d = store
    body = json.loads(run(url, "keygen", str(d / "k.pem"), "--json").output)
    assert body["private_key"].endswith("k.pem") and body["public_key"].endswith(".pub") and body["key_id"]
    r = run(url, "checkpoint", "clean", "--key", str(d / "k.pem"), "-o", str(d / "cp.jsonl"), "--json")
    out = json.loads(r.output)
    assert r.exit_code == 0 and out["signed"] == 1 and out["checkpoints"][0]["session"] == "clean"
    assert out["checkpoints"][0]["position"] == Ledger.open(url).session("clean").position


def test_report_json(store):
    url, d = store
    body = json.loads(run(url, "report", "clean", "-o", str(d / "r.html"), "--json").output)
    assert body["sessions"] == ["clean"] and body["bytes"] == (d / "r.html").stat().st_size


def _commands(group, prefix=()):
    import click

    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*prefix, name))
        else:
            yield " ".join((*prefix, name)), cmd


def test_every_command_has_json_except_the_ones_the_readme_names():
    from pathlib import Path

    without = {name for name, cmd in _commands(main) if not any("--json" in getattr(p, "opts", ()) for p in cmd.params)}
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    sentence = readme[readme.index("for machines, except"):].split(". ", 1)[0]
    named = {m for m in re.findall(r"`([a-z -]+)`", sentence)}
    assert without == named, f"commands without --json: {sorted(without)}; the README names: {sorted(named)}"


def test_log_json_emits_default_role_and_kind(store):
    url, _ = store
    lines = [json.loads(x) for x in run(url, "log", "clean", "--json").output.splitlines()]
    observed = [x for x in lines if x["type"] == "Observed"]
    assert observed[0]["role"] == "user" and observed[0]["kind"] == "message" and observed[0]["meta"] == {}
    started = lines[0]
    assert started["strict"] is True and "fork_position" in started


# -- plurals -------------------------------------------------------------------------------------


def test_one_is_singular(store):
    url, d = store
    text = run(url, "fleet", "--drifted").output  # click's runner: stdout and stderr together
    assert "1 session;" in text and "1 sessions" not in text
    from engine.cli.ops import plural
    from engine.demo.story import _plural
    from engine.report import _count

    for f in (plural, _plural, _count):
        assert f(1, "error") == "1 error" and f(2, "error") == "2 errors" and f(0, "note") == "0 notes"


# -- progress on a terminal, quiet when piped ---------------------------------------------------------


def _on_a_terminal(args: list[str], env: dict) -> str:
    """Run the CLI with stderr (and stdout) on a pseudo-terminal; everything it wrote."""
    master, slave = pty.openpty()
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    out = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            p.kill()
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    p.wait(60)
    os.close(master)
    return out.decode("utf-8", "replace")


@pytest.mark.parametrize("args, words", [
    (["blame", "drifty", "14:02"], "tracing"),
    (["fleet", "--detail"], "auditing the flagged sessions"),
    (["report", "drifty", "-o", "{d}/t.html"], "auditing and tracing"),
])
def test_long_work_shows_progress_on_a_terminal_and_nothing_when_piped(store, args, words):
    url, d = store
    args = [a.replace("{d}", str(d)) for a in args]
    env = {k: v for k, v in os.environ.items() if k != "CTXLEDGER_NO_PROGRESS"}
    env.update(COLUMNS="120", TERM="xterm")
    shown = _on_a_terminal([*CLI, "--db", url, *args], env)
    assert words in shown, shown[-500:]
    piped = subprocess.run([*CLI, "--db", url, *args], capture_output=True, text=True, env=env, timeout=120)
    assert words not in piped.stderr and words not in piped.stdout
