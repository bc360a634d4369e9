"""Sharded open-loop levels measured for their arrival rate: the load pods of an Indexed Job each generate
their own arrivals (``level_arrivals(level, seed, shards)``), and together they must offer the level's rate,
not the rate per pod times the number of pods, nor a fraction of it."""

from __future__ import annotations

import math
from itertools import takewhile

import pytest

from spectrn.loadgen.arrivals import Level, level_arrivals, shard_rate

RATE = 40.0  # requests per second, the whole level
HORIZON_S = 100.0  # 4000 arrivals expected: a Poisson count's standard deviation is about 63


def _count(level: Level, shards: int, seed: int) -> int:
    # every shard is one pod; the seed is the run's (as runner.py passes plan.seed)
    return len(_merged(level, shards, seed))


def _merged(level: Level, shards: int, seed: int) -> list[float]:
    """Every shard's arrivals in [0, HORIZON), merged in time order: what the server sees."""
    out: list[float] = []
    for shard in range(shards):
        out += takewhile(lambda t: t < HORIZON_S, level_arrivals(level, seed, shards, shard))
    return sorted(out)


@pytest.mark.parametrize("shards", [1, 2, 4, 7])
def test_constant_arrivals_of_all_shards_offer_the_levels_rate(shards: int) -> None:
    level = Level(label="r40", rate=RATE, arrivals="constant")
    # merged, the shards send one request every 1 / RATE seconds from 0: the count in [0, HORIZON) is exact
    assert _count(level, shards, seed=0) == math.ceil(HORIZON_S * RATE)
    assert shard_rate(level, shards) == pytest.approx(RATE / shards)


@pytest.mark.parametrize("shards", [1, 2, 4])
@pytest.mark.parametrize("kind", ["poisson", "gamma"])
def test_random_arrivals_of_all_shards_offer_the_levels_rate(shards: int, kind: str) -> None:
    level = Level(label="r40", rate=RATE, arrivals=kind, burstiness=0.5 if kind == "gamma" else None)
    expected = RATE * HORIZON_S
    for seed in (0, 1, 2):
        got = _count(level, shards, seed)
        # within 5 standard deviations of a Poisson count (gamma with shape 0.5 is burstier: twice the variance)
        sd = math.sqrt(expected * (2.0 if kind == "gamma" else 1.0))
        assert abs(got - expected) < 5 * sd, (kind, shards, seed, got)


@pytest.mark.parametrize("shards", [2, 4, 7])
def test_constant_shards_interleave_into_one_evenly_spaced_stream(shards: int) -> None:
    """Not N pods sending together every N / rate seconds: merged, every gap is the level's 1 / rate."""
    times = _merged(Level(label="r40", rate=RATE, arrivals="constant"), shards, seed=0)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) == pytest.approx(1 / RATE) and max(gaps) == pytest.approx(1 / RATE)


@pytest.mark.parametrize("shards", [2, 4])
def test_poisson_shards_merge_into_a_poisson_stream_not_synchronized_bursts(shards: int) -> None:
    """Superposed independent Poisson streams are Poisson at the summed rate: merged gaps are exponential with
    mean 1 / rate (coefficient of variation 1, no two arrivals at one instant). Shards drawing the same
    gaps would send bursts of ``shards`` at one instant: (shards - 1) / shards of the gaps exactly 0."""
    for seed in (0, 1, 2):
        times = _merged(Level(label="r40", rate=RATE, arrivals="poisson"), shards, seed)
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        assert sum(g == 0 for g in gaps) == 0
        mean = sum(gaps) / len(gaps)
        cv = math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps)) / mean
        assert mean == pytest.approx(1 / RATE, rel=0.1)
        assert 0.9 < cv < 1.1, (shards, seed, cv)  # 4000 gaps: the CV's sampling error is about 0.02
