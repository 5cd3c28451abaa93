"""``ctxledger proxy`` on the terminal: one line per proxied call (session, what was recorded,
latency), none with ``--quiet``; the banner always."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest

from engine.proxy.testing import FakeUpstream, free_port, serve

CLI = (sys.executable, "-c", "from engine.cli import main; main()")


def _run_proxy(tmp_path, origin: str, *extra: str) -> str:
    port = free_port()
    proc = subprocess.Popen([*CLI, "--db", f"sqlite:///{tmp_path / 'cli.db'}", "proxy", "--upstream", origin,
                             "--listen", f"127.0.0.1:{port}", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{url}/ctxledger/health", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError("the proxy did not come up") from None
                time.sleep(0.05)
        r = httpx.post(f"{url}/v1/chat/completions",
                       json={"model": "m", "messages": [{"role": "user", "content": "Deploy billing-api"}]})
        assert r.status_code == 200
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    return err.decode()


@pytest.mark.parametrize("quiet", [False, True])
def test_one_line_per_call_unless_quiet(tmp_path, quiet):
    fake = FakeUpstream()
    with serve(fake.app) as origin:
        err = _run_proxy(tmp_path, origin, *(["--quiet"] if quiet else []))
    assert err.startswith("ctxledger proxy: http://127.0.0.1:")
    lines = [line for line in err.splitlines() if " openai 200 proxy:deploy-billing-api:" in line]
    if quiet:
        assert lines == []
    else:
        [line] = lines
        assert line.endswith(" ms)") and ": +2 observed (" in line
