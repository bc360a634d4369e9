"""What a user reads and gets from ``spectrn.loadgen.arrivals``, written out whole (mutation survivors).

Every bad trace is one ``ConfigError`` whose message names the file, the line and the field, and whose hint
says what a row needs: each is asserted as the whole (class, message, hint). Arrival offsets are computed in
the test from the seeded generator's definition (``random.Random(seed)``: exponential gaps for Poisson, gamma
gaps of shape ``burstiness``, default 1, and scale ``1 / (rate * shape)``), never from the module.
"""

from __future__ import annotations

import itertools
import locale
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spectrn.errors import ConfigError, SpectrnError
from spectrn.loadgen import arrivals
from spectrn.loadgen.arrivals import Level, arrival_times, level_arrivals, open_loop_shape, read_trace

HINT = (
    "each row needs timestamp (or arrival_s): seconds from the start, >= 0, in arrival order; "
    "input_tokens and output_tokens are optional whole numbers >= 1 (docs/load-shapes.md)"
)
BIG = "1" + "0" * 400  # an integer past a float's range (about 1.8e308)


def _raised(call: Callable[[], object]) -> tuple[type[BaseException], str, str | None]:
    """(the error's class, its message, its hint) for a call that must fail."""
    with pytest.raises(Exception) as info:
        call()
    e = info.value
    if isinstance(e, SpectrnError):
        return type(e), e.message, e.hint
    return type(e), str(e), None


def _trace(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _first(it: Iterator[float], n: int) -> list[float]:
    return list(itertools.islice(it, n))


@pytest.fixture
def ascii_locale() -> Iterator[None]:
    """The C locale's ASCII as the default text encoding (a host without a UTF-8 locale)."""
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)


# ---- bad rows: the file, the line, the field and the fix ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "where"),
    [
        pytest.param('{"timestamp": true}\n', "line 1: timestamp is True, not a number", id="bool-time"),
        pytest.param(
            '{"timestamp": 0, "input_tokens": false}\n', "line 1: input_tokens is False, not a number", id="bool-tokens"
        ),
        pytest.param(
            '{"timestamp": "' + "a" * 50 + '"}\n',
            "line 1: timestamp is '" + "a" * 40 + "', not a number",
            id="text-cut-at-40",
        ),
        pytest.param('{"timestamp": NaN}\n', "line 1: timestamp is nan, not a finite number", id="nan"),
        pytest.param('{"timestamp": -Infinity}\n', "line 1: timestamp is -inf, not a finite number", id="-inf"),
        pytest.param(
            '{"timestamp": 0, "output_tokens": 2.5}\n',
            "line 1: output_tokens is 2.5, not a whole number of tokens",
            id="half-token",
        ),
        pytest.param(
            '{"timestamp": 0, "input_tokens": 0}\n', "line 1: input_tokens is 0, outside 1..131072", id="no-tokens"
        ),
        pytest.param(
            '{"timestamp": -0.5}\n',
            "line 1: timestamp is -0.5: arrival times are seconds from the start, >= 0",
            id="negative",
        ),
        pytest.param(
            '\n\n{"input_tokens": 3}\n',
            "line 3: timestamp is missing (give timestamp or arrival_s, seconds from the start)",
            id="missing-after-blank-lines",
        ),
        pytest.param(
            '{"timestamp": 1, "arrival_s": 1}\n',
            "line 1: arrival_s and timestamp are both given: give one",
            id="both-times",
        ),
        pytest.param(
            '{"timestamp": 2}\n{"arrival_s": 1.5}\n',
            "line 2: arrival_s is 1.5, earlier than the row before (2): sort by arrival",
            id="out-of-order",
        ),
        pytest.param('{"timestamp": 0}\n[1, 2]\n', "line 2: row is not a JSON object", id="list"),
        pytest.param(
            '{"timestamp": }\n',
            "line 1: row is not JSON (Expecting value: line 1 column 15 (char 14))",
            id="not-json",
        ),
        # JSON integers of any length: a timestamp past a float's range is infinite, as the same CSV cell
        pytest.param('{"timestamp": ' + BIG + "}\n", "line 1: timestamp is inf, not a finite number", id="huge-time"),
        pytest.param(
            '{"timestamp": 0, "input_tokens": ' + BIG + "}\n",
            f"line 1: input_tokens is {BIG}, outside 1..131072",
            id="huge-tokens",
        ),
        pytest.param(
            '{"timestamp": 0, "input_tokens": 9007199254740993}\n',
            "line 1: input_tokens is 9007199254740993, outside 1..131072",  # 2**53 + 1, not rounded to a float
            id="exact-tokens",
        ),
    ],
)
def test_a_bad_jsonl_row_is_refused_with_its_file_line_field_and_fix(tmp_path: Path, text: str, where: str) -> None:
    path = _trace(tmp_path, "t.jsonl", text)
    assert _raised(lambda: read_trace(path)) == (ConfigError, f"trace {path} {where}", HINT)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        pytest.param("time,input_tokens\n0,1\n", "line 1: header has no timestamp or arrival_s column", id="no-time"),
        pytest.param("", "line 1: header has no timestamp or arrival_s column", id="empty-file"),
        pytest.param(
            f"timestamp,input_tokens\n0,1\n1,{BIG}\n", f"line 3: input_tokens is {BIG}, outside 1..131072", id="huge"
        ),
        pytest.param(
            "timestamp,input_tokens\n0,9007199254740993\n",
            "line 2: input_tokens is 9007199254740993, outside 1..131072",
            id="exact-tokens",
        ),
        pytest.param(f"timestamp\n{BIG}\n", "line 2: timestamp is inf, not a finite number", id="huge-time"),
        pytest.param(
            "timestamp,arrival_s\n1,2\n", "line 2: arrival_s and timestamp are both given: give one", id="both"
        ),
    ],
)
def test_a_bad_csv_trace_is_refused_with_its_file_line_field_and_fix(tmp_path: Path, text: str, where: str) -> None:
    path = _trace(tmp_path, "t.csv", text)
    assert _raised(lambda: read_trace(path)) == (ConfigError, f"trace {path} {where}", HINT)


def test_an_empty_csv_cell_does_not_count_as_a_time(tmp_path: Path) -> None:
    path = _trace(tmp_path, "t.csv", "timestamp,arrival_s\n,0.5\n1,\n")
    assert read_trace(path) == [arrivals.TraceRow(0.5), arrivals.TraceRow(1.0)]


def test_the_row_limit_admits_exactly_its_number_of_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arrivals, "MAX_TRACE_ROWS", 2)
    two = _trace(tmp_path, "two.jsonl", '{"timestamp": 0}\n\n{"timestamp": 1}\n')
    assert read_trace(two) == [arrivals.TraceRow(0.0), arrivals.TraceRow(1.0)]
    three = _trace(tmp_path, "three.jsonl", '{"timestamp": 0}\n\n{"timestamp": 1}\n{"timestamp": 2}\n')
    assert _raised(lambda: read_trace(three)) == (
        ConfigError,
        f"trace {three} line 4: row is past the limit of 2 rows",
        HINT,
    )
    csv = _trace(tmp_path, "three.csv", "timestamp\n0\n1\n2\n")
    assert _raised(lambda: read_trace(csv)) == (
        ConfigError,
        f"trace {csv} line 4: row is past the limit of 2 rows",
        HINT,
    )


# ---- the file itself ---------------------------------------------------------------------------------------


def test_the_byte_limit_admits_a_file_of_exactly_its_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arrivals, "MAX_TRACE_BYTES", 16)
    exact = _trace(tmp_path, "exact.jsonl", '{"timestamp": 0}')  # 16 bytes
    assert read_trace(exact) == [arrivals.TraceRow(0.0)]
    over = _trace(tmp_path, "over.jsonl", '{"timestamp": 0}\n')
    assert _raised(lambda: read_trace(over, "--trace")) == (
        ConfigError,
        f"--trace: trace {over} is 17 bytes, over the 16 byte limit",
        "replay a part of it (at most 1000000 rows)",
    )


def test_a_missing_trace_file_is_named_under_the_default_key(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    assert _raised(lambda: read_trace(missing)) == (
        ConfigError,
        f"bench.trace: trace file {missing} does not exist",
        "check the path",
    )


def test_a_trace_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"timestamp": 0, "note": "\xff"}\n')
    assert _raised(lambda: read_trace(path, "--trace")) == (
        ConfigError,
        f"--trace: trace file {path} is not UTF-8 text",
        "give a JSONL or CSV file",
    )


def test_a_directory_given_as_the_trace_cannot_be_read(tmp_path: Path) -> None:
    assert _raised(lambda: read_trace(tmp_path, "--trace")) == (
        ConfigError,
        f"--trace: cannot read trace file {tmp_path}: Is a directory",
        "check the path",
    )


@pytest.mark.parametrize(("name", "text"), [("t.jsonl", "\n  \n"), ("t.csv", "timestamp,input_tokens\n")])
def test_a_trace_without_rows_is_refused(tmp_path: Path, name: str, text: str) -> None:
    path = _trace(tmp_path, name, text)
    assert _raised(lambda: read_trace(path, "--trace")) == (
        ConfigError,
        f"--trace: trace {path} has no rows",
        "give at least one row with a timestamp",
    )


@pytest.mark.usefixtures("ascii_locale")
def test_a_trace_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    path = _trace(tmp_path, "t.jsonl", '{"timestamp": 0.5, "note": "café"}\n')
    assert read_trace(path) == [arrivals.TraceRow(0.5)]


# ---- arrival processes and levels --------------------------------------------------------------------------


def test_gamma_arrivals_without_a_burstiness_have_shape_one() -> None:
    rng = random.Random(11)
    expected = list(itertools.accumulate(rng.gammavariate(1.0, 1.0 / 2.0) for _ in range(5)))  # rate 2, shape 1
    assert _first(arrival_times("gamma", 2.0, 11), 5) == pytest.approx(expected, rel=1e-12)


def test_an_unknown_arrival_process_is_named() -> None:
    assert _raised(lambda: next(arrival_times("uniform", 1.0, 0))) == (
        ValueError,
        "unknown arrival process 'uniform'",
        None,
    )


def test_one_shard_draws_from_the_runs_own_seed() -> None:
    rng = random.Random(21)
    expected = list(itertools.accumulate(rng.expovariate(3.0) for _ in range(4)))
    assert _first(level_arrivals(Level.open(3.0), 21, 1, 0), 4) == pytest.approx(expected, rel=1e-12)


def test_a_closed_level_has_its_streams() -> None:
    assert Level.closed(3) == Level("c3", concurrency=3)
    assert not Level.closed(3).open_loop


def test_the_trace_span_in_run_json_keeps_six_decimals(tmp_path: Path) -> None:
    rows = read_trace(_trace(tmp_path, "t.jsonl", '{"timestamp": 0}\n{"timestamp": 1.23456789}\n'))
    shape = open_loop_shape(Level.replay(), shards=1, seed=0, duration_s=None, trace=rows, trace_file="t.jsonl")
    assert shape.trace_span_s == 1.234568
