"""The cluster commands end to end through ``spectrn.cli.main`` with a fake cluster behind ``kube.connect``."""

from __future__ import annotations

import pytest
import yaml
from kubehelp import add_slices

from doubles.kube_fake import FakeKube
from spectrn.cli.main import main
from spectrn.kube.client import KubeApiError

SIM = ["--set", "runtime=sim", "--set", "resources_mode=device-plugin"]


@pytest.fixture
def cluster(monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps at the terminal width; keep lines whole for the asserts
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPECTRN_CONFIG", raising=False)
    fake = FakeKube(context="kind-spectrn")
    add_slices(fake)
    monkeypatch.setattr("spectrn.kube.client.connect", lambda **kw: fake)
    return fake


def run(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    out, err = capsys.readouterr()
    return exit_.value.code, out, err


def test_dry_run_prints_plan_preflight_and_exactly_the_objects(cluster, capsys):
    code, out, err = run(["deploy", "--dry-run", *SIM], capsys)
    assert code == 0
    assert "plan: 8 create" in err and "pre-flight:" in err and "[capacity] 16 Neuron devices" in err
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [d["kind"] for d in docs] == [
        "Namespace",
        "ServiceAccount",
        "ServiceAccount",
        "ConfigMap",
        "Deployment",
        "Deployment",
        "Service",
        "Service",
    ]
    assert all("spectrn.io/spec-hash" in d["metadata"]["annotations"] for d in docs)
    assert not [c for c in cluster.calls if c[0] == "apply"]


def test_dry_run_after_deploy_shows_nothing_to_apply(cluster, capsys):
    assert run(["deploy", *SIM], capsys)[0] == 0
    code, out, err = run(["deploy", "--dry-run", *SIM], capsys)
    assert code == 0 and "plan: 8 unchanged" in err and "nothing to apply" in out
    code, out, err = run(["deploy", "--dry-run", "--window", "9", *SIM], capsys)
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [("Deployment", "qwen-sd-vllm")]


def test_dry_run_without_a_cluster_still_prints_the_objects(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.chdir(tmp_path)

    def refuse(**kw):
        raise KubeApiError("cannot load the Kubernetes configuration: no config", hint="pass --kubeconfig")

    monkeypatch.setattr("spectrn.kube.client.connect", refuse)
    code, out, err = run(["deploy", "--dry-run", *SIM], capsys)
    assert code == 0 and "cluster not reachable" in err and "error" in err and "pass --kubeconfig" in err
    assert len([d for d in yaml.safe_load_all(out) if d]) == 8


def test_deploy_waits_and_reports_ready(cluster, capsys):
    code, out, err = run(["deploy", *SIM], capsys)
    assert code == 0
    assert "qwen-sd-vllm: Pulling" in err and "qwen-sd-vllm: Starting" in err  # progress lines (not a terminal)
    assert "both services are ready" in err and "created 8" in err


def test_deploy_failure_exits_7_with_cause_and_next_step(cluster, capsys):
    cluster.behave("qwen-vllm", "crashloop")
    code, out, err = run(["deploy", *SIM], capsys)
    assert code == 7
    assert "DeployError: baseline service qwen-vllm: CrashLoopBackOff" in err
    assert "ValueError" in err and "(fix: baseline: read the last log lines" in err


def test_status_and_teardown(cluster, capsys):
    run(["deploy", *SIM], capsys)
    code, out, _ = run(["status", *SIM], capsys)
    assert code == 0 and "qwen-vllm" in out and "qwen-sd-vllm" in out and "Ready" in out
    code, out, _ = run(["teardown", "--dry-run", *SIM], capsys)
    assert code == 0 and "would delete: Deployment spectrn/qwen-vllm" in out
    assert cluster.find("Deployment", "qwen-vllm", "spectrn") is not None
    code, out, _ = run(["teardown", "--yes", *SIM], capsys)
    assert code == 0 and "deleted 8 object(s)" in out
    code, out, _ = run(["teardown", "--yes", *SIM], capsys)
    assert "nothing of spectrn's" in out


def test_kind_fake_neuron(cluster, capsys):
    code, out, _ = run(["kind", "fake-neuron", "--neuron", "16", "--neuroncore", "128"], capsys)
    assert code == 0 and "node-0" in out
    cluster._context = "prod-eks"
    code, _, err = run(["kind", "fake-neuron"], capsys)
    assert code == 2 and "is not a kind cluster" in err


def test_collect_unknown_run(cluster, capsys):
    code, _, err = run(["collect", "nope-1", *SIM], capsys)
    assert code == 4 and "BenchError: no load Job for run nope-1" in err


def test_only_with_a_bad_value(cluster, capsys):
    code, _, err = run(["deploy", "--only", "both", *SIM], capsys)
    assert code == 2 and "--only baseline or --only speculative" in err


def test_bench_without_local_runs_the_in_cluster_job(cluster, capsys, tmp_path):
    from kube_runfiles import shard_files

    assert run(["deploy", *SIM], capsys)[0] == 0
    cluster.job_files = lambda pod, i: shard_files("r-cli-1", i, 1)
    code, out, err = run(
        [
            "bench",
            "--prompts",
            "structured",
            "--run-id",
            "r-cli-1",
            "--out-dir",
            str(tmp_path / "res"),
            "--no-report",
            *SIM,
        ],
        capsys,
    )
    assert code == 0, err
    assert (tmp_path / "res" / "r-cli-1" / "summary.json").exists()
    assert cluster.find("Job", "spectrn-loadgen-r-cli-1", "spectrn") is None
