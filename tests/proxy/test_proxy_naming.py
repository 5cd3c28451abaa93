"""Session names from user text (issue 24, item 11): in an encrypted store a conversation's session
name says nothing of its content, and a restarted proxy still finds the conversation's session."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import openai

from engine import Ledger
from engine.proxy import ProxyConfig, create_app
from engine.proxy.testing import FakeUpstream, serve

SECRET = "my SSN is 078-05-1120"


def _bytes(path: Path) -> bytes:
    return b"".join(Path(str(path) + s).read_bytes() for s in ("", "-wal", "-shm") if Path(str(path) + s).exists())


def _turns(url: str, history: list[dict], turns: list[str]) -> None:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-x", max_retries=0)
    for turn in turns:
        history.append({"role": "user", "content": turn})
        r = client.chat.completions.create(model="m", messages=history)
        history.append(r.choices[0].message.model_dump(exclude_none=True))


def test_an_encrypted_store_gets_names_without_content_and_a_restart_finds_them(tmp_path):
    key = base64.b64encode(os.urandom(32)).decode()
    path = tmp_path / "enc.db"
    open_ledger = lambda: Ledger.open(f"sqlite:///{path}", cipher_key=key)  # noqa: E731
    fake = FakeUpstream()
    first = [{"role": "system", "content": "You file tax returns."}]
    second = [{"role": "system", "content": "You file tax returns."}]
    with serve(fake.app) as origin:
        for run in range(2):  # two proxy processes, one after the other
            with serve(create_app(ProxyConfig(upstream=origin), open_ledger)) as url:
                _turns(url, first, [SECRET] if run == 0 else ["And the deadline?"])
                _turns(url, second, ["Another client, another question"] if run == 0 else ["Thanks."])
    with open_ledger() as ledger:
        infos = ledger.sessions()
        assert len(infos) == 2  # the restarted proxy continued both conversations
        names = [i.name for i in infos]
        assert all(n.startswith("proxy:") and len(n) == len("proxy:") + 10 for n in names)
        texts = {tuple(x.text for x in ledger.session(n).spans()) for n in names}
    assert tuple(m["content"] for m in first) in texts and tuple(m["content"] for m in second) in texts
    raw = _bytes(path).lower()
    for leak in ("078-05-1120", "my-ssn-is", "another-client"):
        assert leak.encode() not in raw


def test_a_plaintext_store_keeps_readable_names(tmp_path):
    fake = FakeUpstream()
    db = f"sqlite:///{tmp_path / 'plain.db'}"
    with serve(fake.app) as origin, serve(create_app(ProxyConfig(upstream=origin), lambda: Ledger.open(db))) as url:
        _turns(url, [], ["Fix the login bug"])
    with Ledger.open(db) as ledger:
        [info] = ledger.sessions()
    assert info.name.startswith("proxy:fix-the-login-bug:")
