"""Bench settings at their bounds, with the message a user reads (``spectrn.configuration.bench``)."""

from __future__ import annotations

from typing import Any

import pytest

from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.sources import build_config
from spectrn.errors import ConfigError


def cfg(**overrides: Any) -> SpectrnConfig:
    return build_config({}, overrides, environ={})


def refused(**overrides: Any) -> str:
    with pytest.raises(ConfigError) as e:
        build_config({}, overrides, environ={})
    return e.value.message


def test_concurrency_levels_are_1_to_4096() -> None:
    assert cfg(**{"bench.concurrency": [1, 4096]}).bench.concurrency == [1, 4096]
    assert refused(**{"bench.concurrency": [4097]}) == (
        "bench.concurrency: level 4097 outside 1..4096 (from --set bench.concurrency)"
    )
    assert (
        refused(**{"bench.concurrency": [0]})
        == "bench.concurrency: level 0 outside 1..4096 (from --set bench.concurrency)"
    )


def test_a_repeated_concurrency_level_is_refused_like_a_repeated_rate() -> None:
    # both would be labelled c4: the second run's results would overwrite the first's
    assert refused(**{"bench.concurrency": [4, 8, 4]}) == (
        "bench.concurrency: levels [4, 8, 4] repeat a level (from --set bench.concurrency)"
    )
    assert refused(**{"bench.request_rate": [1.0, 1]}) == (
        "bench.request_rate: rates [1.0, 1.0] repeat a level (from --set bench.request_rate)"
    )


def test_rates_are_above_0_and_at_most_a_million_and_a_comma_list_is_a_list() -> None:
    assert cfg(**{"bench.request_rate": "0.5, 2"}).bench.request_rate == [0.5, 2.0]
    assert cfg(**{"bench.request_rate": 3}).bench.request_rate == [3.0]
    assert cfg(**{"bench.request_rate": [1_000_000]}).bench.request_rate == [1_000_000.0]
    assert refused(**{"bench.request_rate": [0]}) == (
        "bench.request_rate: rate 0 is outside (0, 1000000] req/s (from --set bench.request_rate)"
    )
    assert refused(**{"bench.request_rate": [1_000_001]}) == (
        "bench.request_rate: rate 1e+06 is outside (0, 1000000] req/s (from --set bench.request_rate)"
    )


def test_class_weights_must_be_positive() -> None:
    assert refused(**{"bench.workload.class_weights": {"a": 0}}) == (
        "bench.workload.class_weights: 0.0 for class 'a' is not a positive weight (from --set "
        "bench.workload.class_weights)"
    )
    assert cfg(**{"bench.workload.class_weights": {"a": 0.001}}).bench.workload.class_weights == {"a": 0.001}


def test_length_bounds_may_meet_but_not_cross() -> None:
    w = cfg(**{"bench.workload.min_chars": 5, "bench.workload.max_chars": 5}).bench.workload
    assert (w.min_chars, w.max_chars) == (5, 5)
    # both were set by --set: the message names where each came from, not "the default"
    assert refused(**{"bench.workload.min_chars": 6, "bench.workload.max_chars": 5}) == (
        "bench.workload: min_chars 6 is above max_chars 5 (bench.workload.min_chars from --set "
        "bench.workload.min_chars; bench.workload.max_chars from --set bench.workload.max_chars)"
    )
    words = {"dist": "fixed", "mean": 10, "min": 7, "max": 7}
    assert cfg(**{"bench.workload.synthetic.input_words": words}).bench.workload.synthetic.input_words.min == 7
    assert refused(**{"bench.workload.synthetic.input_words": {**words, "min": 8}}) == (
        "bench.workload.synthetic.input_words: min 8 is above max 7 (from --set bench.workload.synthetic.input_words)"
    )
    spread = {"dist": "uniform", "mean": 10, "spread": 0}
    assert refused(**{"bench.workload.synthetic.input_words": spread}) == (
        "bench.workload.synthetic.input_words: dist uniform needs a spread above 0 (or use dist: fixed) (from --set "
        "bench.workload.synthetic.input_words)"
    )
