"""SIGKILL of a ``ctxledger proxy`` process mid-stream loses nothing it acknowledged to the client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from engine import Ledger
from engine.proxy.testing import FakeUpstream, Reply, free_port, serve


def _wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the proxy exited: {proc.stderr.read().decode()}")
        try:
            if httpx.get(f"{url}/ctxledger/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError("the proxy did not come up")


@pytest.mark.parametrize("options", ["", "?synchronous=normal"])
def test_sigkill_mid_stream_loses_nothing_acknowledged(tmp_path, options):
    """With the default durable commits, and with ``synchronous=normal`` (a commit is written to the
    OS before COMMIT returns, without an fsync): a killed process loses nothing either way."""
    db = f"sqlite:///{tmp_path / 'crash.db'}{options}"
    fake = FakeUpstream(lambda api, body: Reply(text=" ".join(f"word{i}" for i in range(40))))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serve(fake.app) as origin:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from engine.cli import main; main()", "--db", db, "proxy",
             "--upstream", origin, "--listen", f"127.0.0.1:{port}", "--session", "crash"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        try:
            _wait_healthy(url, proc)
            history = [{"role": "system", "content": "You count."}]
            acknowledged = []
            for i in range(6):  # completed calls, plain and streamed, each acknowledged to the client
                history.append({"role": "user", "content": f"count {i}"})
                stream = i % 2 == 1
                r = httpx.post(f"{url}/v1/chat/completions", timeout=30,
                               json={"model": "m", "stream": stream, "messages": history})
                assert r.status_code == 200
                if stream:
                    assert r.text.rstrip().endswith("data: [DONE]")
                    text = "".join(
                        json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                        for line in r.text.splitlines() if line.startswith("data: {")
                    )
                else:
                    text = r.json()["choices"][0]["message"]["content"]
                acknowledged.append(text)
                history.append({"role": "assistant", "content": text})
            history.append({"role": "user", "content": "count forever"})
            got = b""
            with httpx.stream("POST", f"{url}/v1/chat/completions", timeout=30, headers={"X-Fake-Chunk-Delay": "0.1"},
                              json={"model": "m", "stream": True, "messages": history}) as r:
                for chunk in r.iter_raw():
                    got += chunk
                    if b"word3" in got:
                        os.kill(proc.pid, signal.SIGKILL)  # mid-stream
                        break
            proc.wait(timeout=10)
            assert proc.returncode == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stderr.close()
    with Ledger.open(db) as ledger:
        s = ledger.session("crash")
        assert s.verify()
        texts = [x.text for x in s.spans()]
    # every reply the client saw complete is there, in order, and so is the request the client was
    # reading a reply to when the proxy died (it was recorded before the first byte went out)
    expected = [m["content"] for m in history]
    assert texts == expected
    assert acknowledged == [m["content"] for m in history if m["role"] == "assistant"]
