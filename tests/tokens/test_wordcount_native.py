"""The C lookup of the word cache (engine/_wordcount.c): what it answers, that it answers exactly
what the Python word cache does, and that an install on a machine with a C compiler builds it."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import sysconfig

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.native as native
import engine.tokens as tokens
from engine import BPECounter, InvalidInputError, tokenizer_packages

WordTable = tokens._WordTable


def test_an_install_with_a_c_compiler_builds_the_extension():
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        pytest.skip(f"no C compiler ({compiler}) here: ctxledger counts in pure Python, the same counts")
    if os.environ.get(native.NO_NATIVE_ENV):
        pytest.skip(f"{native.NO_NATIVE_ENV} is set: this run checks the Python fallback")
    assert WordTable is not None, "engine._wordcount was not built: reinstall with `pip install -e .`"
    assert BPECounter().native is True


needs_c = pytest.mark.skipif(WordTable is None, reason=native.unavailable_reason)


def counting(seen: list[str]):
    """A count callable for a table: one token per character, recording what it was asked."""

    def count(part: str) -> int:
        seen.append(part)
        return len(part)

    return count


@needs_c
def test_the_table_sums_cached_parts_and_counts_new_ones_run_by_run():
    asked: list[str] = []
    table = WordTable(space=1, count=counting(asked))
    assert table.lookup("GET") == 3  # a text of one new part: counted alone and kept
    asked.clear()
    for word, n in (("/health", 2), ("503", 1), ("ok", 1)):
        table.add_spaced(word, n)
    assert table.lookup("GET /health 503") == 3 + 2 + 1
    assert table.lookup("GET /health 503 ") == 3 + 2 + 1 + 1  # one trailing space is a piece of its own
    assert asked == []
    assert table.lookup("POST /health") == 4 + 2  # a new first part: counted alone...
    assert table.lookup("POST ok") == 4 + 1  # ...and kept
    assert asked == ["POST"]
    asked.clear()
    # new parts are split into runs of digits (in threes from the left) and of other characters;
    # the first run after a space carries it, except a digit run (the space is a piece of its own)
    assert table.lookup("[1-7]") == 5
    assert asked == ["[", "1", "-", "7", "]"]
    asked.clear()
    assert table.lookup("GET v2.3.1") == 3 + len(" v") + 5
    assert asked == [" v", "2", ".", "3"]
    asked.clear()
    assert table.lookup("GET 1234567") == 3 + 1 + 3 + 3 + 1
    assert asked == ["123", "456"]
    assert table.lookup("GET 4561237") == 3 + 1 + 3 + 3 + 1  # every run cached now
    assert asked == ["123", "456"]
    assert table.sizes() == (12, 4)


@needs_c
def test_a_cached_part_is_found_at_every_length_and_distance_from_the_end():
    """Parts are hashed eight characters at a time while at least eight remain, byte by byte near the
    end of the text: a part stored once must be found whichever way it was read."""
    asked: list[str] = []
    table = WordTable(space=1, count=counting(asked))
    assert table.lookup("x") == 1
    asked.clear()
    for length in range(1, 30):
        # letters and digits: a part the whole-part lookup missed would be counted run by run
        part = "".join("ab1cd2ef3g"[(i * 7 + length) % 10] for i in range(length))
        table.add_spaced(part, 100 + length)
        for after in ("", " y", " yy", " yyyyyyy", " yyyyyyyy", " " + part):
            if after and after[1:] != part:
                table.add_spaced(after[1:], len(after) - 1)
            expected = 1 + 100 + length + (len(after) - 1 if after else 0)
            if after == " " + part:
                expected = 1 + 2 * (100 + length)
            assert table.lookup("x " + part + after) == expected, (part, after)
        assert asked == []  # every part was found whole: nothing counted run by run


@needs_c
def test_the_table_leaves_to_python_what_it_cannot_sum():
    asked: list[str] = []
    table = WordTable(space=1, count=counting(asked))
    for text in (
        "GET  /health",  # two spaces: not a sum of parts
        "GET /health  ",
        "x\t /health",  # whitespace other than the separating space
        "GET a\tb",
        "GET a\n",
        "GET /hé",  # not ASCII
        b"GET",
        3,
    ):
        assert table.lookup(text) is None, text
    asked.clear()  # (what it counted before giving up is kept: counts of runs do not depend on the text)
    nine_new = "a b c d e f g h i"
    assert table.lookup(nine_new) is None  # more new runs than are worth counting one by one
    assert len(asked) == 8
    assert table.lookup(nine_new) == 1 + 8 * 2  # the eight it counted are kept: one call left to make
    assert len(asked) == 9


@needs_c
def test_an_error_of_the_count_callable_propagates_and_keeps_nothing():
    def broken(part: str) -> int:
        raise RuntimeError("core gone")

    table = WordTable(space=1, count=broken)
    table.add_spaced("503", 1)
    with pytest.raises(RuntimeError, match="core gone"):
        table.lookup("GET 503")
    assert table.sizes() == (0, 1)
    with pytest.raises(TypeError):
        WordTable(space=1, count=3)
    uninitialised = WordTable.__new__(WordTable)
    with pytest.raises(TypeError, match="count callable"):
        uninitialised.lookup("GET 503")


@needs_c
def test_the_table_keeps_no_long_or_non_ascii_part_and_restarts_when_full():
    table = WordTable(space=1, count=len)
    table.add_spaced("x" * 65, 9)
    table.add_spaced("héllo", 2)
    assert table.sizes() == (0, 0)
    with pytest.raises(TypeError):
        table.add_spaced(b"bytes", 1)
    for i in range(65_536):
        table.add_spaced(f"w{i}", 2)
    assert table.sizes() == (0, 65_536)
    assert table.lookup("a w65535") == 1 + 2
    table.add_spaced("one-more", 3)  # full: the table restarts with this part alone
    assert table.sizes() == (1, 1)
    assert table.lookup("a one-more") == 1 + 3
    assert table.lookup("a w65535") == 1 + len(" w") + 3 + 2  # counted again, run by run
    table.clear()
    assert table.sizes() == (0, 0)


@needs_c
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 400))
def test_the_c_and_python_lookups_count_every_text_alike_and_like_tiktoken(seed, size):
    """The same stream of log-like texts (words repeat, first parts are new, whitespace of every kind
    now and then) through two fresh caches: the C lookup's and the Python one's."""
    rng = random.Random(seed)
    words = ["billing-api", "503", "14:02", "retry", "[a]", "x\x1f", "\x0bq", "don't", "v2.3.1", ""]
    texts = []
    for i in range(size):
        numbers = [str(rng.randint(0, 10**9)), f"v{rng.randint(0, 99)}.{rng.randint(0, 999)}", f"{rng.random():.6f}ms"]
        parts = [f"[{seed % 97}-{i}]"] + [rng.choice(words + numbers) for _ in range(rng.randint(0, 30))]
        texts.append(rng.choice([" ", " ", " ", "  ", "\n", "\t "]).join(parts) + rng.choice(["", "", " ", "\n"]))
    tokens._word_counts.cache_clear()
    native, python = BPECounter(native=True), BPECounter(native=False)
    reference = tokenizer_packages.tiktoken_encoding("o200k_base").encode_ordinary
    for text in texts:
        expected = len(reference(text))
        assert native.count(text) == expected, text
        assert python.count(text) == expected, text
    assert native._words is not python._words


def test_native_true_without_the_extension_names_how_to_get_it(monkeypatch):
    monkeypatch.setattr(tokens, "_WordTable", None)
    monkeypatch.setattr(native, "unavailable_reason", "the C extension engine._wordcount is not built; it is built "
                        "when ctxledger is installed on a machine with a C compiler")
    with pytest.raises(InvalidInputError, match=r"C compiler"):
        BPECounter(native=True)
    counter = BPECounter()
    assert counter.native is False
    assert counter.count("billing-api returned 503") == len(
        tokenizer_packages.tiktoken_encoding("o200k_base").encode_ordinary("billing-api returned 503")
    )


def test_the_environment_switch_forces_the_python_fallback_with_the_same_counts():
    """CTXLEDGER_NO_NATIVE=1 (how .ci/run checks the fallback): a fresh process never loads the C
    extension, the default counter looks words up in Python, native=True says why it cannot, and the
    counts are tiktoken's. Unset or 0, the build is used where there is one."""
    text = "billing-api returned 503 at 14:02 [7-123] retry"
    code = (
        "import json, sys\n"
        "from engine import BPECounter, InvalidInputError\n"
        "c = BPECounter()\n"
        f"out = {{'native': c.native, 'count': c.count({text!r})}}\n"
        "out['loaded'] = 'engine._wordcount' in sys.modules\n"
        "try:\n"
        "    BPECounter(native=True)\n"
        "except InvalidInputError as e:\n"
        "    out['refused'] = e.message\n"
        "print(json.dumps(out))\n"
    )
    expected_count = len(tokenizer_packages.tiktoken_encoding("o200k_base").encode_ordinary(text))
    built = importlib.util.find_spec("engine._wordcount") is not None  # whatever this process was told
    for value, c_expected in (("1", False), (" 1 ", False), ("0", built), ("", built)):
        env = {**os.environ, native.NO_NATIVE_ENV: value}
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout)
        assert out["native"] is c_expected and out["loaded"] is c_expected, (value, out)
        assert out["count"] == expected_count
        if c_expected:
            assert "refused" not in out
        elif value.strip() == "1":
            assert "CTXLEDGER_NO_NATIVE is set" in out["refused"]
