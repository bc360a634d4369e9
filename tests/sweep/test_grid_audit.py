"""The sweep grid pinned value by value: cell ids and order, each cell's spec, the resume fingerprint, the flag
lists, sweep ids, time estimates, strict-JSON manifests and pooled equivalence (``spectrn.sweep.grid``, ``cells``,
``manifest``). Expected values are written out by hand."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace
from typing import Any, cast

import pytest

from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.sources import build_config
from spectrn.errors import ConfigError
from spectrn.run.summary import Divergence, Equivalence
from spectrn.sweep.cells import aggregate_equivalence
from spectrn.sweep.grid import (
    CELL_OVERHEAD_S,
    Cell,
    cell_config,
    check_sweep_id,
    estimate_cell_s,
    fingerprint,
    grid,
    level_label,
    levels_of,
    parse_list,
)
from spectrn.sweep.manifest import finite
from spectrn.sweep.recommend import CellInput


def cfg(**bench: Any) -> SpectrnConfig:
    return build_config({"runtime": "sim", "bench": bench}, environ={})


def test_a_cell_names_its_setup_and_level_and_reads_its_load() -> None:
    c = Cell("qwen3-1.7b", 7, "c16")
    assert (c.key, c.config_dir, c.load) == ("qwen3-1.7b-k7@c16", "qwen3-1.7b-k7", ("concurrency", 16))
    r = Cell("qwen3-0.6b", 5, "r2.5")
    assert (r.key, r.load) == ("qwen3-0.6b-k5@r2.5", ("rate", 2.5))


@pytest.mark.parametrize(
    ("kind", "value", "label"),
    [("rate", 2.0, "r2"), ("rate", 0.5, "r0.5"), ("concurrency", 16.0, "c16"), ("concurrency", 1, "c1")],
)
def test_level_labels(kind: str, value: float, label: str) -> None:
    assert level_label(kind, value) == label


def test_levels_come_from_the_rates_when_given_else_the_concurrencies() -> None:
    assert levels_of(cfg(concurrency=[1, 8, 32])) == ["c1", "c8", "c32"]
    assert levels_of(cfg(request_rate=[0.5, 4])) == ["r0.5", "r4"]


def test_the_grid_runs_every_level_of_one_setup_in_a_row() -> None:
    cells = grid(["qwen3-0.6b", "qwen3-1.7b"], [5, 9], ["c1", "c8"])
    assert [c.key for c in cells] == [
        "qwen3-0.6b-k5@c1", "qwen3-0.6b-k5@c8", "qwen3-0.6b-k9@c1", "qwen3-0.6b-k9@c8",
        "qwen3-1.7b-k5@c1", "qwen3-1.7b-k5@c8", "qwen3-1.7b-k9@c1", "qwen3-1.7b-k9@c8",
    ]  # fmt: skip


def test_a_cell_spec_carries_its_draft_window_and_one_load_level() -> None:
    base = cfg(concurrency=[4, 8])
    c = cell_config(base, Cell("qwen3-0.6b", 9, "c16"))
    assert (c.draft, c.num_speculative_tokens, c.bench.concurrency, c.bench.request_rate) == (
        "qwen3-0.6b",
        9,
        [16],
        None,
    )
    r = cell_config(base, Cell("qwen3-0.6b", 3, "r2.5"))
    assert (r.num_speculative_tokens, r.bench.request_rate) == (3, [2.5])
    # the rest of the spec is the sweep's: the fingerprint is unchanged
    assert fingerprint(c) == fingerprint(base) == fingerprint(r)
    from_rates = cell_config(cfg(request_rate=[1.0]), Cell("qwen3-1.7b", 7, "c2"))
    assert (from_rates.bench.request_rate, from_rates.bench.concurrency) == (None, [2])


def test_a_bad_cell_names_the_flag_and_the_cell() -> None:
    with pytest.raises(ConfigError) as e:
        cell_config(cfg(), Cell("qwen3-1.7b", 0, "c4"))
    assert e.value.message == (
        "--windows: 0 is outside 1..32 (config key num_speculative_tokens) (sweep cell qwen3-1.7b-k0@c4)"
    )


def test_the_fingerprint_hashes_everything_but_the_grid_axes() -> None:
    base = cfg(concurrency=[4])
    data = base.model_dump(mode="json")
    del data["draft"], data["num_speculative_tokens"], data["bench"]["concurrency"], data["bench"]["request_rate"]
    assert fingerprint(base) == hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
    moved = build_config({"runtime": "sim", "draft": "qwen3-0.6b", "num_speculative_tokens": 3,
                          "bench": {"concurrency": [1, 2], "request_rate": [3.0]}}, environ={})  # fmt: skip
    assert fingerprint(moved) == fingerprint(base)
    assert fingerprint(cfg(max_tokens=100)) != fingerprint(base)


def test_flag_lists_skip_blanks_and_refuse_bad_empty_or_repeated_values() -> None:
    assert parse_list(None, "--windows", int) is None
    assert parse_list(" 5, 7,,10 ", "--windows", int) == [5, 7, 10]
    with pytest.raises(ConfigError) as e:
        parse_list("5,x", "--windows", int)
    assert (e.value.message, e.value.hint) == ("--windows '5,x': 'x' is not valid", "e.g. --windows 5,7,10")
    with pytest.raises(ConfigError) as e:
        parse_list(" , ", "--drafts", str)
    assert (e.value.message, e.value.hint) == ("--drafts is empty", "give a comma-separated list, e.g. --drafts 5,7")
    with pytest.raises(ConfigError) as e:
        parse_list("5,7,5", "--windows", int)
    assert (e.value.message, e.value.hint) == ("--windows '5,7,5' lists a value twice", "list each value once")


@pytest.mark.parametrize("ok", ["a", "sweep-1.b_c", "9" + "x" * 63])
def test_safe_sweep_ids_pass(ok: str) -> None:
    assert check_sweep_id(ok) == ok


@pytest.mark.parametrize("bad", ["", "-a", ".a", "a..b", "a/b", "a b", "9" + "x" * 64])
def test_unsafe_sweep_ids_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="is not a safe folder name"):
        check_sweep_id(bad)


def test_a_cell_estimate_is_its_decode_time_over_the_parallel_streams_plus_overhead() -> None:
    # 30 requests + 3 warm-up = 33; max_tokens 100; TPOT 20 ms; max_num_seqs 4 (the default); overhead 4 s
    c = cfg(requests=30, warmup=3, max_tokens=100)
    assert c.max_num_seqs == 4 and CELL_OVERHEAD_S == 4.0

    def est(level: str) -> float:
        return estimate_cell_s(c, Cell("qwen3-1.7b", 7, level), 0.02)

    assert est("c2") == pytest.approx(38.0)  # ceil(33 / 2) = 17 rounds x 100 x 0.02 = 34, + 4
    assert est("c8") == pytest.approx(22.0)  # min(8, 4) = 4 streams: ceil(33 / 4) = 9 x 2 = 18, + 4
    assert est("r0.5") == pytest.approx(72.0)  # arrivals take 33 / 0.5 = 66 s, + 100 x 0.02 = 68 > 18, + 4
    assert est("r20") == pytest.approx(22.0)  # 33 / 20 + 2 = 3.65 < 18: decode-bound, + 4


def test_manifest_numbers_are_strict_json() -> None:
    got = finite({"a": float("nan"), "b": [1.5, float("inf"), (2.0, -float("inf"))], "c": {"d": 3}, "e": "x"})
    assert got == {"a": None, "b": [1.5, None, [2.0, None]], "c": {"d": 3}, "e": "x"}


def test_equivalence_pools_every_cell_and_names_each_divergence() -> None:
    def cell(draft: str, window: int, eq: Equivalence | None) -> CellInput:
        return cast(CellInput, SimpleNamespace(draft=draft, window=window, view=SimpleNamespace(equivalence=eq)))

    div = Divergence(level="c4", index=3, prompt_id="p3", first_divergence=17)
    cells = [
        cell("qwen3-0.6b", 5, Equivalence(compared=10, matched=9, divergences=[div])),
        cell("qwen3-1.7b", 7, None),  # not compared: counts for nothing
        cell("qwen3-1.7b", 9, Equivalence(compared=30, matched=30)),
    ]
    assert aggregate_equivalence(cells) == {
        "compared": 40,
        "matched": 39,
        "match_rate": 39 / 40,
        "divergences": [
            {"draft": "qwen3-0.6b", "window": 5, "level": "c4", "index": 3, "prompt_id": "p3", "first_divergence": 17}
        ],
    }
    assert aggregate_equivalence([]) == {"compared": 0, "matched": 0, "match_rate": None, "divergences": []}
