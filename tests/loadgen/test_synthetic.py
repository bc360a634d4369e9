"""Synthetic workloads: seeded prompts whose lengths follow the named distributions, sent as drawn."""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml

from spectrn.configuration.bench import LengthDistribution, SyntheticWorkload
from spectrn.configuration.sources import build_config
from spectrn.loadgen.synthetic import draw, synthetic_prompts, vocabulary
from spectrn.loadgen.workloads import load_workload


def test_the_same_seed_gives_the_same_workload_and_another_seed_another():
    spec = SyntheticWorkload(prompts=30, input_words=LengthDistribution(dist="normal", mean=50, spread=10))
    a, b, c = synthetic_prompts(spec, 1), synthetic_prompts(spec, 1), synthetic_prompts(spec, 2)
    assert a.prompts == b.prompts and a.prompts != c.prompts
    assert len({p.text for p in a.prompts}) == 30 and {p.prompt_class for p in a.prompts} == {"synthetic"}


def test_input_lengths_follow_the_distribution():
    words = set(vocabulary())
    fixed = synthetic_prompts(SyntheticWorkload(prompts=20, input_words=LengthDistribution(mean=40)), 0)
    assert all(len(p.text.split()) == 40 for p in fixed.prompts)  # the numbered opening is the first word
    assert all(set(p.text.split()[1:]) <= words for p in fixed.prompts)
    uni = LengthDistribution(dist="uniform", mean=100, spread=20)
    lengths = [
        len(p.text.split()) for p in synthetic_prompts(SyntheticWorkload(prompts=400, input_words=uni), 3).prompts
    ]
    assert min(lengths) >= 80 and max(lengths) <= 120 and abs(statistics.mean(lengths) - 100) < 3
    logn = LengthDistribution(dist="lognormal", mean=64, spread=0.6, max=100_000)
    lengths = [
        len(p.text.split()) for p in synthetic_prompts(SyntheticWorkload(prompts=600, input_words=logn), 4).prompts
    ]
    assert abs(statistics.median(lengths) / 64 - 1) < 0.1
    # the log-lengths' spread is sigma (within sampling error for 600 draws)
    assert abs(statistics.pstdev(math.log(n) for n in lengths) - 0.6) < 0.06


def test_draws_are_clipped_and_rounded():
    rng = random.Random(0)
    d = LengthDistribution(dist="normal", mean=10, spread=50, min=5, max=12)
    values = [draw(d, rng) for _ in range(500)]
    assert set(values) <= set(range(5, 13)) and {5, 12} <= set(values)


@pytest.mark.parametrize(
    ("setting", "needle"),
    [
        ({"dist": "uniform", "mean": 10}, "needs a spread above 0"),
        ({"mean": 10, "min": 20, "max": 5}, "min 20 is above max 5"),
        ({"mean": 0}, "greater than 0"),
    ],
)
def test_a_bad_distribution_names_the_field(setting: dict[str, Any], needle: str):
    from spectrn.errors import ConfigError

    with pytest.raises(ConfigError) as e:
        build_config({"bench": {"workload": {"synthetic": {"input_words": setting}}}}, environ={})
    assert "bench.workload.synthetic.input_words" in e.value.message and needle in e.value.message


def test_synthetic_runs_end_to_end_with_the_drawn_output_lengths(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, _, err = cli("bench", "--local", "--prompts", "synthetic", "--set", "bench.workload.synthetic.prompts=10",
                       "--set", "bench.workload.synthetic.output_tokens={dist: uniform, mean: 20, spread: 10}",
                       "--requests", "10", "--concurrency", "2", "--time-scale", "0.05", "--max-tokens", "64",
                       "--out-dir", str(out), "--run-id", "s", "--no-report")  # fmt: skip
    assert code == 0, err
    assert "bench.prompts synthetic: random word sequences" in " ".join(err.split())
    cfg = build_config({"bench": {"prompts": "synthetic", "workload": {"synthetic": {
        "prompts": 10, "output_tokens": {"dist": "uniform", "mean": 20, "spread": 10}}}}}, environ={})  # fmt: skip
    made, _ = load_workload("synthetic", cfg.bench.workload, seed=cfg.bench.seed)
    want = {p.id: p.output_tokens for p in made.prompts}
    records = [json.loads(line) for line in (out / "s" / "requests.jsonl").read_text().splitlines()]
    assert records and all(r["completion_tokens"] == want[r["prompt_id"]] for r in records)  # ignore_eos: auto on
    assert len({r["completion_tokens"] for r in records}) > 3


def test_the_load_pod_gets_the_same_synthetic_prompts_and_ignore_eos(cli: Any, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("render", "--job", "--set", "bench.prompts=synthetic", "--set",
                         "bench.workload.synthetic.prompts=5", "--set", "spectrn_image_preloaded=true",
                         "--set", "s3.bucket=my-models")  # fmt: skip
    assert code == 0, err
    docs = [d for d in yaml.safe_load_all(out) if d]
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "user-prompts.yaml" in d.get("data", {})]
    shipped = yaml.safe_load(cm["data"]["user-prompts.yaml"])
    made, _ = load_workload("synthetic", build_config({"bench": {"workload": {"synthetic": {"prompts": 5}}}},
                                                      environ={}).bench.workload)  # fmt: skip
    assert [p["text"] for p in shipped["prompts"]] == [p.text for p in made.prompts]
    (config_cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "spectrn.yaml" in d.get("data", {})]
    assert yaml.safe_load(config_cm["data"]["spectrn.yaml"])["bench"]["ignore_eos"] is True
