"""The LangChain v1 adapter, against the real packages, offline: ``create_agent`` with a fake chat
model and tools (what the model saw vs what the graph state holds), ``RunnableWithMessageHistory``
over ``LedgerChatMessageHistory``, and message round trips."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("langchain.agents", reason="the langchain extra is not installed")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import convert_to_openai_messages  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder  # noqa: E402
from langchain_core.runnables.history import RunnableWithMessageHistory  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from conftest import drop_schema, postgres_url  # noqa: E402

from engine import Compactor, EstimateCounter, InvalidInputError, Ledger, Observed  # noqa: E402
from engine.integrations.langchain import (  # noqa: E402
    LedgerChatMessageHistory,
    LedgerMiddleware,
    to_messages,
)

PAD = "ledger line " * 150  # ~450 estimated tokens


class RecordingModel(FakeMessagesListChatModel):
    """A scripted chat model that accepts tools and remembers every message list it was given."""

    seen: list = []

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


@tool
def balance(account: str) -> str:
    """The balance of an account, with its statement."""
    return f"{account}: 1,204.50 EUR. " + PAD


@tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


def model() -> RecordingModel:
    return RecordingModel(
        seen=[],
        responses=[
            AIMessage(content="", tool_calls=[{"name": "balance", "args": {"account": "ACC-1"}, "id": "call_1"}]),
            AIMessage(content="ACC-1 holds 1,204.50 EUR."),
            AIMessage(
                content="Checking both.",
                tool_calls=[
                    {"name": "balance", "args": {"account": "ACC-2"}, "id": "call_2"},
                    {"name": "add", "args": {"a": 2, "b": 3}, "id": "call_3"},
                ],
            ),
            AIMessage(content="ACC-2 is fine, and 2+3=5."),
        ],
    )


def ledger() -> Ledger:
    return Ledger.open("memory://", token_counter=EstimateCounter())


def assert_pairs_valid(messages: list[BaseMessage]) -> None:
    """What provider APIs demand: an AI message's tool calls are answered right after it, and every
    tool message answers a call of the AI message before it."""
    i = 0
    while i < len(messages):
        m = messages[i]
        if isinstance(m, ToolMessage):
            raise AssertionError(f"tool message {m.tool_call_id} answers no call just before it")
        i += 1
        if isinstance(m, AIMessage) and m.tool_calls:
            want = [c["id"] for c in m.tool_calls]
            got = []
            while i < len(messages) and isinstance(messages[i], ToolMessage):
                got.append(messages[i].tool_call_id)
                i += 1
            assert sorted(got) == sorted(want), (want, got)


def recorded_keys(session) -> list[str]:
    return [ev.meta["lc_key"] for ev in session.events() if isinstance(ev, Observed) and ev.meta.get("lc_call", 0) == 0]


# -- the story -----------------------------------------------------------------------------------------


def test_story_the_model_sees_the_compacted_ledger_while_the_graph_state_stays_whole():
    """A banking agent built with create_agent gets one extra line (the middleware). Its second
    question arrives after the first balance statement has grown old: the model sees a placeholder
    naming the span to restore, the graph's state and checkpoint still hold the whole statement, and
    the ledger recorded every state message exactly once."""
    led = ledger()
    m = model()
    mw = LedgerMiddleware(led, "bank-7", Compactor(budget=900, keep_last_turns=1))
    agent = create_agent(m, tools=[balance, add], middleware=[mw], system_prompt="Be brief.", checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t-1"}}
    agent.invoke({"messages": [HumanMessage("What is in ACC-1?")]}, config)
    out = agent.invoke({"messages": [HumanMessage("And ACC-2, plus 2+3?")]}, config)

    state = out["messages"]
    assert [type(x).__name__ for x in state] == [
        "HumanMessage", "AIMessage", "ToolMessage", "AIMessage",
        "HumanMessage", "AIMessage", "ToolMessage", "ToolMessage", "AIMessage",
    ]
    assert PAD in state[2].content  # the state keeps the whole first statement
    checkpoint = agent.get_state(config).values["messages"]
    assert [x.id for x in checkpoint] == [x.id for x in state]

    seen = m.seen[-1]  # the last model call
    assert isinstance(seen[0], SystemMessage) and seen[0].content == "Be brief."
    first_result = next(x for x in seen if isinstance(x, ToolMessage) and x.tool_call_id == "call_1")
    assert PAD not in first_result.content and "restore o3" in first_result.content
    assert_pairs_valid(seen[1:])
    assert len(m.seen) == 4

    s = mw.ledger_session
    assert recorded_keys(s) == [x.id for x in state]  # every message once, in order
    assert any(getattr(ev, "by", "") == "compactor:elide-tool-outputs" for ev in s.events())
    assert s.original("o3").text.startswith("ACC-1: 1,204.50 EUR.")
    # the ledger's live buffer is exactly what the model saw (apart from the system prompt)
    assert [x.content for x in to_messages(s)[: len(seen) - 1]] == [x.content for x in seen[1:]]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def file_url(request, tmp_path):
    """A store that outlives the process: a SQLite file, or a schema on the PostgreSQL test server."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'lc.db'}"
        return
    url = postgres_url()
    yield url
    drop_schema(url)


def test_async_agent_and_a_restarted_process_record_nothing_twice(file_url):
    url = file_url
    led = Ledger.open(url, token_counter=EstimateCounter())
    m = model()
    agent = create_agent(m, tools=[balance, add], middleware=[LedgerMiddleware(led, "resumed")])
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("What is in ACC-1?")]}))
    assert len(m.seen) == 2
    led.close()

    led = Ledger.open(url, token_counter=EstimateCounter())  # a new process
    mw = LedgerMiddleware(led, "resumed")
    s = mw.ledger_session
    s.prune("o3")  # pruned messages are known too: replaying the state must not record them again
    agent = create_agent(m, tools=[balance, add], middleware=[mw])
    out = agent.invoke({"messages": out["messages"] + [HumanMessage("And ACC-2, plus 2+3?")]})
    keys = recorded_keys(s)
    assert keys == [x.id for x in out["messages"]]
    assert len(keys) == len(set(keys))
    assert "restore o3" in next(x for x in m.seen[-1] if isinstance(x, ToolMessage) and x.tool_call_id == "call_1").content
    led.close()


def test_the_model_edits_its_context_with_the_tools_and_its_next_call_sees_it():
    """context_tools=True: the middleware registers the context tools; the model prunes the old
    statement by the id it was shown, and its very next call no longer carries it, while the graph
    state still does."""
    led = ledger()
    m = RecordingModel(seen=[], responses=[
        AIMessage("", tool_calls=[{"name": "balance", "args": {"account": "ACC-1"}, "id": "call_1"}]),
        AIMessage("", tool_calls=[{"name": "context_prune", "args": {"span_ids": ["o3"], "reason": "statement read"}, "id": "call_p"}]),
        AIMessage("ACC-1 holds 1,204.50 EUR."),
    ])
    mw = LedgerMiddleware(led, "self-editing", context_tools=True, budget=4_000, by="model:fake")
    assert [t.name for t in mw.tools][:2] == ["context_list", "context_search"]
    agent = create_agent(m, tools=[balance], middleware=[mw])
    out = agent.invoke({"messages": [HumanMessage("What is in ACC-1?")]})
    assert m.seen[1][0].content == "[o1] What is in ACC-1?"
    assert any(isinstance(x, ToolMessage) and x.tool_call_id == "call_1" for x in m.seen[1])
    last = m.seen[2]
    assert not any(isinstance(x, ToolMessage) and x.tool_call_id == "call_1" for x in last)
    answer = next(x for x in last if isinstance(x, ToolMessage) and x.tool_call_id == "call_p")
    assert "pruned o2, o3" in answer.content
    assert_pairs_valid(last)
    assert any(isinstance(x, ToolMessage) and PAD in x.content for x in out["messages"])  # the state is whole
    s = mw.ledger_session
    assert {ev.span_id for ev in s.events() if getattr(ev, "by", "") == "model:fake"} == {"o2", "o3"}


def test_one_session_per_langgraph_thread():
    """With a session function, each thread of a checkpointed agent records into its own session,
    and the model of one thread never sees another thread's messages."""
    led = ledger()
    m = RecordingModel(seen=[], responses=[AIMessage("Hi Ada."), AIMessage("Hi Bob."), AIMessage("You are Ada.")])
    mw = LedgerMiddleware(led, lambda config: f"thread-{config['configurable']['thread_id']}")
    agent = create_agent(m, tools=[], middleware=[mw], checkpointer=InMemorySaver())
    ada, bob = {"configurable": {"thread_id": "ada"}}, {"configurable": {"thread_id": "bob"}}
    agent.invoke({"messages": [HumanMessage("I am Ada.")]}, ada)
    agent.invoke({"messages": [HumanMessage("I am Bob.")]}, bob)
    agent.invoke({"messages": [HumanMessage("Who am I?")]}, ada)
    assert [x.content for x in m.seen[1]] == ["I am Bob."]
    assert [x.content for x in m.seen[2]] == ["I am Ada.", "Hi Ada.", "Who am I?"]
    sessions = {i.name: i.position for i in led.sessions()}
    assert sessions == {"thread-ada": 5, "thread-bob": 3}
    with pytest.raises(InvalidInputError, match="inside a run"):
        _ = mw.ledger_session


def test_per_thread_context_tools_act_on_the_runs_own_session():
    led = ledger()
    m = RecordingModel(seen=[], responses=[
        AIMessage("", tool_calls=[{"name": "context_list", "args": {}, "id": "call_l"}]),
        AIMessage("Two spans."),
    ])
    mw = LedgerMiddleware(led, lambda config: f"t-{config['configurable']['thread_id']}", context_tools=True)
    agent = create_agent(m, tools=[], middleware=[mw], checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("List your context.")]}, {"configurable": {"thread_id": "x"}})
    listing = next(x for x in m.seen[1] if isinstance(x, ToolMessage))
    assert "o1" in listing.content and "List your context." in listing.content
    assert [i.name for i in led.sessions()] == ["t-x"]


# -- chat history ------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
def test_runnable_with_message_history_over_the_ledger():
    led = ledger()
    m = RecordingModel(seen=[], responses=[AIMessage(content="Hello Ada."), AIMessage(content="You are Ada.")])
    prompt = ChatPromptTemplate.from_messages([("system", "Be kind."), MessagesPlaceholder("history"), ("human", "{question}")])
    chain = RunnableWithMessageHistory(
        prompt | m,
        lambda session_id: LedgerChatMessageHistory(led, session_id),
        input_messages_key="question",
        history_messages_key="history",
    )
    config = {"configurable": {"session_id": "chat-1"}}
    assert chain.invoke({"question": "I am Ada."}, config).content == "Hello Ada."
    assert chain.invoke({"question": "Who am I?"}, config).content == "You are Ada."
    assert [x.content for x in m.seen[-1]] == ["Be kind.", "I am Ada.", "Hello Ada.", "Who am I?"]
    history = LedgerChatMessageHistory(led, "chat-1")
    assert isinstance(history, BaseChatMessageHistory)
    assert [(type(x).__name__, x.content) for x in history.messages] == [
        ("HumanMessage", "I am Ada."), ("AIMessage", "Hello Ada."), ("HumanMessage", "Who am I?"), ("AIMessage", "You are Ada.")
    ]
    assert [(s.role, s.kind) for s in history.ledger_session.spans()] == [
        ("user", "message"), ("assistant", "message"), ("user", "message"), ("assistant", "message")
    ]


def test_clear_prunes_and_the_log_keeps_everything():
    led = ledger()
    h = LedgerChatMessageHistory(led, "c")
    h.add_messages([HumanMessage("one"), AIMessage("two")])
    position = h.ledger_session.position
    h.clear()
    assert h.messages == []
    assert h.ledger_session.position == position + 2
    assert h.ledger_session.original("o1").text == "one"
    asyncio.run(h.aadd_messages([HumanMessage("three")]))
    assert [x.content for x in asyncio.run(h.aget_messages())] == ["three"]
    asyncio.run(h.aclear())
    assert h.messages == []


# -- message kinds -------------------------------------------------------------------------------------------


def conversation() -> list[BaseMessage]:
    return [
        SystemMessage("You are terse.", id="m0"),
        HumanMessage("Add 2 and 3, then look up ACC-9.", id="m1", name="ada"),
        AIMessage(
            content="On it.",
            id="m2",
            tool_calls=[
                {"name": "add", "args": {"a": 2, "b": 3}, "id": "call_a", "type": "tool_call"},
                {"name": "balance", "args": {"account": "ACC-9"}, "id": "call_b", "type": "tool_call"},
            ],
            additional_kwargs={"refusal": None},
            response_metadata={"model_name": "fake", "finish_reason": "tool_calls"},
        ),
        ToolMessage("5", tool_call_id="call_a", id="m3", name="add"),
        ToolMessage("ACC-9: 3.00 EUR", tool_call_id="call_b", id="m4", artifact={"rows": 1}),
        AIMessage([{"type": "text", "text": "5, and ACC-9 has 3.00 EUR."}], id="m5"),
        HumanMessage("", id="m6"),
    ]


def test_message_kinds_round_trip_exactly():
    h = LedgerChatMessageHistory(ledger(), "kinds")
    msgs = conversation()
    h.add_messages(msgs)
    back = h.messages
    assert back == msgs
    # what a provider integration does with them is the same too
    assert convert_to_openai_messages(back) == convert_to_openai_messages(msgs)
    assert [m.content_blocks for m in back] == [m.content_blocks for m in msgs]
    assert [m.model_dump() for m in back] == [m.model_dump() for m in msgs]
    spans = h.ledger_session.spans()
    assert [(s.role, s.kind) for s in spans] == [
        ("system", "message"), ("user", "message"), ("assistant", "tool_call"), ("assistant", "tool_call"),
        ("tool", "tool_result"), ("tool", "tool_result"), ("assistant", "message"), ("user", "message"),
    ]
    assert spans[2].meta["tool_call_id"] == "call_a" and spans[2].meta["arguments"] == {"a": 2, "b": 3}
    assert spans[3].meta["name"] == "balance"
    assert spans[5].meta["tool_call_id"] == "call_b"
    assert spans[6].text == "5, and ACC-9 has 3.00 EUR."


def test_messages_too_large_for_meta_round_trip_too():
    big = "w" * 300_000
    msgs = [
        HumanMessage("look", id="u1", additional_kwargs={"attachment": big}),
        AIMessage("", id="a1", tool_calls=[{"name": "write", "args": {"text": big}, "id": "c1", "type": "tool_call"}]),
        ToolMessage("ok", tool_call_id="c1", id="t1", artifact={"bytes": big}),
    ]
    h = LedgerChatMessageHistory(ledger(), "big")
    h.add_messages(msgs)
    assert h.messages == msgs
    assert [(s.kind, s.meta.get("message_text")) for s in h.ledger_session.spans()] == [
        ("message", "*"), ("tool_call", "*"), ("tool_result", "*")
    ]


def test_chat_and_unknown_message_types_round_trip():
    msgs = [ChatMessage(content="from the ops bot", role="assistant", id="x1"), FunctionMessage(content="42", name="legacy_fn", id="x2")]
    h = LedgerChatMessageHistory(ledger(), "odd")
    h.add_messages(msgs)
    assert h.messages == msgs
    assert [(s.role, s.kind) for s in h.ledger_session.spans()] == [("assistant", "message"), ("user", "other")]


def test_another_tools_record_of_reasoning_is_not_shown_as_a_message():
    h = LedgerChatMessageHistory(ledger(), "foreign")
    h.add_messages([HumanMessage("hi", id="h")])
    h.ledger_session.observe("I should greet back.", role="assistant", kind="thinking")
    h.add_messages([AIMessage("hello", id="a")])
    assert h.messages == [HumanMessage("hi", id="h"), AIMessage("hello", id="a")]


def test_pruned_halves_become_placeholders_or_plain_messages_never_orphans():
    h = LedgerChatMessageHistory(ledger(), "halves")
    h.add_messages(conversation())
    s = h.ledger_session
    s.prune("o5")  # call_a's result
    view = h.messages
    assert_pairs_valid(view)
    placeholder = next(x for x in view if isinstance(x, ToolMessage) and x.tool_call_id == "call_a")
    assert "restore o5" in placeholder.content
    s.restore("o5")
    s.prune("o4")  # the second call of the AI message: the message keeps its text and its live call
    view = h.messages
    assert_pairs_valid(view)
    ai = next(x for x in view if isinstance(x, AIMessage) and x.tool_calls)
    assert ai.content == "On it." and [c["id"] for c in ai.tool_calls] == ["call_a"] and ai.id == "m2"
    orphan = next(x for x in view if isinstance(x, HumanMessage) and "ACC-9: 3.00 EUR" in x.content)
    assert "call_b" in orphan.content
    d = s.rewrite(["o1", "o2"], "A terse assistant was asked to add 2 and 3 and look up ACC-9.")
    view = h.messages
    assert isinstance(view[0], SystemMessage) or isinstance(view[0], HumanMessage)
    assert view[0].content.startswith(f"[derived {d.id} ") and "not an observation" in view[0].content


def test_the_two_adapters_read_each_others_sessions():
    """A session written through one adapter reads through the other: spans without the other's
    original come back as plain messages and tool pairs (nothing is taken for what it is not)."""
    pytest.importorskip("agents", reason="the openai-agents extra is not installed")
    from engine.integrations.openai_agents import LedgerSession

    led = ledger()
    h = LedgerChatMessageHistory(led, "shared")
    big = "x" * 300_000  # too large for meta: kept as JSON in the span text
    h.add_messages(conversation()[1:5] + [AIMessage("done", additional_kwargs={"blob": big})])
    items = LedgerSession("shared", ledger=led).items()
    assert items[0] == {"role": "user", "content": "Add 2 and 3, then look up ACC-9."}
    assert items[1]["type"] == "function_call" and items[1]["arguments"] == '{"a":2,"b":3}'
    assert [i.get("type") for i in items[1:5]] == ["function_call", "function_call", "function_call_output", "function_call_output"]
    assert items[5]["role"] == "assistant" and items[5]["content"].startswith('{"type":"ai"')

    sdk = LedgerSession("other", ledger=led)
    sdk.observe_items([
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a":1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "1"},
        {"type": "reasoning", "id": "rs", "summary": [], "encrypted_content": "y" * 300_000},
    ])
    msgs = LedgerChatMessageHistory(led, "other").messages
    # the SDK's reasoning item is a thinking span: not sent to a LangChain model as text
    assert [type(m).__name__ for m in msgs] == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert LedgerChatMessageHistory(led, "other").ledger_session.spans()[-1].kind == "thinking"
    assert msgs[1].tool_calls[0]["id"] == "c1" and msgs[2].tool_call_id == "c1"
    assert_pairs_valid(msgs)


@pytest.mark.parametrize(
    "bad, says",
    [
        ("hello", "not a LangChain message"),
        ({"role": "user", "content": "hi"}, "not a LangChain message"),
        (AIMessage(content="", tool_calls=[{"name": "add", "args": {}, "id": None}]), "has no id"),
        (HumanMessage("\ud800"), "message 1 is not valid Unicode"),
        (HumanMessage("x", additional_kwargs={"blob": object()}), "serializ"),
        (AIMessage("", tool_calls=[{"name": "add", "args": {"a": 2**70}, "id": "c"}]), r"message 1: .*(64-bit|cannot be stored)"),
    ],
)
def test_bad_messages_raise_a_typed_error_and_write_nothing(bad, says):
    h = LedgerChatMessageHistory(ledger(), "bad")
    h.add_messages([HumanMessage("before")])
    position = h.ledger_session.position
    with pytest.raises(InvalidInputError, match=says):
        h.add_messages([HumanMessage("fine"), bad])
    assert h.ledger_session.position == position
    assert [x.content for x in h.messages] == ["before"]
    with pytest.raises(InvalidInputError):
        h.add_messages("not a list")
    assert h.ledger_session.position == position


def test_constructor_checks():
    led = ledger()
    with pytest.raises(InvalidInputError):
        LedgerMiddleware("memory://", "x")
    with pytest.raises(InvalidInputError):
        LedgerMiddleware(led, 42)
    with pytest.raises(InvalidInputError):
        LedgerMiddleware(led, "x", compactor="guarded")
    with pytest.raises(InvalidInputError):
        LedgerChatMessageHistory(led, "")


text_st = st.text(max_size=30)
simple = st.one_of(
    st.builds(lambda t, i: HumanMessage(t, id=i), text_st, st.uuids().map(str)),
    st.builds(lambda t, i: SystemMessage(t, id=i), text_st, st.uuids().map(str)),
    st.builds(lambda t, i: AIMessage(t, id=i), text_st, st.uuids().map(str)),
)


@st.composite
def exchanges(draw):
    """An AI message with 1-3 tool calls and the tool messages answering them."""
    n = draw(st.integers(1, 3))
    ids = [f"c{draw(st.uuids()).hex[:8]}" for _ in range(n)]
    args = draw(st.lists(st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5), max_size=2), min_size=n, max_size=n))
    ai = AIMessage(
        draw(text_st),
        id=draw(st.uuids()).hex,
        tool_calls=[{"name": "t", "args": a, "id": i, "type": "tool_call"} for a, i in zip(args, ids, strict=True)],
    )
    return [ai] + [ToolMessage(draw(text_st), tool_call_id=i, id=f"r{i}") for i in ids]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.one_of(simple.map(lambda m: [m]), exchanges()), min_size=1, max_size=5), st.data())
def test_any_conversation_round_trips_and_any_pruning_keeps_pairs_valid(blocks, data):
    msgs = [m for b in blocks for m in b]
    h = LedgerChatMessageHistory(ledger(), "prop")
    h.add_messages(msgs)
    assert h.messages == msgs
    assert convert_to_openai_messages(h.messages) == convert_to_openai_messages(msgs)
    spans = h.ledger_session.spans()
    for span_id in sorted(data.draw(st.sets(st.sampled_from([s.id for s in spans])))):
        h.ledger_session.prune(span_id)
    assert_pairs_valid(h.messages)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.one_of(simple.map(lambda m: [m]), exchanges()), st.integers(0, 30), st.booleans()), min_size=1, max_size=6))
def test_the_kept_view_equals_a_fresh_one(steps):
    """The history keeps its view between reads; after any appends and prunes it equals a fresh one."""
    h = LedgerChatMessageHistory(ledger(), "kept")
    for block, k, prune in steps:
        h.add_messages(block)
        live = h.ledger_session.spans()
        if prune and live:
            h.ledger_session.prune(live[k % len(live)].id)
        assert h.messages == to_messages(h.ledger_session)
        assert_pairs_valid(h.messages)


# -- packaging -------------------------------------------------------------------------------------------------


def test_a_missing_langchain_is_a_one_line_error_naming_the_extra():
    code = (
        "import sys; sys.modules['langchain'] = None; sys.modules['langchain.agents'] = None\n"
        "try:\n    import engine.integrations.langchain\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines() == [
        "LangChain (langchain, langchain-core, langgraph) is not installed: pip install 'ctxledger[langchain]'"
    ]
