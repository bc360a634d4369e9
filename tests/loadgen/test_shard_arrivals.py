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
    return sum(
        sum(1 for _ in takewhile(lambda t: t < HORIZON_S, level_arrivals(level, seed, shards))) for _ in range(shards)
    )


@pytest.mark.parametrize("shards", [1, 2, 4, 7])
def test_constant_arrivals_of_all_shards_offer_the_levels_rate(shards: int) -> None:
    level = Level(label="r40", rate=RATE, arrivals="constant")
    # each shard: one arrival every shards / RATE seconds from 0; the count in [0, HORIZON) is exact
    per_shard = math.ceil(HORIZON_S * RATE / shards)
    assert _count(level, shards, seed=0) == shards * per_shard
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
