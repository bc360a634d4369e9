"""Arrival times, shard seeds and caps, trace rows and run.json's load shape, pinned by hand (audit, issue 29).

Expected values come from the definitions in ``spectrn.loadgen.arrivals``'s docstring: constant arrivals at k /
rate from 0; Poisson and gamma gaps drawn from ``random.Random(seed)`` with mean 1 / rate (gamma: shape
burstiness, scale 1 / (rate * burstiness)); shard k of n carries rate / n, constant ones phase-shifted by k /
rate, random ones seeded from sha256("spectrn-shard:<seed>:<k>").
"""

from __future__ import annotations

import hashlib
import itertools
import random
from pathlib import Path

import pytest

from spectrn.errors import ConfigError
from spectrn.loadgen.arrivals import (
    Level,
    arrival_times,
    level_arrivals,
    open_loop_shape,
    read_trace,
    shard_cap,
    shard_seed,
)


def _first(it, n: int) -> list[float]:  # type: ignore[no-untyped-def]
    return list(itertools.islice(it, n))


def _shard_seed(seed: int, shard: int) -> int:
    return int.from_bytes(hashlib.sha256(f"spectrn-shard:{seed}:{shard}".encode()).digest()[:8], "big")


def test_constant_arrivals_start_at_zero_with_equal_gaps() -> None:
    assert _first(arrival_times("constant", 4.0, 1), 4) == [0.0, 0.25, 0.5, 0.75]


def test_poisson_arrivals_are_cumulative_exponential_gaps_at_the_rate() -> None:
    rng = random.Random(7)
    expected = list(itertools.accumulate(rng.expovariate(2.0) for _ in range(5)))
    assert _first(arrival_times("poisson", 2.0, 7), 5) == pytest.approx(expected, rel=1e-12)


def test_gamma_gaps_have_shape_burstiness_and_mean_one_over_rate() -> None:
    rng = random.Random(3)
    expected = list(itertools.accumulate(rng.gammavariate(4.0, 1.0 / (2.0 * 4.0)) for _ in range(5)))
    assert _first(arrival_times("gamma", 2.0, 3, 4.0), 5) == pytest.approx(expected, rel=1e-12)


def test_constant_shards_interleave_into_the_level_schedule() -> None:
    level = Level.open(6.0, "constant")
    # shard 1 of 3: first at 1/6, then every 3/6 = 0.5 s
    assert _first(level_arrivals(level, 5, 3, 1), 3) == pytest.approx([1 / 6, 1 / 6 + 0.5, 1 / 6 + 1.0], rel=1e-12)
    merged = sorted(t for k in range(3) for t in _first(level_arrivals(level, 5, 3, k), 4))
    assert merged == pytest.approx([i / 6 for i in range(12)], rel=1e-12, abs=1e-12)


def test_random_shards_draw_from_their_own_seed_at_their_share_of_the_rate() -> None:
    level = Level.open(4.0, "poisson")
    rng = random.Random(_shard_seed(9, 1))
    expected = list(itertools.accumulate(rng.expovariate(2.0) for _ in range(4)))  # rate 4 / 2 shards
    assert _first(level_arrivals(level, 9, 2, 1), 4) == pytest.approx(expected, rel=1e-12)
    assert shard_seed(9, 0, 1) == 9  # one shard: the run's own seed
    assert shard_seed(9, 0, 2) == _shard_seed(9, 0) != _shard_seed(9, 1) == shard_seed(9, 1, 2)


def test_shard_caps_round_up_so_the_shards_keep_the_whole_cap() -> None:
    assert shard_cap(Level.open(1.0, max_in_flight=10), 3) == 4  # ceil(10 / 3)
    assert shard_cap(Level.open(1.0), 3) == 342  # ceil(1024 / 3)
    assert shard_cap(Level.open(1.0, max_in_flight=2), 5) == 1  # never 0


def test_level_labels_print_the_rate_compactly() -> None:
    assert [Level.open(r).label for r in (0.5, 2.0, 12.5)] == ["r0.5", "r2", "r12.5"]
    assert Level.closed(4).label == "c4" and Level.replay().label == "trace"


def test_open_loop_shape_of_a_gamma_level_on_two_shards() -> None:
    level = Level.open(2.0, "gamma")
    shape = open_loop_shape(level, shards=2, seed=7, duration_s=30.0, trace=None, trace_file="")
    assert shape.model_dump(exclude_none=True) == {
        "kind": "open-loop",
        "arrivals": "gamma",
        "rate_per_s": 2.0,
        "rate_per_s_this_shard": 1.0,
        "seed": 7,
        "burstiness": 1.0,  # no burstiness given: Poisson-like gamma of shape 1
        "max_in_flight": 1024,
        "max_in_flight_this_shard": 512,
        "max_in_flight_set": False,
        "ttft_from": "send",
        "duration_s": 30.0,
    }


def test_open_loop_shape_of_a_capped_trace_replay(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 0}\n{"timestamp": 1.25, "input_tokens": 3}\n{"arrival_s": 3.5}\n')
    rows = read_trace(path)
    shape = open_loop_shape(Level.replay(10), shards=4, seed=1, duration_s=None, trace=rows, trace_file="t.jsonl")
    assert shape.model_dump(exclude_none=True) == {
        "kind": "open-loop",
        "arrivals": "trace",
        "trace": "t.jsonl",
        "trace_rows": 3,
        "trace_span_s": 3.5,
        "max_in_flight": 10,
        "max_in_flight_this_shard": 3,  # ceil(10 / 4)
        "max_in_flight_set": True,
        "ttft_from": "send",
    }


def test_trace_rows_with_equal_times_are_kept_in_order(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("timestamp,input_tokens,output_tokens\n0,5,\n1,,7\n1,1,131072\n")
    rows = read_trace(path)
    assert [(r.offset_s, r.input_tokens, r.output_tokens) for r in rows] == [
        (0.0, 5, None),
        (1.0, None, 7),
        (1.0, 1, 131072),
    ]


@pytest.mark.parametrize(
    ("row", "why"),
    [
        pytest.param('{"timestamp": 1, "input_tokens": 0}', "input_tokens is 0, outside 1..131072", id="no-input"),
        pytest.param(
            '{"timestamp": 1, "output_tokens": 131073}', "output_tokens is 131073, outside 1..131072", id="long-output"
        ),
        pytest.param(
            '{"timestamp": -0.5}', "timestamp is -0.5: arrival times are seconds from the start", id="negative-time"
        ),
    ],
)
def test_trace_rows_out_of_range_are_refused_with_the_field(tmp_path: Path, row: str, why: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(row + "\n")
    with pytest.raises(ConfigError) as err:
        read_trace(path)
    assert f"line 1: {why}" in err.value.message


def test_a_trace_row_earlier_than_the_one_before_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 2}\n{"timestamp": 1.5}\n')
    with pytest.raises(ConfigError) as err:
        read_trace(path)
    assert "line 2: timestamp is 1.5, earlier than the row before (2): sort by arrival" in err.value.message
