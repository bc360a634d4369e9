"""The sweep grid's remaining edges, pinned by hand: the whole error of a bad cell (its text names the flag that
gave the draft, its hint the rule's fix), the whole refusal of an unsafe sweep id, the shape of a new sweep id,
the time estimate of one stream and of a rate level that the streams bound, and the refusal of spec values that
JSON cannot carry (a sweep's cells and fingerprint go through JSON) (``spectrn.sweep.grid``)."""

from __future__ import annotations

import datetime
import re
from typing import Any

import pytest

from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.sources import build_config
from spectrn.errors import ConfigError
from spectrn.sweep.grid import Cell, cell_config, check_sweep_id, estimate_cell_s, new_sweep_id

CATALOG = "qwen3-0.6b, qwen3-1.7b, qwen3-14b, qwen3-32b, qwen3-4b, qwen3-8b"


def spec(**top: Any) -> SpectrnConfig:
    return build_config({"runtime": "sim", **top}, environ={})


def test_an_unknown_draft_in_a_cell_is_named_by_the_drafts_flag_with_the_catalog_fix() -> None:
    with pytest.raises(ConfigError) as e:
        cell_config(spec(), Cell("nope", 5, "c4"))
    assert e.value.message == (
        f"--drafts: unknown model 'nope'; choose one of {CATALOG} or declare it under custom_models "
        "(config key draft) (sweep cell nope-k5@c4)"
    )
    assert e.value.hint == "set draft to a catalog key or declare 'nope' under custom_models"


def test_a_draft_as_large_as_the_target_is_named_by_the_drafts_flag_with_the_rules_fix() -> None:
    with pytest.raises(ConfigError) as e:
        cell_config(spec(), Cell("qwen3-32b", 7, "r2"))
    assert e.value.message == (
        "--drafts: 'qwen3-32b' (32.8B) is not smaller than target 'qwen3-32b' (32.8B); pick a smaller draft such "
        "as qwen3-1.7b (config key draft) (sweep cell qwen3-32b-k7@r2)"
    )
    assert e.value.hint == "pick a smaller draft such as qwen3-1.7b"


def test_a_window_outside_the_range_in_a_cell_carries_the_window_fix() -> None:
    with pytest.raises(ConfigError) as e:
        cell_config(spec(), Cell("qwen3-1.7b", 33, "c1"))
    assert e.value.message == (
        "--windows: 33 is outside 1..32 (config key num_speculative_tokens) (sweep cell qwen3-1.7b-k33@c1)"
    )
    assert e.value.hint == "use a window between 5 and 15"


def test_an_unsafe_sweep_id_is_refused_with_the_allowed_characters() -> None:
    with pytest.raises(ConfigError) as e:
        check_sweep_id("../x")
    assert (e.value.message, e.value.hint) == (
        "--sweep-id '../x' is not a safe folder name",
        "use letters, digits, '.', '_' and '-' only (at most 64 characters)",
    )


def test_a_new_sweep_id_is_sweep_and_a_utc_stamp() -> None:
    sid = new_sweep_id()
    assert re.fullmatch(r"sweep-\d{8}-\d{6}", sid)
    assert check_sweep_id(sid) == sid


def estimate(level: str, **top: Any) -> float:
    # 30 requests + 3 warm-up = 33; max_tokens 100; TPOT 20 ms: one request decodes in 2 s; overhead 4 s
    cfg = spec(bench={"requests": 30, "warmup": 3, "max_tokens": 100}, **top)
    return estimate_cell_s(cfg, Cell("qwen3-1.7b", 7, level), 0.02)


def test_one_stream_decodes_the_requests_one_after_another() -> None:
    assert estimate("c1") == pytest.approx(70.0)  # 33 rounds x 2 s = 66, + 4


def test_a_rate_level_decodes_on_as_many_streams_as_the_server_batches_not_the_rate() -> None:
    # max_num_seqs 4: ceil(33 / 4) = 9 rounds x 2 = 18 s; arrivals 33 / 2 = 16.5 s + the last one's 2 s = 18.5
    assert estimate("r2") == pytest.approx(22.5)
    # max_num_seqs 1: 33 rounds x 2 = 66 s, over the arrivals' 33 / 20 + 2 = 3.65 s
    assert estimate("r20", max_num_seqs=1) == pytest.approx(70.0)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("neuron_config", {"release": datetime.date(2026, 1, 2)}, "release: 2026-01-02 is a date"),
        ("hf_overrides", {"a": {"b": [1, b"hi"]}}, "a.b[1]: b'hi' is a bytes"),
    ],
)
def test_a_free_form_value_that_json_cannot_carry_is_refused(field: str, value: Any, problem: str) -> None:
    # a YAML date or !!binary used to pass: a run then crashed on it (artifact key, --additional-config) while a
    # sweep's cells quietly carried it as text
    with pytest.raises(ConfigError) as e:
        spec(**{field: value})
    assert e.value.message == f"{field}: {problem}, not text or a number (quote it) (the default)"


@pytest.mark.parametrize(
    ("value", "problem"),
    [({"a": {1: "x"}}, "a: key 1 is not text (quote it)"), ({"x": [float("inf")]}, "x[0]: inf is not a finite number")],
)
def test_a_free_form_key_that_is_not_text_or_an_infinity_is_refused(value: Any, problem: str) -> None:
    with pytest.raises(ConfigError) as e:
        spec(neuron_config=value)
    assert e.value.message == f"neuron_config: {problem} (the default)"


def test_json_values_in_free_form_settings_reach_every_cell_unchanged() -> None:
    extra = {"buckets": [128, 512], "on_device_sampling_config": {"all_greedy": True, "top_k": None}, "x": 0.5}
    cell = cell_config(spec(neuron_config=extra, hf_overrides={"q": "bf16"}), Cell("qwen3-0.6b", 5, "c2"))
    assert cell.neuron_config == {
        "buckets": [128, 512],
        "on_device_sampling_config": {"all_greedy": True, "top_k": None},
        "x": 0.5,
    }
    assert cell.hf_overrides == {"q": "bf16"}
