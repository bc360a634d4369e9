"""The load Job's renderer, read as the cluster and the user read it: the whole text of every refusal
(unknown engine, negative hold, no endpoint, a malformed endpoint), the load pod's whole argument list (shards
from two pods, a one-second hold, prompts given in place of the packaged sets), the user's workload as the
prompts ConfigMap carries it (key order, text beyond ASCII, the bench seed), what the pod's config keeps of the
automatic ``ignore_eos``, a trace's token columns, and the 1 MB ConfigMap limit at its edge, named whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from doubles.render_support import FIXED_PROMPTS
from spectrn.errors import ConfigError
from spectrn.render import load_job

BASELINE = "baseline=http://qwen-vllm.spectrn.svc.cluster.local:8000"
SPECULATIVE = "speculative=http://qwen-sd-vllm.spectrn.svc.cluster.local:8000"


def _refusal(cfg: Any, *args: Any, **kw: Any) -> str:
    with pytest.raises(ConfigError) as info:
        load_job.render_load_job(cfg, *args, **kw)
    assert info.value.exit_code == 2
    return str(info.value)


def _load_args(objs: list[dict[str, Any]]) -> list[str]:
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (c,) = job["spec"]["template"]["spec"]["containers"]
    return c["args"]


# ---- refusals, whole ------------------------------------------------------------------------------


def test_an_unknown_engine_is_refused_with_the_engines_to_choose_from(make_cfg: Any) -> None:
    text = _refusal(make_cfg(), "r1", "locust", prompts=FIXED_PROMPTS)
    assert text == "engine 'locust' is not known (fix: choose one of spectrn, llmperf)"


def test_a_negative_hold_is_refused_with_what_to_give(make_cfg: Any) -> None:
    text = _refusal(make_cfg(), "r1", prompts=FIXED_PROMPTS, hold_s=-1)
    assert text == "hold time -1 is negative (fix: give 0 (no hold) or a number of seconds)"


@pytest.mark.parametrize("kw", [{"endpoints": {}}, {"variants": ()}], ids=["no-endpoints", "no-variants"])
def test_a_load_job_with_nothing_to_target_is_refused(make_cfg: Any, kw: dict[str, Any]) -> None:
    text = _refusal(make_cfg(), "r1", prompts=FIXED_PROMPTS, **kw)
    assert text == "the load Job has no endpoint to target (fix: render at least one variant)"


@pytest.mark.parametrize(
    ("variant", "url"),
    [("baseline", "ftp://qwen-vllm:8000"), ("Baseline", "http://qwen-vllm:8000"), ("base line", "http://h :1")],
    ids=["bad-url", "bad-name", "both-bad"],
)
def test_an_endpoint_bad_in_its_name_or_its_url_is_refused_whole(make_cfg: Any, variant: str, url: str) -> None:
    text = _refusal(make_cfg(), "r1", endpoints={variant: url}, prompts=FIXED_PROMPTS)
    assert text == f"endpoint {variant}={url} is malformed (fix: use NAME=http://host:port)"


# ---- the load pod's arguments -----------------------------------------------------------------------


def test_two_load_pods_each_take_a_shard_and_a_one_second_hold_is_passed_on(make_cfg: Any) -> None:
    cfg = make_cfg({"bench": {"loadgen_pods": 2, "prompts": "structured"}})
    objs = load_job.render_load_job(cfg, "r3", prompts=FIXED_PROMPTS, hold_s=1)
    assert _load_args(objs) == [
        "loadgen",
        "--endpoint",
        BASELINE,
        "--endpoint",
        SPECULATIVE,
        "--config",
        "/etc/spectrn/spectrn.yaml",
        "--prompts-file",
        "/etc/spectrn/prompts/structured.yaml",
        "--run-id",
        "r3",
        "--out",
        "/results/r3",
        "--shard-index",
        "$(JOB_COMPLETION_INDEX)",
        "--shards",
        "2",
        "--hold-until-collected",
        "1",
        "--quiet",
    ]


def test_one_load_pod_takes_no_shard_and_no_hold_when_told_zero(make_cfg: Any) -> None:
    objs = load_job.render_load_job(make_cfg(), "r4", prompts=FIXED_PROMPTS, hold_s=0)
    assert _load_args(objs) == [
        "loadgen",
        "--endpoint",
        BASELINE,
        "--endpoint",
        SPECULATIVE,
        "--config",
        "/etc/spectrn/spectrn.yaml",
        "--prompts-file",
        "/etc/spectrn/prompts/structured.yaml",
        "--run-id",
        "r4",
        "--out",
        "/results/r4",
        "--quiet",
    ]


def test_given_prompts_replace_the_packaged_sets_as_the_file_the_pod_reads(make_cfg: Any) -> None:
    given = {"user-prompts.yaml": "name: mine\nprompts:\n  - id: a\n    class: c\n    text: hello\n"}
    objs = load_job.render_load_job(make_cfg({"bench": {"prompts": "structured"}}), "r5", prompts=given)
    assert _load_args(objs) == [
        "loadgen",
        "--endpoint",
        BASELINE,
        "--endpoint",
        SPECULATIVE,
        "--config",
        "/etc/spectrn/spectrn.yaml",
        "--prompts-file",
        "/etc/spectrn/prompts/user-prompts.yaml",
        "--run-id",
        "r5",
        "--out",
        "/results/r5",
        "--hold-until-collected",
        "3600",
        "--quiet",
    ]


def test_a_combined_set_is_no_file_the_pod_is_told_to_read(make_cfg: Any) -> None:
    # "all" names no file of the prompt data: the pod's loader assembles it from the mounted sets
    objs = load_job.render_load_job(make_cfg({"bench": {"prompts": "all"}}), "r6", prompts=FIXED_PROMPTS)
    assert _load_args(objs) == [
        "loadgen",
        "--endpoint",
        BASELINE,
        "--endpoint",
        SPECULATIVE,
        "--config",
        "/etc/spectrn/spectrn.yaml",
        "--run-id",
        "r6",
        "--out",
        "/results/r6",
        "--hold-until-collected",
        "3600",
        "--quiet",
    ]


# ---- the user's workload in the prompts ConfigMap ------------------------------------------------------


def test_a_yaml_prompt_set_travels_in_its_own_key_order_with_its_text_as_written(make_cfg: Any, tmp_path: Path) -> None:
    src = tmp_path / "mine.yaml"
    src.write_text(
        'name: mine\nprompts:\n  - id: q1\n    class: chat\n    text: "Grüße, 世界"\n'
        "  - id: q0\n    class: a\n    text: plain\n    output_tokens: 7\n",
        encoding="utf-8",
    )
    data = load_job.prompts_data(make_cfg({"bench": {"prompts": str(src)}}))
    assert data["user-prompts.yaml"] == (
        "name: mine\n"
        "prompts:\n"
        "- id: q1\n"
        "  class: chat\n"
        "  text: Grüße, 世界\n"
        "- id: q0\n"
        "  class: a\n"
        "  text: plain\n"
        "  output_tokens: 7\n"
    )


def test_the_workload_is_shaped_with_the_bench_seed(make_cfg: Any) -> None:
    from spectrn.loadgen.workloads import load_workload

    bench = {"prompts": "synthetic", "seed": 11, "workload": {"synthetic": {"prompts": 3}}}
    cfg = make_cfg({"bench": bench})
    shipped = yaml.safe_load(load_job.prompts_data(cfg)["user-prompts.yaml"])
    seeded, _ = load_workload("synthetic", cfg.bench.workload, seed=11)
    unseeded, _ = load_workload("synthetic", cfg.bench.workload, seed=0)
    texts = [p["text"] for p in shipped["prompts"]]
    assert texts == [p.text for p in seeded.prompts]
    assert texts != [p.text for p in unseeded.prompts]  # the seed shows in the text


def test_a_synthetic_workload_keeps_ignore_eos_on_in_the_pods_config(make_cfg: Any) -> None:
    # the pod's config names the mount path, which the automatic rule reads as a user's file (off): the
    # rendered config carries the value this workload was given here, a synthetic one's (on)
    pod = yaml.safe_load(load_job.pod_config_yaml(make_cfg({"bench": {"prompts": "synthetic"}})))
    assert pod["bench"]["prompts"] == "/etc/spectrn/prompts/user-prompts.yaml"
    assert pod["bench"]["ignore_eos"] is True
    assert [k for k in pod["bench"] if "eos" in k.lower()] == ["ignore_eos"]


def test_a_trace_travels_with_its_input_and_output_tokens(make_cfg: Any, tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"timestamp": 0.5, "input_tokens": 30, "output_tokens": 12}\n{"timestamp": 2, "input_tokens": 8}\n'
    )
    data = load_job.prompts_data(make_cfg({"bench": {"trace": str(trace)}}))
    assert data["trace.jsonl"] == (
        '{"arrival_s": 0.5, "input_tokens": 30, "output_tokens": 12}\n{"arrival_s": 2.0, "input_tokens": 8}\n'
    )


def test_a_missing_trace_is_named_with_where_it_was_set(make_cfg: Any, tmp_path: Path) -> None:
    cfg = make_cfg(bench__trace=str(tmp_path / "gone.csv"))
    with pytest.raises(ConfigError) as info:
        load_job.prompts_data(cfg)
    assert str(info.value) == (
        f"bench.trace (from --set bench.trace): trace file {tmp_path / 'gone.csv'} does not exist (fix: check the path)"
    )


def test_a_missing_workload_file_is_named_with_where_it_was_set(make_cfg: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_job.prompts_data(make_cfg(bench__prompts=str(tmp_path / "gone.jsonl")))
    assert str(info.value) == (
        f"bench.prompts file (from --set bench.prompts) {tmp_path / 'gone.jsonl'} does not exist (fix: check the path)"
    )


def test_the_packaged_prompt_sets_are_ascii_so_any_locale_reads_them_alike() -> None:
    # why reading them as UTF-8 or in the locale's encoding cannot differ (docs/mutation.md, equivalent mutants)
    from spectrn.paths import data_dir

    files = sorted(data_dir("prompts").glob("*.yaml"))
    assert [p.name for p in files] == ["open.yaml", "sample.yaml", "structured.yaml"]
    assert all(p.read_bytes().isascii() for p in files)


# ---- the 1 MB ConfigMap limit -------------------------------------------------------------------------


def _packaged(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, size: int) -> None:
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "big.yaml").write_text("#" * size)
    monkeypatch.setattr("spectrn.paths.data_dir", lambda name: folder)


HINT = (
    "(fix: sample fewer prompts (bench.workload.sample) or filter them (bench.workload.max_chars); shorten bench.trace)"
)


def test_prompt_sets_of_exactly_one_megabyte_fit(
    make_cfg: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _packaged(monkeypatch, tmp_path, 1_000_000)
    assert load_job.prompts_data(make_cfg()) == {"big.yaml": "#" * 1_000_000}


def test_prompt_sets_one_byte_over_a_megabyte_are_refused_whole(
    make_cfg: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _packaged(monkeypatch, tmp_path, 1_000_001)
    with pytest.raises(ConfigError) as info:
        load_job.prompts_data(make_cfg())
    assert str(info.value) == (
        f"bench.prompts: the prompt sets total 1000001 bytes, over the 1 MB ConfigMap limit {HINT}"
    )


def test_prompt_sets_and_a_trace_over_a_megabyte_name_the_trace_too(
    make_cfg: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _packaged(monkeypatch, tmp_path, 999_990)
    trace = tmp_path / "t.csv"
    trace.write_text("timestamp\n0\n")
    cfg = make_cfg({"bench": {"trace": str(trace)}})
    with pytest.raises(ConfigError) as info:
        load_job.prompts_data(cfg)
    # 999990 bytes of sets and the trace's one row, '{"arrival_s": 0.0}' and a newline: 19 bytes
    assert str(info.value) == (
        f"bench.prompts: the prompt sets and the trace total 1000009 bytes, over the 1 MB ConfigMap limit {HINT}"
    )
