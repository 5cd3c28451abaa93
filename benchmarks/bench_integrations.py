"""Framework adapter overhead: the OpenAI Agents SDK session round trip, ours against the SDK's own.

    python benchmarks/bench_integrations.py [--rounds 400]

A round is what the Runner does around every model call: ``add_items`` of a new item, then
``get_items()`` of the whole history. Both sessions hold the same 1,000 Responses items (user and
assistant messages, function calls and their outputs) in a SQLite file, and grow by one item per
round; ours and the SDK's ``SQLiteSession`` alternate round by round so they share the machine's
load. Target: ours <= 1 ms p50 per round trip. Writes its table into benchmarks/RESULTS.md between
<!-- bench:integrations --> markers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _results import machine, write_section  # noqa: E402
from agents import SQLiteSession  # noqa: E402

from engine import Ledger  # noqa: E402
from engine.integrations.openai_agents import LedgerSession  # noqa: E402

HISTORY = 1_000


def history(n: int) -> list[dict]:
    """``n`` items in the shape the Runner stores: a user turn, a tool call and its output, a reply."""
    items: list[dict] = []
    k = 0
    while len(items) < n:
        items.append({"role": "user", "content": f"Where is order A{k}? It was due on Monday."})
        items.append({
            "arguments": f'{{"order_id":"A{k}"}}', "call_id": f"call_{k}", "name": "lookup_order",
            "type": "function_call", "id": f"fc_{k}",
        })
        items.append({
            "call_id": f"call_{k}", "output": f"order A{k}: shipped from Rotterdam, carrier DHL, 2 parcels",
            "type": "function_call_output",
        })
        items.append({
            "id": f"msg_{k}", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": f"Order A{k} shipped from Rotterdam.", "annotations": [], "logprobs": []}],
        })
        k += 1
    return items[:n]


def p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


class Core:
    """The ledger alone doing the same round: one observe, then the live spans (no adapter)."""

    def __init__(self, session):
        self.s = session

    async def add_items(self, items):
        with self.s.batch():
            for it in items:
                self.s.observe(it["content"], role=it["role"])

    async def get_items(self):
        return self.s.spans()


async def measure(rounds: int, counter, on_disk: bool) -> dict[str, dict[str, list[float]]]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-integrations-"))
    ledger = Ledger.open(f"sqlite:///{tmp / 'ledger.db'}" if on_disk else "memory://", token_counter=counter)
    ours = LedgerSession("bench", ledger=ledger)
    theirs = SQLiteSession("bench", str(tmp / "sdk.db") if on_disk else ":memory:")
    base = history(HISTORY)
    await ours.add_items(base)
    await theirs.add_items(base)
    seed = LedgerSession("core", ledger=ledger)
    seed.observe_items(base)  # the same 1,000 spans, then driven without the adapter
    core = Core(seed.ledger_session)
    assert await ours.get_items() == await theirs.get_items()
    times: dict[str, dict[str, list[float]]] = {
        name: {"add": [], "get": [], "round": []} for name in ("ours", "sdk", "core")
    }
    sessions = [("ours", ours), ("sdk", theirs), ("core", core)]
    for r in range(rounds):
        item = {"role": "user", "content": f"follow-up question number {r}, about order A{r % 50}"}
        for name, session in sessions[r % 3 :] + sessions[: r % 3]:
            t0 = time.perf_counter()
            await session.add_items([dict(item)])
            t1 = time.perf_counter()
            got = await session.get_items()
            t2 = time.perf_counter()
            assert len(got) >= HISTORY + r + 1
            times[name]["add"].append(t1 - t0)
            times[name]["get"].append(t2 - t1)
            times[name]["round"].append(t2 - t0)
    assert await ours.get_items() == await theirs.get_items()
    ledger.close()
    theirs.close()
    return times


def langchain_rounds(rounds: int, counter) -> dict[str, list[float]]:
    """The LangChain side, on a 1,000-message conversation: the middleware's work before one model
    call (record the new message, build the model's view) and a chat-history round trip
    (``add_messages`` + ``messages``), against langchain-core's in-memory history."""
    import warnings

    warnings.filterwarnings("ignore", message=".*InMemoryChatMessageHistory.*deprecated")
    from langchain_core.chat_history import InMemoryChatMessageHistory
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from engine.integrations.langchain import LedgerChatMessageHistory, LedgerMiddleware

    msgs = []
    for k in range(HISTORY // 4):
        msgs += [
            HumanMessage(f"Where is order A{k}?", id=f"h{k}"),
            AIMessage("", id=f"a{k}", tool_calls=[{"name": "lookup_order", "args": {"order_id": f"A{k}"}, "id": f"c{k}"}]),
            ToolMessage(f"order A{k}: shipped from Rotterdam, carrier DHL", tool_call_id=f"c{k}", id=f"t{k}"),
            AIMessage(f"Order A{k} shipped from Rotterdam.", id=f"b{k}"),
        ]
    ledger = Ledger.open("memory://", token_counter=counter)
    mw = LedgerMiddleware(ledger, "lc-middleware")
    mw.model_view(msgs)
    ours = LedgerChatMessageHistory(ledger, "lc-history")
    ours.add_messages(msgs)
    theirs = InMemoryChatMessageHistory()
    theirs.add_messages(msgs)
    out: dict[str, list[float]] = {"middleware": [], "history": [], "in-memory": []}
    state = list(msgs)
    for r in range(rounds):
        m = HumanMessage(f"follow-up {r}", id=f"f{r}")
        state.append(m)
        t0 = time.perf_counter()
        view = mw.model_view(state)
        t1 = time.perf_counter()
        ours.add_messages([m])
        got = ours.messages
        t2 = time.perf_counter()
        theirs.add_messages([m])
        base = theirs.messages
        t3 = time.perf_counter()
        assert len(view) == len(got) == len(base) == len(state)
        out["middleware"].append(t1 - t0)
        out["history"].append(t2 - t1)
        out["in-memory"].append(t3 - t2)
    ledger.close()
    return out


def ms(x: float) -> str:
    return f"{x * 1000:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    load = os.getloadavg()
    from engine.tokens import default_counter

    rows = []
    variants = (
        ("SQLite file (ours) vs SQLite file (SDK)", True),
        ("memory:// (ours) vs `:memory:` (SDK): no disk", False),
    )
    for label, on_disk in variants:
        t = asyncio.run(measure(args.rounds, default_counter(), on_disk))
        ours, sdk = t["ours"], t["sdk"]
        med = {k: statistics.median(v["round"]) for k, v in t.items()}
        rows.append(
            f"| {label} | {ms(statistics.median(ours['add']))} | {ms(statistics.median(ours['get']))} | "
            f"**{ms(med['ours'])}** | {ms(p(ours['round'], 0.95))} | "
            f"{ms(statistics.median(sdk['add']))} | {ms(statistics.median(sdk['get']))} | {ms(med['sdk'])} | "
            f"**{med['ours'] / med['sdk']:.2f}** | {ms(med['core'])} | {ms(med['ours'] - med['core'])} |"
        )
        print(rows[-1], flush=True)
    lc = langchain_rounds(max(50, args.rounds // 4), default_counter())
    lc_rows = (
        f"| `LedgerMiddleware` before one model call (record the new message, build the view) | {ms(statistics.median(lc['middleware']))} | {ms(p(lc['middleware'], 0.95))} |\n"
        f"| `LedgerChatMessageHistory`: `add_messages` + `messages` | {ms(statistics.median(lc['history']))} | {ms(p(lc['history'], 0.95))} |\n"
        f"| langchain-core `InMemoryChatMessageHistory`: the same (a Python list, no store) | {ms(statistics.median(lc['in-memory']))} | {ms(p(lc['in-memory'], 0.95))} |"
    )
    print(lc_rows, flush=True)
    body = f"""### Framework adapters: OpenAI Agents SDK session round trip

`python benchmarks/bench_integrations.py --rounds {args.rounds}` — {machine()}; load average at start {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f} (2 cores shared with other work)

One round = `add_items([item])` + `get_items()` on a session of {HISTORY:,} Responses items (user turns, function calls,
their outputs, assistant messages) that grows by one item per round. `LedgerSession` (exact o200k token counts, the
default), the SDK's own `SQLiteSession`, and the bare ledger doing the same round (`observe` + `spans()`, no adapter) take
turns round by round. Times in ms (p50 unless marked); target: adapter overhead <= 1 ms p50 per round trip.

| store | ours add | ours get | ours round | ours round p95 | SDK add | SDK get | SDK round | ours / SDK | bare ledger round | adapter overhead (ours − bare) |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

`get_items` keeps its view of the live buffer between calls and pairs only the items appended since (a prune, restore or
rewrite recomputes it, from a per-span cache of each item's JSON); the whole list is decoded in one `msgspec` call, so
every call returns fresh copies. `add_items` checks every item in full, then observes them in one transaction. The SDK's
session runs a `SELECT` and one `json.loads` per stored row. On a file, both sides' `add_items` is mostly the SQLite
commit.

**LangChain** (memory:// ledger, {HISTORY:,}-message conversation growing by one message per round, {len(lc['history'])} rounds; ms):

| what | p50 | p95 |
|---|---:|---:|
{lc_rows}

The LangChain view builds fresh message objects on every call (the four common types from their stored dump, without
validating again); that, not the ledger, is most of its cost.
"""
    write_section("integrations", body)


if __name__ == "__main__":
    main()
