"""Drift checkers: the lexical default's claim checks on sessions, the Checker protocol end to end
(audit, blame, gate, CLI), the LLM judge through the real openai SDK against a fake endpoint on
127.0.0.1, and the NLI checker on a tiny ONNX model and tokenizer built here."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from fake_model_server import openai_ok

from engine import CheckerError, EstimateCounter, GroundingError, InvalidInputError, Ledger
from engine.checkers import LLMJudge, NLIChecker, checker_from_spec
from engine.cli import main
from engine.events import RewriteRefused
from projections.grounding.checker import LEXICAL, Checker
from projections.grounding import Source
from projections.grounding import check


def claim_findings(text, sources):
    """The findings of the claim rules alone (instructions, completions, statuses, pairings)."""
    return check(text, sources, rules=("instruction", "completion", "status", "pairing"), with_coverage=False).findings


def _session(url: str = "memory://", **kw):
    led = Ledger.open(url, token_counter=EstimateCounter(), **kw)
    s = led.create_session("agent")
    s.observe("please keep billing-api on API v1 until Friday", role="user")
    s.observe("GET /health -> 503 from billing-api at 13:58 (upstream timeout)", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
    s.observe("POST /login -> 500 from auth-service at 14:01 (pool exhausted)", role="tool", kind="tool_result", meta={"tool_call_id": "c2"})
    s.observe("$ pytest -q\n3 failed, 41 passed in 2.1s", role="tool", kind="tool_result", meta={"tool_call_id": "c3"})
    s.observe("I could also drop the staging tables later.", role="assistant")
    return led, s


def _kinds(report) -> set[str]:
    """The drift the audit names: errors, and warnings (a claim about something that appears nowhere)."""
    return {f.kind for f in report.findings if f.severity in ("error", "warning")}


# -- the lexical default, on sessions ----------------------------------------------------------------


def test_a_faithful_summary_passes_and_each_kind_of_drift_is_named_by_the_audit():
    """The user story: an agent's summary is audited sentence by sentence; each way it can drift is
    reported with its kind, and the faithful one is not."""
    led, s = _session()
    ids = [sp.id for sp in s.spans()]
    d = s.rewrite(ids, "The user asked to keep billing-api on API v1 until Friday. billing-api returned 503 at 13:58 "
                  "and auth-service returned 500 at 14:01. Tests still fail: 3 failed.", by="model")
    assert _kinds(s.audit()) == set()
    cases = {
        "invented-instruction": "The user asked to drop the staging tables.",
        "unsupported-completion": "All tests pass now.",
        "swapped-pairing": "billing-api returned 500 at 13:58.",
        "status-flip": "The billing-api health check succeeded.",
    }
    for kind, text in cases.items():
        s.rederive(d.id, text=text, by="model")
        report = s.audit()
        assert kind in _kinds(report), (kind, report.findings)
        assert all(f.checker == "lexical" for f in report.findings if f.kind == kind)
        assert report.checker == "lexical"


def test_an_instruction_stated_only_by_the_assistant_or_a_tool_is_invented():
    sources = [Source("please rename src/app.py", "user"), Source("assistant: I could also delete src/app.py", "assistant")]
    found = claim_findings("The user asked to delete src/app.py.", sources)
    assert [f["kind"] for f in found] == ["invented-instruction"]
    assert claim_findings("The user asked to rename src/app.py.", sources) == []
    # with no roles known, any source may ground it (imported text without roles)
    assert claim_findings("The user asked to delete src/app.py.", [Source(s.text) for s in sources]) == []


def test_completion_claims_follow_the_last_word_of_the_sources():
    failing = [Source("$ pytest\n2 failed, 10 passed", "tool")]
    fixed = [*failing, Source("$ pytest\n12 passed", "tool")]
    assert [f["kind"] for f in claim_findings("All tests pass.", failing)] == ["unsupported-completion"]
    assert claim_findings("All tests pass.", fixed) == []
    assert claim_findings("Tests do not pass yet.", failing) == []
    rejected = [Source("$ git push\n! [rejected] main -> main (non-fast-forward)\nerror: failed to push some refs", "tool")]
    pushed = [(f["category"], f["severity"]) for f in claim_findings("The change was committed and pushed.", rejected)]
    assert ("push", "error") in pushed  # the push was rejected: contradicted
    # a request is not evidence that it happened
    assert [f["kind"] for f in claim_findings("All tests pass.", [Source("please make the tests pass", "user")])] == [
        "unsupported-completion"
    ]


def test_negation_flips_are_found_and_faithful_negations_are_not():
    rolled = [Source("deployed cart-api v2.1.0 to prod at 10:00"), Source("cart-api v2.1.0: error rate 9%, rolled back at 10:12")]
    assert [f["kind"] for f in claim_findings("cart-api v2.1.0 was not rolled back.", rolled)] == ["status-flip"]
    # also an unsupported completion: no source shows the rollout done
    assert "status-flip" in [f["kind"] for f in claim_findings("The cart-api v2.1.0 rollout succeeded.", rolled)]
    assert claim_findings("cart-api v2.1.0 was rolled back after errors.", rolled) == []
    kept = [Source("deployed cart-api v2.1.0 to prod at 10:00"), Source("cart-api v2.1.0: healthy, no rollback")]
    assert claim_findings("cart-api v2.1.0 was not rolled back.", kept) == []


def test_quotes_near_quotes_and_escaped_quotes():
    sources = [Source('{\\"level\\": \\"error\\", \\"message\\": \\"connection refused by upstream host\\"}', "tool")]
    assert check('The log said "connection refused by upstream host".', sources).findings == []
    near = check('The log said "connection was refused by upstream host".', sources).findings
    assert [(f["kind"], f["severity"]) for f in near] == [("near-quote", "info")]
    invented = check('The log said "disk quota exceeded on the volume".', sources).findings
    assert [(f["kind"], f["severity"]) for f in invented] == [("unsupported-specific", "error")]


def test_a_merge_that_names_every_service_is_still_a_merge():
    sources = ["GET /a -> 503 from billing-api at 13:58 (timeout)", "GET /b -> 500 from auth-service at 14:01 (pool)"]
    found = check("The API failure (HTTP 503 at 13:58) hit billing-api and auth-service.", sources).findings
    assert [f["kind"] for f in found] == ["merged-events"]
    assert check("billing-api returned 503 at 13:58 and auth-service returned 500 at 14:01.", sources).findings == []


_FACTS = [
    "billing-api returned 503 at 13:58",
    "auth-service returned 500 at 14:01",
    "deployed cart-api v2.1.0 to prod at 10:00",
    "INC-4521 assigned to Dana Kim",
    "migration 0047_add_index copied 12,000 rows",
    "$ pytest -q finished: 41 passed",
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, len(_FACTS) - 1), min_size=1, max_size=6, unique=True), st.data())
def test_a_summary_copied_verbatim_from_its_sources_raises_no_claim(picked, data):
    sources = [Source(_FACTS[i], "tool") for i in picked]
    chosen = data.draw(st.lists(st.sampled_from(picked), min_size=1, max_size=len(picked), unique=True))
    summary = ". ".join(_FACTS[i] for i in chosen) + "."
    assert claim_findings(summary, sources) == []
    assert [f for f in check(summary, sources).findings if f["severity"] != "info"] == []


# -- the LLM judge ------------------------------------------------------------------------------


def _judge(server, **kw) -> LLMJudge:
    return LLMJudge("judge-x", base_url=f"http://127.0.0.1:{server.port}/v1", api_key="k", max_retries=0, **kw)


def _verdicts(*claims) -> dict:
    body = {"claims": [{"claim": c, "verdict": v, "sources": s, "evidence": e} for c, v, s, e in claims]}
    return openai_ok("```json\n" + json.dumps(body) + "\n```")


def test_the_judge_audits_through_the_real_sdk_and_counts_its_cost(server):
    judge = _judge(server)
    led, s = _session(checker=judge)
    d = s.rewrite([sp.id for sp in s.spans()][:3], "billing-api failed at 13:58; the migration completed at 14:02.", by="m")
    reply = _verdicts(
        ("billing-api failed at 13:58", "supported", [2], "503 from billing-api at 13:58"),
        ("the migration completed at 14:02", "unsupported", [], ""),
    )
    reply["usage"] = {"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366}
    server.script.append((200, reply, 0))
    report = s.audit()
    assert report.checker == "llm:judge-x"
    bad = [f for f in report.findings if f.kind == "unsupported-claim"]
    assert [(f.value, f.checker, f.span_ids) for f in bad] == [("the migration completed at 14:02", "llm:judge-x", (d.id,))]
    request = server.requests[-1]["body"]
    assert request["model"] == "judge-x" and request["response_format"] == {"type": "json_object"}
    prompt = request["messages"][1]["content"]
    assert "[1] (user) please keep billing-api" in prompt and "[2] (tool) GET /health" in prompt
    assert prompt.rstrip().endswith("the migration completed at 14:02.")
    assert (judge.stats.calls, judge.stats.prompt_tokens, judge.stats.completion_tokens) == (1, 321, 45)
    assert judge.stats.seconds > 0


def test_the_gate_refuses_what_the_judge_calls_contradicted_and_records_it(server):
    judge = _judge(server)
    led, s = _session(checker=judge)
    ids = [sp.id for sp in s.spans()][1:3]
    server.script.append((200, _verdicts(("billing-api returned 500", "contradicted", [1], "503 from billing-api")), 0))
    before = s.position
    with pytest.raises(GroundingError) as err:
        s.rewrite(ids, "billing-api returned 500.", by="model", gate=True)
    assert "llm:judge-x" in err.value.message
    assert s.position == before + 1
    refused = s.event(s.position)
    assert isinstance(refused, RewriteRefused) and refused.findings[0]["checker"] == "llm:judge-x"
    server.script.append((200, _verdicts(("billing-api returned 503", "supported", [1], "503")), 0))
    assert s.rewrite(ids, "billing-api returned 503.", by="model", gate=True).generation == 1


@pytest.mark.parametrize(
    "reply",
    [
        (500, {"error": {"message": "boom"}}, 0),
        (200, openai_ok("I think it is fine."), 0),
        (200, openai_ok('{"claims": [{"claim": "x", "verdict": "maybe"}]}'), 0),
        (200, openai_ok('{"verdicts": []}'), 0),
        (200, b"not json at all", 0),
    ],
    ids=["5xx", "prose", "unknown verdict", "wrong shape", "broken body"],
)
def test_a_judge_that_cannot_judge_is_a_typed_error_and_writes_nothing(server, reply):
    led, s = _session(checker=_judge(server))
    ids = [sp.id for sp in s.spans()][1:3]
    server.script.append(reply)
    before = [type(e).__name__ for e in s.events()]
    with pytest.raises(CheckerError):
        s.rewrite(ids, "billing-api returned 503.", by="model", gate=True)
    assert [type(e).__name__ for e in s.events()] == before
    assert s.span(ids[0]).provenance.value == "observed"


def test_the_judge_is_unreachable_is_a_checker_error():
    judge = LLMJudge("judge-x", base_url="http://127.0.0.1:9/v1", api_key="k", max_retries=0, timeout=2)
    with pytest.raises(CheckerError, match="could not be reached"):
        judge.check("x happened.", [Source("y happened")])
    assert judge.stats.failures == 1


# -- the NLI cross-encoder --------------------------------------------------------------------


@pytest.fixture(scope="module")
def nli_dir(tmp_path_factory):
    """A tiny sequence-pair classifier built here: a bag of words over the pair, one weight per
    word and label. Words of the 'invented' kind push to contradiction, 'maybe' to neutral, every
    other known word to entailment. Real enough to run the tokenizer, ONNX Runtime, batching and
    the label mapping end to end."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    d = tmp_path_factory.mktemp("nli")
    words = ["[PAD]", "[UNK]", "[SEP]", "billing", "api", "returned", "503", "at", "13", "58", "invented", "maybe", "the", "failed"]
    vocab = {w: i for i, w in enumerate(words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="$A", pair="$A [SEP] $B:1", special_tokens=[("[SEP]", vocab["[SEP]"])]
    )
    tok.save(str(d / "tokenizer.json"))
    weights = np.zeros((len(words), 3), dtype=np.float32)  # labels: 0 contradiction, 1 entailment, 2 neutral
    for w, i in vocab.items():
        if w == "invented":
            weights[i] = [9.0, 0.0, 0.0]
        elif w == "maybe":
            weights[i] = [0.0, 0.0, 9.0]
        elif w not in ("[PAD]", "[UNK]", "[SEP]"):
            weights[i] = [0.0, 0.5, 0.0]
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["W", "input_ids"], ["emb"]),
            helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
            helper.make_node("Unsqueeze", ["maskf", "axis2"], ["mask3"]),
            helper.make_node("Mul", ["emb", "mask3"], ["masked"]),
            helper.make_node("ReduceSum", ["masked", "axis1"], ["logits"], keepdims=0),
        ],
        "bag_of_words_nli",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
        ],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(weights, "W"), numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
         numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(d / "model.onnx"))
    (d / "config.json").write_text(json.dumps({"id2label": {"0": "CONTRADICTION", "1": "ENTAILMENT", "2": "NEUTRAL"}}))
    return d


def test_the_nli_checker_flags_sentences_no_source_entails(nli_dir):
    nli = NLIChecker(nli_dir, batch_size=2)
    assert isinstance(nli, Checker) and nli.name == f"nli:{nli_dir.name}"
    sources = [Source("billing api returned 503 at 13 58", "tool"), Source("the api failed", "tool")]
    found = nli.check("billing api returned 503. the invented api failed. maybe the api failed.", sources)
    assert [(f["kind"], f["value"]) for f in found] == [
        ("contradicted-claim", "the invented api failed."),
        ("unsupported-claim", "maybe the api failed."),
    ]
    e, c = nli.scores(["billing api"], ["billing api returned 503"])[0]
    assert e > 0.9 and c < 0.05


def test_the_nli_checker_runs_in_the_audit(nli_dir):
    led = Ledger.open("memory://", token_counter=EstimateCounter(), checker=NLIChecker(nli_dir))
    s = led.create_session("n")
    a = s.observe("billing api returned 503 at 13 58", role="tool", kind="tool_result", meta={"tool_call_id": "c"})
    s.rewrite([a.id], "the invented api failed.", by="m")
    report = s.audit()
    assert report.checker.startswith("nli:")
    assert [f.kind for f in report.findings if f.checker.startswith("nli:")] == ["contradicted-claim"]


def test_bad_nli_model_directories_are_typed_errors(tmp_path, nli_dir):
    with pytest.raises(CheckerError, match="lacks model.onnx, tokenizer.json, config.json"):
        NLIChecker(tmp_path).check("a b.", [Source("a b")])
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        (broken / name).write_bytes((nli_dir / name).read_bytes())
    (broken / "config.json").write_text('{"id2label": {"0": "yes", "1": "no"}}')
    with pytest.raises(CheckerError, match="id2label"):
        NLIChecker(broken).check("a b.", [Source("a b")])
    (broken / "config.json").write_text((nli_dir / "config.json").read_text())
    (broken / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(CheckerError, match="cannot load"):
        NLIChecker(broken).check("a b.", [Source("a b")])
    with pytest.raises(InvalidInputError):
        NLIChecker(nli_dir, threshold=1.5)


# -- configuration: spec, CLI --------------------------------------------------------------------


def test_checker_specs():
    assert checker_from_spec(None) is LEXICAL and checker_from_spec("lexical") is LEXICAL
    judge = checker_from_spec("llm:qwen2.5@http://127.0.0.1:11434/v1")
    assert isinstance(judge, LLMJudge) and judge.model == "qwen2.5" and judge.base_url == "http://127.0.0.1:11434/v1"
    assert isinstance(checker_from_spec("nli:/models/x"), NLIChecker)
    for bad in ("llm:", "nli:", "gpt", "llm:@http://x"):
        with pytest.raises(InvalidInputError):
            checker_from_spec(bad)
    with pytest.raises(InvalidInputError):
        Ledger.open("memory://", checker=object())


def test_the_cli_audits_and_blames_with_the_configured_checker(server, tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    led, s = _session(url)
    s.rewrite([sp.id for sp in s.spans()][1:3], "billing-api returned 503 at 13:58 and the cache was flushed.", by="m")
    led.close()
    runner = CliRunner()
    lexical = runner.invoke(main, ["--db", url, "audit", "agent"])
    assert lexical.exit_code == 0, lexical.output
    server.script.append((200, _verdicts(("the cache was flushed", "unsupported", [], "")), 0))
    judged = runner.invoke(main, ["--db", url, "--checker", f"llm:judge-x@http://127.0.0.1:{server.port}/v1", "audit", "agent"])
    assert judged.exit_code == 1, judged.output
    assert "checked by llm:judge-x" in judged.output and "unsupported-claim" in judged.output
    server.script.append((200, _verdicts(("the cache was flushed", "unsupported", [], "")), 0))
    blamed = runner.invoke(
        main, ["--db", url, "--checker", f"llm:judge-x@http://127.0.0.1:{server.port}/v1", "blame", "agent", "cache was flushed"]
    )
    assert blamed.exit_code == 1 and "llm:judge-x: the claim 'the cache was flushed' is stated by none" in blamed.output
    bad = runner.invoke(main, ["--db", url, "--checker", "oracle", "audit", "agent"])
    assert bad.exit_code == 2 and "unknown checker 'oracle'" in bad.output


def test_numbered_headings_of_a_structured_summary_are_layout_not_claims():
    """Claude Code's summaries are numbered sections with Title Case headings: neither the list
    numbers nor the heading words are specifics the sources must state."""
    summary = (
        "1. Primary Request and Intent:\n   The user asked to keep billing-api on API v1 until Friday.\n"
        "2. Key Technical Concepts:\n   - billing-api returned 503 at 13:58\n"
        "3) Pending Tasks:\n   - none\n## Errors and Fixes\n   - none"
    )
    sources = [Source("please keep billing-api on API v1 until Friday", "user"), Source("GET /h -> 503 from billing-api at 13:58", "tool")]
    assert [f for f in check(summary, sources).findings if f["severity"] != "info"] == []
    assert [f["value"] for f in check(summary.replace("13:58", "14:02"), sources).findings if f["severity"] == "error"] == ["14:02"]


def test_code_retyped_from_sources_and_slash_joined_names_are_not_inventions():
    sources = [Source("defp reply({:ok, trace_id}), do: ... \n defp reply(:error), do: ...", "tool"), Source("deps: phoenix, ash, bandit", "tool")]
    found = check("It returns `{:ok, trace_id} | :error` on Phoenix/Ash/Bandit.", sources).findings
    assert [(f["kind"], f["severity"]) for f in found] == [("near-quote", "info")]
    invented = check("It returns `{:ok, span_token}`.", sources).findings
    assert ("unsupported-specific", "error") in [(f["kind"], f["severity"]) for f in invented]


def test_an_instruction_that_quotes_the_user_is_grounded_by_the_quote():
    sources = [Source("Work on bead spotter-4te", "user"), Source("bd show spotter-4te: epic: tracing across Phoenix and Ash", "tool")]
    assert claim_findings('The user asked to "Work on bead spotter-4te" - an epic for tracing across Phoenix and Ash.', sources) == []
    assert [f["kind"] for f in claim_findings("The user asked for tracing across Phoenix and Ash.", sources)] == ["invented-instruction"]


def test_harness_text_grounds_but_its_specifics_are_not_expected_in_the_summary():
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    s = led.create_session("h")
    s.observe("GET /h -> 503 from billing-api at 13:58", role="tool", kind="tool_result", meta={"tool_call_id": "c"})
    s.observe("read the full transcript at: /home/u/.claude/projects/x/4f2a.jsonl", role="user", meta={"harness": "transcript-pointer"})
    d = s.rewrite(["o1", "o2"], "billing-api returned 503 at 13:58.", by="m")
    cov = next(c for c in s.audit().coverage if c.span_id == d.id)
    assert set(cov.dropped) == {"/h"}  # the tool's ("GET" is a word of the language); the harness pointer's path is not expected
    s.rederive(d.id, text="billing-api returned 503 at 13:58; see /home/u/.claude/projects/x/4f2a.jsonl.", by="m")
    assert _kinds(s.audit()) == set()  # the pointer still grounds what the summary says of it


_STATUS_WORDS = ["succeeded", "failed", "rolled back", "not", "never", "restarted", "timed out", "HTTP 503",
                 "-> 502", "Completed", "DOWN", "healthy", "reverted", "no", "0 failed", "merged", "approved", "is up"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_STATUS_WORDS), st.text(alphabet="abcdefgh -:>.0123456789", max_size=12)), max_size=12))
def test_the_status_prefilter_never_hides_a_status(parts):
    from projections.grounding.statuses import _scan_statuses, _statuses

    text = " ".join(parts)
    assert _statuses(text) == _scan_statuses(text)
