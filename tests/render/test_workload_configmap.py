"""The user's workload travels with the in-cluster load Job: read, filtered, sampled and prefixed at render time
into spectrn's own prompt-set YAML, so the pod sends exactly the prompts a local run would, in any source format."""

from __future__ import annotations

import json

import yaml

from spectrn.configuration.sources import build_config
from spectrn.loadgen.prompts import load_prompt_set
from spectrn.loadgen.workloads import load_workload

PRELOADED = ("--set", "spectrn_image_preloaded=true", "--set", "s3.bucket=my-models")


def _write_jsonl(path, n=40):
    rows = [{"id": f"q{i}", "prompt": f"question number {i} about topic {i % 7}", "category": ["math", "code"][i % 2]}
            for i in range(n)]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_jsonl_workload_reaches_the_load_pod_as_the_shaped_prompt_set(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write_jsonl(tmp_path / "mine.jsonl")
    sets = ("--set", "bench.workload.sample=10", "--set", 'bench.workload.prefix="Answer briefly. "')
    code, out, err = cli("render", "--job", "--set", "bench.prompts=mine.jsonl", *sets, *PRELOADED)
    assert code == 0, err
    docs = [d for d in yaml.safe_load_all(out) if d]
    (prompts_cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "user-prompts.yaml" in d.get("data", {})]
    shipped = tmp_path / "shipped.yaml"
    shipped.write_text(prompts_cm["data"]["user-prompts.yaml"])
    pod_set = load_prompt_set(str(shipped))
    cfg = build_config({"bench": {"prompts": "mine.jsonl", "workload": {"sample": 10, "prefix": "Answer briefly. "}}},
                       environ={})  # fmt: skip
    local_set, _ = load_workload("mine.jsonl", cfg.bench.workload, seed=cfg.bench.seed)
    assert pod_set.prompts == local_set.prompts and len(pod_set.prompts) == 10
    assert all(p.text.startswith("Answer briefly. ") and p.text.count("Answer briefly.") == 1 for p in pod_set.prompts)
    # the pod's config reads the mounted set as it is: no second sampling, no second prefix
    (config_cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "spectrn.yaml" in d.get("data", {})]
    pod_cfg = yaml.safe_load(config_cm["data"]["spectrn.yaml"])
    assert pod_cfg["bench"]["prompts"].endswith("/user-prompts.yaml")
    assert pod_cfg["bench"]["workload"]["sample"] is None and pod_cfg["bench"]["workload"]["prefix"] == ""
    assert pod_cfg["bench"]["workload"]["format"] == "yaml"


def test_a_workload_too_large_for_a_configmap_names_the_fix(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [{"prompt": f"{i} " + "word " * 400, "category": "long"} for i in range(800)]
    (tmp_path / "big.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = cli("render", "--job", "--set", "bench.prompts=big.jsonl", *PRELOADED)
    assert code == 2 and out == ""
    assert "over the 1 MB ConfigMap limit" in err and "bench.workload.sample" in " ".join(err.split())


def test_a_trace_travels_with_the_load_job(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("timestamp,output_tokens,other\n0.0,12,x\n0.25,,y\n1.5,40,z\n")
    code, out, err = cli("render", "--job", "--set", "bench.trace=t.csv", "--set", "bench.concurrency=null",
                         *PRELOADED)  # fmt: skip
    assert code == 0, err
    docs = [d for d in yaml.safe_load_all(out) if d]
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "trace.jsonl" in d.get("data", {})]
    rows = [json.loads(line) for line in cm["data"]["trace.jsonl"].splitlines()]
    assert rows == [
        {"arrival_s": 0.0, "output_tokens": 12},
        {"arrival_s": 0.25},
        {"arrival_s": 1.5, "output_tokens": 40},
    ]
    (config_cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "spectrn.yaml" in d.get("data", {})]
    assert yaml.safe_load(config_cm["data"]["spectrn.yaml"])["bench"]["trace"].endswith("/trace.jsonl")
    # the pod reads the shipped trace as the same rows
    from spectrn.loadgen.arrivals import read_trace

    shipped = tmp_path / "shipped.jsonl"
    shipped.write_text(cm["data"]["trace.jsonl"])
    assert read_trace(shipped) == read_trace(tmp_path / "t.csv")
