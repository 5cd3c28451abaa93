"""Random sequences of context tool calls (good, bad and forbidden) against a simple model of the rules.

The model is a set of live span ids and each derived span's sources, updated only from what each
result says it did. After every step: the session's live buffer equals the model; a refused or bad
call changed nothing but, where the rules say so, one recorded refusal; no span exceeds generation 1
in this strict session; the system prompt is live; every render is valid for both providers.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from engine import EstimateCounter, Ledger, RewriteRefused
from engine.tools import ContextTools
from tests.provider_rules import check_anthropic, check_openai

WORDS = ["deploy", "billing", "quota", "pod", "restart", "cache", "latency", "error", "shard", "replica"]
REFUSALS = ("RewritePolicyError", "GroundingError")


class ContextToolsMachine(RuleBasedStateMachine):
    @initialize()
    def start(self):
        self.ledger = Ledger.open("memory://", token_counter=EstimateCounter())
        self.s = self.ledger.create_session("machine")
        self.s.observe("You are the agent under test.", role="system")
        self.tools = ContextTools(self.s, budget=5_000, by="model:machine")
        self.live: set[str] = {"o1"}
        self.sources: dict[str, tuple[str, ...]] = {}
        self.calls = 0
        for i in range(4):
            self._observe(i)

    # -- the harness adds observations -------------------------------------------------------------

    def _observe(self, i: int) -> None:
        if i % 3 == 2:
            cid = f"call{self.s.position}"
            a = self.s.observe(f"running {WORDS[i % len(WORDS)]}", role="assistant", kind="tool_call",
                               meta={"tool_call_id": cid, "name": "sh", "arguments": {"i": i}})
            b = self.s.observe(f"{WORDS[i % len(WORDS)]} output {i} fine", role="tool", kind="tool_result",
                               meta={"tool_call_id": cid})
            self.live |= {a.id, b.id}
        else:
            span = self.s.observe(f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]} note {i}",
                                  role="user" if i % 2 else "assistant")
            self.live.add(span.id)

    @rule(i=st.integers(0, 50))
    def observe(self, i):
        self._observe(i)

    # -- the model calls its tools -----------------------------------------------------------------

    def _ids(self, draw_from: st.DataObject, many: bool, prefer: str = "live"):
        """Mostly ids the call can succeed on (live ones; for restore, gone ones and live summaries),
        sometimes any id the session has had, an id it has not had yet, or junk."""
        known = [f"o{k}" for k in range(1, self.s.state.n_obs + 1)] + [f"d{k}" for k in range(1, self.s.state.n_der + 1)]
        live = sorted(self.s.state.live)
        if prefer == "derived":
            likely = [i for i in live if i.startswith("d")]
        elif prefer == "gone":
            likely = [i for i in known if i not in self.s.state.live] + [i for i in live if i.startswith("d")]
        else:
            likely = [i for i in live if i != "o1"]
        pools = [likely or live, likely or live, likely or live, known,
                 [f"o{self.s.state.n_obs + 1}", f"d{self.s.state.n_der + 1}", "banana", "o0", "o1"]]
        pick = st.integers(0, len(pools) - 1).flatmap(lambda k: st.sampled_from(pools[k]))
        if many:
            return draw_from.draw(st.lists(pick, min_size=1, max_size=4))
        return draw_from.draw(pick)

    def _call(self, name, arguments):
        before_pos, before_live = self.s.position, set(self.s.state.live)
        before_refusals = self.s.state.refusals
        encoded = json.dumps(arguments) if self.calls % 2 else arguments  # both shapes providers send
        self.calls += 1
        r = self.tools.call(name, encoded)
        if r.is_error:
            if r.data.get("error") in REFUSALS:
                assert self.s.position == before_pos + 1
                assert isinstance(self.s.event(self.s.position), RewriteRefused)
                assert self.s.state.refusals == before_refusals + 1
            else:
                assert self.s.position == before_pos, (name, arguments, r.text)
            assert set(self.s.state.live) == before_live
        return r

    @rule(data=st.data(), reason=st.sampled_from(["stale", "room", "done"]))
    def prune(self, data, reason):
        r = self._call("context_prune", {"span_ids": self._ids(data, True), "reason": reason})
        if not r.is_error:
            assert "o1" not in r.data["pruned"]
            self.live -= set(r.data["pruned"])

    @rule(data=st.data(), invent=st.booleans())
    def summarize(self, data, invent):
        ids = self._ids(data, True)
        first = self.s.state.live.get(ids[0])
        summary = " ".join(first.text.split()[:2]) if first is not None else "a summary"
        if invent:
            summary += " at 23:59"
        r = self._call("context_summarize", {"span_ids": ids, "summary": summary, "reason": "fold"})
        if not r.is_error:
            assert not invent
            self.live -= set(r.data["sources"])
            self.live.add(r.data["derived"])
            self.sources[r.data["derived"]] = tuple(r.data["sources"])

    @rule(data=st.data())
    def rederive(self, data):
        span_id = self._ids(data, False, prefer="derived")
        span = self.s.state.live.get(span_id)
        summary = "fresh summary"
        if span is not None and span.derived:
            summary = " ".join(self.s.original(span.sources[0]).text.split()[:2])
        r = self._call("context_rederive", {"span_id": span_id, "summary": summary, "reason": "redo"})
        if not r.is_error:
            assert r.data["rederived"] == span_id and span_id in self.live

    @rule(data=st.data())
    def restore(self, data):
        r = self._call("context_restore", {"span_ids": self._ids(data, True, prefer="gone")})
        if not r.is_error:
            self.live |= set(r.data["restored"])
            for d in r.data["expanded"]:
                self.live.discard(d)
                self.live |= set(self.sources[d])

    @rule(data=st.data(), which=st.sampled_from(["list", "search", "recall"]))
    def read(self, data, which):
        pos = self.s.position
        if which == "list":
            r = self._call("context_list", {"limit": data.draw(st.integers(1, 20))})
            assert not r.is_error and r.data["live_spans"] == len(self.live)
        elif which == "search":
            self._call("context_search", {"query": data.draw(st.sampled_from(WORDS + ["nothing-here"])),
                                          "include_live": data.draw(st.booleans())})
        else:
            self._call("context_recall", {"span_id": self._ids(data, False)})
        assert self.s.position == pos

    @rule(name=st.sampled_from(["context_prune", "context_list", "context_nope", "context_summarize"]),
          arguments=st.one_of(st.just("{oops"), st.just("[]"), st.dictionaries(st.sampled_from(["span_ids", "x", "limit"]),
                                                                                 st.one_of(st.integers(), st.text(max_size=3)))))
    def garbage(self, name, arguments):
        pos = self.s.position
        r = self.tools.call(name, arguments)
        if name != "context_list" or arguments not in ({}, ):
            assert r.is_error or name == "context_list"
        assert self.s.position == pos

    @rule()
    def harness_prunes(self):
        candidates = sorted(i for i in self.live if i != "o1")
        if candidates:
            self.s.prune(candidates[0], by="compactor")
            self.live.discard(candidates[0])
            assert "[ledger]" in json.dumps(self.tools.render("openai"))

    # -- invariants --------------------------------------------------------------------------------

    @invariant()
    def buffer_matches_the_model(self):
        assert set(self.s.state.live) == self.live

    @invariant()
    def generation_at_most_one_and_derived_from_observations(self):
        for span in self.s.spans():
            assert span.generation <= 1
            if span.derived:
                assert span.sources and all(src.startswith("o") for src in span.sources)

    @invariant()
    def system_prompt_stays(self):
        assert "o1" in self.s.state.live

    @invariant()
    def renders_are_valid(self):
        check_openai(self.tools.render("openai"))
        check_anthropic(self.tools.render("anthropic"))


ContextToolsMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestContextTools = ContextToolsMachine.TestCase


def test_the_log_rebuilds_to_the_same_buffer_after_a_tool_session(mem_ledger):
    s = mem_ledger.create_session("rebuild")
    s.observe("system", role="system")
    for i in range(6):
        s.observe(f"{WORDS[i]} note {i}", role="user")
    tools = ContextTools(s)
    tools.call("context_prune", {"span_ids": ["o2"], "reason": "x"})
    tools.call("context_summarize", {"span_ids": ["o3", "o4"], "summary": "quota pod", "reason": "x"})
    tools.call("context_summarize", {"span_ids": ["d1"], "summary": "again", "reason": "x"})
    tools.call("context_restore", {"span_ids": ["o2", "d1"]})
    assert s.rebuild().live == s.state.live
    assert s.audit().of_kind("rewrite-refused")
