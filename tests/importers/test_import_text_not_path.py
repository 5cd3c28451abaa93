"""``ledger.import_`` given the export's text instead of a path says so (it used to raise a raw
``OSError: File name too long``), and writes nothing."""

from __future__ import annotations

import io

import pytest

from engine import EstimateCounter, ImportFormatError, Ledger


@pytest.fixture
def exported(tmp_path):
    src = Ledger.open("memory://", token_counter=EstimateCounter())
    s = src.create_session("agent")
    s.observe("GET /health -> 503 from billing-api at 13:58", role="tool", kind="tool_result", meta={"tool_call_id": "c1"})
    return "\n".join(s.export())


@pytest.mark.parametrize("shape", ["one line", "many lines", "json array"])
def test_json_text_is_refused_with_a_clear_error_and_writes_nothing(exported, tmp_path, shape):
    text = {"one line": exported.splitlines()[0], "many lines": exported, "json array": "[" + exported.splitlines()[0] + "]"}[shape]
    led = Ledger.open(f"sqlite:///{tmp_path / 'l.db'}", token_counter=EstimateCounter())
    led.create_session("bystander").observe("hello")
    with pytest.raises(ImportFormatError) as err:
        led.import_(text)
    assert "not a path" in err.value.message and "io.StringIO" in err.value.message
    assert [i.name for i in led.sessions()] == ["bystander"]
    assert led.session("bystander").position == 2


def test_the_same_text_as_a_stream_imports(exported):
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    s = led.import_(io.StringIO(exported))
    assert s.name == "agent" and [sp.id for sp in s.spans()] == ["o1"]


def test_a_path_too_long_for_the_filesystem_is_a_typed_error(tmp_path):
    led = Ledger.open("memory://", token_counter=EstimateCounter())
    with pytest.raises(ImportFormatError):
        led.import_(str(tmp_path / ("x" * 5000)))
    assert led.sessions() == []
