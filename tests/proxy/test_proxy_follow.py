"""Following a conversation through a whole-history rewrite without a header (issue 23): the client's
compaction is recorded as a rewrite of ITS conversation (audited), and a conversation is never
joined to another on a guess — checked on a mixed replay of real articles and their real summaries."""

from __future__ import annotations

import contextlib
from pathlib import Path

import httpx
import openai
import pytest

from engine import Ledger
from engine.proxy import ProxyConfig, create_app
from engine.proxy.following import Follower, distinctive, fingerprint
from engine.proxy.testing import FakeUpstream, serve
from engine.proxy.testing_traffic import article_conversations, send_interleaved

XSUM = Path("/work/shared/data/xsumfaith/xsumfaith.jsonl")
SYSTEM = {"role": "system", "content": "You deploy services."}


@pytest.fixture(scope="module")
def upstream():
    fake = FakeUpstream()
    with serve(fake.app) as origin:
        yield origin


@contextlib.contextmanager
def running(origin, tmp_path, name="follow.db"):
    db = f"sqlite:///{tmp_path / name}"
    with serve(create_app(ProxyConfig(upstream=origin), lambda: Ledger.open(db))) as url:
        yield url, db


def _chat(client, history, turn):
    history.append({"role": "user", "content": turn})
    r = client.chat.completions.create(model="m", messages=history)
    history.append({"role": "assistant", "content": r.choices[0].message.content})


def test_a_client_compaction_without_a_header_is_a_rewrite_of_its_conversation(upstream, tmp_path):
    with running(upstream, tmp_path) as (url, db):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-agent", max_retries=0)
        history = [SYSTEM]
        for turn in ["Run migration 0042 on billing-api.", "It finished. Restart the workers.", "Workers are up."]:
            _chat(client, history, turn)
        history = [SYSTEM, {"role": "user", "content": "Summary: migration 0042 completed at 14:02; workers restarted."}]
        _chat(client, history, "Now check the health endpoint.")
        _chat(client, history, "And the error rate?")
        health = httpx.get(f"{url}/ctxledger/health").json()["counts"]
        assert health["compactions_done"] == 1 and health["compactions_refused"] == 0
    with Ledger.open(db) as ledger:
        [info] = ledger.sessions()
        s = ledger.session(info.name)
        [summary] = [x for x in s.spans() if x.derived]
        assert summary.text.startswith("Summary: migration 0042") and len(summary.sources) == 6  # 3 turns, 3 replies
        report = s.audit()
        assert not report.ok and "14:02" in [f.value for f in report.findings if f.kind == "unsupported-specific"]
        assert [x.text for x in s.spans()][-2:] == ["And the error rate?", "You said: And the error rate?"]


def test_another_client_or_another_system_prompt_is_never_joined(upstream, tmp_path):
    with running(upstream, tmp_path) as (url, db):
        first = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-first", max_retries=0)
        other = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-other", max_retries=0)
        history = [SYSTEM]
        for turn in ["Run migration 0042 on billing-api.", "Restart the billing-api workers.", "Workers are up."]:
            _chat(first, history, turn)
        summary = {"role": "user", "content": "Summary: migration 0042 ran on billing-api; workers restarted."}
        _chat(first, [{"role": "system", "content": "You write release notes."}, summary], "Next?")  # another prompt
        _chat(first, [SYSTEM, summary], "Next?")  # this is the first client's compaction
        _chat(other, [SYSTEM, summary], "Next?")  # the same words from another client
    with Ledger.open(db) as ledger:
        sessions = {i.name: ledger.session(i.name) for i in ledger.sessions()}
        assert len(sessions) == 3
        joined = [s for s in sessions.values() if any(x.derived for x in s.spans())]
        assert len(joined) == 1 and joined[0].spans()[0].text == "You deploy services."
        assert [x.text for x in joined[0].spans() if x.derived] == [summary["content"]]


def test_an_ambiguous_summary_joins_neither_conversation():
    follow = Follower()
    fp = fingerprint("client", "system", None)
    for name in ("a", "b"):
        follow.register(name, fp)
        follow.recorded(name, ["Deploy billing-api with migration 0042 to production"], messages=6)
    assert follow.rewritten(fp, "Summary: billing-api migration 0042 deployed to production", 3) is None
    follow.recorded("a", ["the canary in region eu-west-1 failed"], messages=8)
    assert follow.rewritten(fp, "Summary: canary eu-west-1 failed during the billing-api rollout", 3) == "a"
    assert follow.rewritten(fingerprint("someone else", "system", None), "Summary: canary eu-west-1 failed", 3) is None
    assert follow.rewritten(fp, "Summary: canary eu-west-1 failed", 9) is None  # a rewrite never grows the history


def test_distinctive_words():
    assert distinctive("Run migration 0042 on billing-api at 14:02, then restart the workers.") == {
        "migration", "0042", "billing-api", "14:02", "restart", "workers"}


@pytest.mark.skipif(not XSUM.exists(), reason="the XSumFaith data set is not here")
def test_a_mixed_replay_of_many_conversations_never_joins_two(upstream, tmp_path):
    """30 conversations in flight at once, one client, one system prompt, each compacted by the
    client into its article's real summary; 15 more that open with a summary of an article none of
    them read. Whatever is recognised, no session may hold two conversations, and every recognised
    compaction's sources are exactly its own conversation's messages."""
    conversations = article_conversations(XSUM, 30, 15)
    with running(upstream, tmp_path) as (url, db):
        client = httpx.Client(base_url=url, headers={"authorization": "Bearer sk-one-client"}, timeout=30)
        replies = send_interleaved(client, conversations)
    openings = {c.requests[0][1]["content"]: c for c in conversations}
    openings.update({c.summary: c for c in conversations if c.summary})  # an unrecognised compaction's new session
    recognised = 0
    with Ledger.open(db) as ledger:
        for info in ledger.sessions():
            s = ledger.session(info.name)
            texts = [e.text for e in s.events() if type(e).__name__ in ("Observed", "Rewritten")]
            owners = {openings[t].label for t in texts if t in openings}
            assert len(owners) == 1, f"{info.name} holds {owners}"
            [c] = [x for x in conversations if x.label in owners]
            for d in (x for x in s.spans() if x.derived):
                recognised += 1
                assert c.compaction is not None and d.text == c.summary
                sources = {s.original(i).text for i in d.sources}
                assert sources == {m["content"] for m in c.requests[c.compaction - 1] if m["role"] == "user"} | {
                    replies[(c.label, r)]["content"] for r in range(c.compaction)}
    assert recognised > 0


REPLY = ("Summary:\n1. Ran migration 0042 on billing-api in eu-west-1; it finished at 14:02 after the lock on "
         "table invoices was released.\n2. Restarted the billing-api workers; all 12 came back healthy.\n"
         "3. Pending: check the error rate on the checkout dashboard.")


def test_a_summary_alone_joins_only_the_conversation_whose_reply_it_reproduces():
    follow = Follower()
    fp = fingerprint("client", "system", None)
    for name in ("a", "b"):
        follow.register(name, fp)
        follow.recorded(name, ["Run migration 0042 on billing-api in eu-west-1, then restart the workers"], messages=9)
    follow.recorded("a", [REPLY], messages=10, replies=[f"<summary>{REPLY}</summary>"])
    # Claude Code's automatic compaction: the reformatted reply and the next instruction, one message
    summary = ("This session is being continued from a previous conversation.\n\n" + REPLY.replace("\n", "\n\n")
               + "\nPlease continue the conversation from where we left off.")
    assert follow.rewritten(fp, summary, 2, alone=True) == "a"
    # the same words without the reply: a lone message is how conversations open, never a join
    assert follow.rewritten(fp, "Summary: migration 0042 on billing-api in eu-west-1 finished; workers restarted", 2,
                            alone=True) is None
    assert follow.rewritten(fingerprint("another client", "system", None), summary, 2, alone=True) is None
    assert follow.rewritten(fp, summary, 11, alone=True) is None  # a rewrite never grows the history


def test_a_reply_two_conversations_got_joins_neither():
    follow = Follower()
    fp = fingerprint("client", "system", None)
    for name in ("a", "b"):
        follow.register(name, fp)
        follow.recorded(name, [REPLY], messages=10, replies=[REPLY])
    assert follow.rewritten(fp, REPLY, 2, alone=True) is None
    assert follow.rewritten(fp, REPLY, 3) is None


def test_a_conversation_already_rewritten_does_not_hand_its_summary_to_the_next_best():
    """The rule's winner must shrink: a conversation that was just rewritten (its view is small now)
    still wins on its words, and then nothing is joined — not the runner-up."""
    follow = Follower()
    fp = fingerprint("client", "system", None)
    follow.register("a", fp)
    follow.recorded("a", ["canary eu-west-1 failed during the billing-api rollout of migration 0042"], messages=3)
    follow.register("b", fp)
    follow.recorded("b", ["billing-api rollout notes"], messages=40)
    assert follow.rewritten(fp, "Summary: canary eu-west-1 failed during the billing-api rollout, migration 0042", 5) is None


def test_the_calls_after_a_recognised_rewrite_stay_in_its_conversation(upstream, tmp_path):
    """Claude Code sends the summary alone, then [summary, reply, next turn, ...]: all of it goes to
    the conversation the summary rewrote, and another client opening the same way does not."""
    with running(upstream, tmp_path) as (url, db):
        client = httpx.Client(base_url=url, headers={"x-api-key": "sk-ant-a", "user-agent": "claude-cli/2"}, timeout=30)
        other = httpx.Client(base_url=url, headers={"x-api-key": "sk-ant-b", "user-agent": "claude-cli/2"}, timeout=30)
        history: list[dict] = []
        for turn in ["Run migration 0042 on billing-api in eu-west-1.", "Restart the workers.", f"Summarize for a handover: {REPLY}"]:
            history.append({"role": "user", "content": turn})
            r = client.post("/v1/messages", json={"model": "m", "max_tokens": 100, "system": "You deploy.", "messages": history})
            history.append({"role": "assistant", "content": r.json()["content"]})
        said = history[-1]["content"][0]["text"]  # the fake model echoes: its reply is what the summary reproduces
        summary = {"role": "user", "content": f"This session continues an earlier one.\n\n{said}\nPlease continue."}
        after = [summary]
        for turn in [None, "Check the health endpoint.", "And the error rate?"]:
            if turn:
                after.append({"role": "user", "content": turn})
            r = client.post("/v1/messages", json={"model": "m", "max_tokens": 100, "system": "You deploy.", "messages": after})
            after.append({"role": "assistant", "content": r.json()["content"]})
        r = other.post("/v1/messages", json={"model": "m", "max_tokens": 100, "system": "You deploy.", "messages": after[:3]})
        assert r.status_code == 200
        health = httpx.get(f"{url}/ctxledger/health").json()["counts"]
    assert health["compactions_done"] == 1
    with Ledger.open(db) as ledger:
        names = [i.name for i in ledger.sessions()]
        assert len(names) == 2
        joined = [ledger.session(n) for n in names if any(x.derived for x in ledger.session(n).spans())]
        [s] = joined
        assert [x.text for x in s.spans() if x.derived] == [summary["content"]]
        assert [x.text for x in s.spans()][-2:] == ["And the error rate?", "You said: And the error rate?"]


def test_only_kept_replies_are_quoted_and_an_evicted_conversation_leaves_nothing_behind(monkeypatch):
    import engine.proxy.following as following

    monkeypatch.setattr(following, "CONVERSATIONS_KEPT", 2)
    follow = Follower()
    fp = fingerprint("client", "system", None)
    follow.register("a", fp)
    old = REPLY.replace("0042", "0041").replace("14:02", "09:15")
    follow.recorded("a", [], messages=20, replies=[old])
    for k in range(following.REPLIES_KEPT):
        follow.recorded("a", [], messages=20, replies=[f"Reply {k}: " + REPLY.replace("invoices", f"ledger_{k}") * 2])
    assert follow.rewritten(fp, old, 2, alone=True) is None  # no longer among its kept replies
    assert follow.rewritten(fp, f"Reply 0: {REPLY.replace('invoices', 'ledger_0') * 2}", 2, alone=True) == "a"
    follow.register("b", fp)
    follow.register("c", fp)  # "a" is evicted: its replies are forgotten with it
    assert not follow.tracks("a") and follow._quoted == {}
