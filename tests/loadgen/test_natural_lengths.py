"""Natural output lengths (``bench.ignore_eos`` off) through the real CLI against two simulators: what the records
and the summary say equals the simulators' ground truth (``GET /sim/requests``), and ``ignore_eos`` keeps the
fixed length."""

from __future__ import annotations

import json
import statistics
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from spectrn.analyze.metrics import request_metrics
from spectrn.bench.local import ignore_eos_of
from spectrn.cli.bench_cmd import _bench_flags
from spectrn.cli.common import config_from_cli
from spectrn.cli.main import main
from spectrn.configuration.sources import build_config
from spectrn.loadgen.client import RequestParams, build_body
from spectrn.render.load_job import llmperf_sampling_params, pod_config_yaml, prompts_data, prompts_file_arg
from spectrn.run.folder import RunFolder
from spectrn.run.records import RequestRecord
from spectrn.sim import SimSettings, run_in_thread
from spectrn.sim.lengths import DISTRIBUTIONS, MAX_LENGTH, MIN_LENGTH, natural_length

NATURAL_CAP = 160  # above most of the drawn lengths, below some: both finish reasons occur
FIXED = 64


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[RunFolder, dict[str, list[dict[str, Any]]]]]:
    """Three runs on the same two simulators: a user's prompt file (automatic: natural lengths), the built-in
    sample set (automatic: ignore_eos) and the user's file with --ignore-eos. Nonces keep each run's prompts
    apart in the ground truth."""
    tmp = tmp_path_factory.mktemp("natural")
    sample = yaml.safe_load(Path(__file__).resolve().parents[2].joinpath("prompts", "sample.yaml").read_text())
    user_file = tmp / "mine.yaml"
    user_file.write_text(yaml.safe_dump({"name": "mine", "prompts": sample["prompts"]}))
    base = run_in_thread(SimSettings(time_scale=0.05, profile="upstream"))
    spec = run_in_thread(SimSettings(time_scale=0.05, speculative=True, window=5, profile="upstream"))
    argv = ["bench", "--endpoint", f"baseline={base.base_url}", "--endpoint", f"speculative={spec.base_url}",
            "--draft", "qwen3-1.7b", "--window", "5", "--requests", "8", "--concurrency", "4",
            "--set", "bench.nonce=true", "--set", "bench.warmup=1", "--out-dir", str(tmp), "--no-report"]  # fmt: skip
    plans = {
        "natural": ["--prompts", str(user_file), "--max-tokens", str(NATURAL_CAP)],
        "builtin": ["--prompts", "sample", "--max-tokens", str(FIXED)],
        "forced": ["--prompts", str(user_file), "--max-tokens", str(FIXED), "--ignore-eos"],
    }
    try:
        for rid, extra in plans.items():
            with pytest.raises(SystemExit) as e:
                main([*argv, "--run-id", rid, *extra])
            assert e.value.code == 0, rid
        truth = {}
        for variant, h in (("baseline", base), ("speculative", spec)):
            with urllib.request.urlopen(f"{h.base_url}/sim/requests") as r:
                got = json.load(r)
            truth[variant] = got["requests"] if isinstance(got, dict) else got
    finally:
        base.stop()
        spec.stop()
    return {rid: (RunFolder.open(tmp / rid), truth) for rid in plans}


def _truth_of(rid: str, rec: RequestRecord, truth: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    (t,) = [t for t in truth[rec.variant] if f"[{rid}-{rec.index}] " in t["prompt"]]
    return t


def _records(folder: RunFolder) -> list[RequestRecord]:
    recs = list(folder.records(measured=False))
    assert recs and all(r.ok for r in recs)
    return recs


def test_natural_lengths_equal_the_simulators_ground_truth(runs) -> None:
    folder, truth = runs["natural"]
    assert folder.meta.ignore_eos is False  # a user's prompt file: natural lengths unless asked otherwise
    lengths: dict[str, dict[int, int]] = {"baseline": {}, "speculative": {}}
    for r in _records(folder):
        t = _truth_of("natural", r, truth)
        n = t["emitted_tokens"]
        assert n == t["target_tokens"] and r.finish_reason == t["finish_reason"], r.prompt_id
        assert r.completion_tokens == sum(r.chunk_tokens) == n
        assert r.chunk_tokens == [c["n"] for c in t["chunks"]]
        assert (n < NATURAL_CAP) if r.finish_reason == "stop" else (r.finish_reason == "length" and n == NATURAL_CAP)
        m = request_metrics(r)
        assert m is not None and m.output_tokens == n
        assert m.tpot == pytest.approx((r.e2e - r.ttft) / (n - 1))  # type: ignore[operator]
        if not r.warmup:
            lengths[r.variant][r.index] = n
    measured = list(lengths["baseline"].values())
    assert len(measured) == 8 and len(set(measured)) >= 3, measured  # the lengths really vary
    assert min(measured) < NATURAL_CAP  # and some answers end at EOS
    # the same schedule index ends at the same token on both variants
    assert lengths["baseline"] == lengths["speculative"]


def test_natural_lengths_summary_and_llmperf_files_count_the_real_tokens(runs) -> None:
    folder, truth = runs["natural"]
    summary = folder.require_summary()
    lv = summary.levels[0]
    scale = folder.meta.provenance.time_scale if folder.meta.provenance.time_scale > 0 else 1.0
    recs = [r for r in _records(folder) if not r.warmup]
    for variant in ("baseline", "speculative"):
        mine = [r for r in recs if r.variant == variant]
        true_n = [_truth_of("natural", r, truth)["emitted_tokens"] for r in mine]
        v = lv.variants[variant]
        assert v.output_tokens.n == 8 and v.output_tokens.mean == pytest.approx(statistics.mean(true_n))
        assert v.output_tokens.min == min(true_n) and v.output_tokens.max == max(true_n)
        # throughput: all tokens over the wall time
        assert v.output_tokens_per_s.aggregate is not None
        assert v.output_tokens_per_s.aggregate * v.duration_s == pytest.approx(sum(true_n))
        # TPOT: per request with its own length, then the median over requests
        tpots = [(r.e2e - r.ttft) / scale / (n - 1) for r, n in zip(mine, true_n, strict=True)]  # type: ignore[operator]
        assert v.tpot_s.p50 == pytest.approx(statistics.median(tpots), rel=1e-9)
        (responses,) = (folder.path / variant).glob("*_individual_responses.json")
        rows = json.loads(responses.read_text())
        assert sorted(row["number_output_tokens"] for row in rows) == sorted(true_n)  # measured requests only
    eq = lv.equivalence
    assert eq is not None and eq.compared == 8 and eq.match_rate == 1.0 and eq.basis == "token_ids"


@pytest.mark.parametrize("rid", ["builtin", "forced"])
def test_ignore_eos_gives_exactly_max_tokens(runs, rid: str) -> None:
    folder, truth = runs[rid]
    assert folder.meta.ignore_eos is True  # the built-in set by default, the user's file by --ignore-eos
    for r in _records(folder):
        t = _truth_of(rid, r, truth)
        assert r.completion_tokens == sum(r.chunk_tokens) == t["emitted_tokens"] == t["target_tokens"] == FIXED
        assert r.finish_reason == t["finish_reason"] == "length"
    eq = folder.require_summary().levels[0].equivalence
    assert eq is not None and eq.compared == 8 and eq.match_rate == 1.0


# ---- the choice, without servers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompts", "setting", "expected"),
    [
        ("structured", None, True),
        ("open", None, True),
        ("sample", None, True),
        ("all", None, True),
        ("mine.yaml", None, False),
        ("data/sharegpt.json", None, False),
        ("structured", False, False),
        ("mine.yaml", True, True),
    ],
)
def test_the_automatic_rule(prompts: str, setting: bool | None, expected: bool) -> None:
    cfg = build_config({"bench": {"prompts": prompts, "ignore_eos": setting}}, environ={})
    assert ignore_eos_of(cfg) is expected


def test_the_load_pod_decides_as_a_local_run(tmp_path: Path) -> None:
    """In the cluster even a built-in set is read from a mounted file (``loadgen --prompts-file``); the pod's
    config still names the set, and a user's workload by its mount path, so the choice is the local one."""
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({"name": "mine", "prompts": [{"id": "a", "class": "c", "text": "hello"}]}))
    for prompts, expected in (("structured", True), ("all", True), (str(mine), False)):
        cfg = build_config({"bench": {"prompts": prompts}}, environ={})
        data = prompts_data(cfg)
        assert prompts_file_arg(cfg, data) is not None or prompts == "all"
        pod = build_config(yaml.safe_load(pod_config_yaml(cfg)), environ={})
        assert ignore_eos_of(cfg) is ignore_eos_of(pod) is expected, prompts


@pytest.mark.parametrize(("flag", "expected"), [(True, True), (False, False), (None, None)])
def test_the_flag_becomes_bench_ignore_eos(flag: bool | None, expected: bool | None) -> None:
    flags = _bench_flags(None, None, None, None, None, None, None, None, flag)
    cfg = config_from_cli(None, cluster=False, **flags)
    assert cfg.bench.ignore_eos is expected
    if flag is not None:
        assert cfg.origin_of("bench.ignore_eos") == "flag --ignore-eos/--no-ignore-eos"


def test_request_body_without_ignore_eos_caps_only() -> None:
    body = build_body(RequestParams(model="m", api="chat", max_tokens=300, ignore_eos=False), "x")
    assert "ignore_eos" not in body and "min_tokens" not in body and body["max_completion_tokens"] == 300
    body = build_body(RequestParams(model="m", api="completions", max_tokens=30, ignore_eos=False), "x")
    assert "ignore_eos" not in body and "min_tokens" not in body and body["max_tokens"] == 30


def test_llmperf_sends_ignore_eos_only_when_set() -> None:
    assert llmperf_sampling_params(build_config({}, environ={})) == {"temperature": 0.0}
    on = build_config({"bench": {"ignore_eos": True, "max_tokens": 200}}, environ={})
    assert llmperf_sampling_params(on) == {"temperature": 0.0, "ignore_eos": True, "min_tokens": 200}
    off = build_config({"bench": {"ignore_eos": False}}, environ={})
    assert llmperf_sampling_params(off) == {"temperature": 0.0, "ignore_eos": False}


def test_simulated_lengths_are_a_function_of_the_prompt_and_the_seed() -> None:
    counting, prose = "counting numbers from 1 ", "Tell me about the quiet river at evening."
    assert natural_length(counting, 0) == natural_length(counting, 0)
    many = [natural_length(f"{prose} {i}", 0) for i in range(400)]
    assert all(MIN_LENGTH <= n <= MAX_LENGTH for n in many) and len(set(many)) > 100
    assert statistics.median(many) == pytest.approx(DISTRIBUTIONS["prose"][0], rel=0.15)
    counts = [natural_length(f"{counting}{i}", 0) for i in range(400)]
    assert statistics.median(counts) == pytest.approx(DISTRIBUTIONS["count"][0], rel=0.15)
    assert [natural_length(f"{prose} {i}", 1) for i in range(400)] != many  # the seed matters
