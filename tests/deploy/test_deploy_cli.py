"""The cluster commands end to end through ``spectrn.cli.main`` with a fake cluster behind ``kube.connect``."""

from __future__ import annotations

import json

import pytest
import yaml

from doubles.kube_fake import FakeKube
from doubles.kubehelp import add_slices
from spectrn.kube.api import KubeApiError
from support import run_cli

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


run = run_cli


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
    # The objects are still printed, but a pre-flight error is a failed dry run (a script must not read "ready").
    assert code == 7 and "cluster not reachable" in err and "error" in err and "pass --kubeconfig" in err
    assert "DeployError: pre-flight found 1 error(s)" in err
    assert len([d for d in yaml.safe_load_all(out) if d]) == 8


@pytest.mark.parametrize("reachable", [True, False])
def test_dry_run_flags_the_placeholder_bucket_and_fails(cluster, monkeypatch, capsys, reachable):
    if not reachable:

        def refuse(**kw):
            raise KubeApiError("cannot load the Kubernetes configuration: no config", hint="pass --kubeconfig")

        monkeypatch.setattr("spectrn.kube.client.connect", refuse)
    neuron = ["--set", "resources_mode=device-plugin"]
    code, out, err = run(["deploy", "--dry-run", *neuron], capsys)
    assert code == 7, err
    assert "error [storage] s3.bucket is still the placeholder 'REPLACE-WITH-YOUR-BUCKET'" in err
    assert "--set s3.bucket=NAME" in err and "PersistentVolume" in out  # the objects are still shown
    if reachable:  # the same configuration with a real bucket passes pre-flight
        code, _, err = run(["deploy", "--dry-run", *neuron, "--set", "s3.bucket=my-models"], capsys)
        assert code == 0 and "placeholder" not in err and "error" not in err


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
    from doubles.kube_runfiles import shard_files

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


# ---- one way to reach a cluster ------------------------------------------------------------------------------

CLUSTER_COMMANDS = {
    "deploy": ["deploy", *SIM],
    "status": ["status", *SIM],
    "teardown": ["teardown", "--yes", *SIM],
    "collect": ["collect", "r-1", *SIM],
    "bench": ["bench", "--run-id", "r-1", "--no-report", *SIM],
    "sweep": ["sweep", "--windows", "5", "--no-report", *SIM],
    "compile": ["compile", "--windows", "5"],  # neuron runtime: the simulator has nothing to compile
}


@pytest.mark.parametrize("argv", list(CLUSTER_COMMANDS.values()), ids=list(CLUSTER_COMMANDS))
def test_every_cluster_command_takes_context_kubeconfig_and_namespace(monkeypatch, tmp_path, capsys, argv):
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.chdir(tmp_path)
    seen = []

    def connect(**kw):
        seen.append(kw)
        raise KubeApiError("no cluster in this test", reason="ConfigError", hint="none")

    monkeypatch.setattr("spectrn.kube.client.connect", connect)
    kubeconfig = tmp_path / "team.kubeconfig"
    code, _, err = run([*argv, "--context", "prod", "--kubeconfig", str(kubeconfig), "-n", "team-a"], capsys)
    assert seen == [{"context": "prod", "kubeconfig": str(kubeconfig)}]
    assert code == 7 and "KubeApiError: no cluster in this test" in err


def test_namespace_flag_moves_every_command_to_that_namespace(cluster, capsys, tmp_path):
    from doubles.kube_runfiles import shard_files

    ns = ["--namespace", "team-a"]
    assert run(["deploy", *SIM, *ns], capsys)[0] == 0
    assert cluster.find("Deployment", "qwen-vllm", "team-a") is not None
    assert cluster.find("Deployment", "qwen-vllm", "spectrn") is None
    code, out, _ = run(["status", *SIM, *ns], capsys)
    assert code == 0 and out.count("Ready") == 2
    cluster.job_files = lambda pod, i: shard_files("r-ns-1", i, 1)
    out_dir = str(tmp_path / "res")
    code, _, err = run(["bench", "--run-id", "r-ns-1", "--out-dir", out_dir, "--no-report", *SIM, *ns], capsys)
    assert code == 0, err
    assert [w for op, w in cluster.calls if op == "apply" and w.startswith("Job")] == [
        "Job team-a/spectrn-loadgen-r-ns-1"
    ]
    code, out, _ = run(["teardown", "--yes", *SIM, *ns], capsys)
    assert code == 0 and "delete: Namespace team-a" in out
    assert cluster.find("Namespace", "team-a") is None  # teardown waited until it was gone
    code, out, _ = run(["compile", "--dry-run", "--windows", "5", *ns], capsys)
    assert code == 0 and {
        d["metadata"]["namespace"] for d in yaml.safe_load_all(out) if d and "namespace" in d["metadata"]
    } == {"team-a"}


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("this: is: not: yaml: [\n", "is not valid YAML"),
        ("just a string\n", "is not a valid kubeconfig: TypeError"),
        ("apiVersion: v1\nclusters: 5\n", "is not a valid kubeconfig: TypeError"),
        (b"\x00\xff\xfe", "is not a valid kubeconfig: UnicodeDecodeError"),
        ("", "cannot load the Kubernetes configuration from kubeconfig"),
    ],
    ids=["not-yaml", "a-string", "wrong-shape", "binary", "empty"],
)
def test_a_garbage_kubeconfig_is_one_line_naming_the_file_and_the_fix(monkeypatch, tmp_path, capsys, content, needle):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "garbage.kubeconfig"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    for argv in (["status", *SIM], ["bench", "--run-id", "r-1", *SIM]):
        code, _, err = run([*argv, "--kubeconfig", str(path)], capsys)
        lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning:")]
        assert code == 7 and len(lines) == 1 and "Traceback" not in err, err
        assert lines[0].startswith("KubeApiError: ") and str(path) in lines[0] and needle in lines[0]
        assert "(fix: " in lines[0] and "--kubeconfig" in lines[0]


def test_a_missing_kubeconfig_says_not_found(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["deploy", *SIM, "--kubeconfig", str(tmp_path / "nope")], capsys)
    assert code == 7 and f"KubeApiError: kubeconfig {tmp_path / 'nope'} not found" in err


# ---- the in-cluster bench as written ---------------------------------------------------------------------


@pytest.fixture
def analyzes(monkeypatch):
    """Counts every analysis of a run folder (spectrn's own and llmperf ingestion)."""
    import spectrn.analyze.llmperf
    import spectrn.finish

    calls: list[str] = []
    for module, name in ((spectrn.finish, "analyze_folder"), (spectrn.analyze.llmperf, "ingest")):
        real = getattr(module, name)

        def spy(*args, _real=real, _name=name, **kw):
            calls.append(_name)
            return _real(*args, **kw)

        monkeypatch.setattr(module, name, spy)
    return calls


def test_in_cluster_bench_analyzes_once_and_applying_twice_starts_no_second_job(cluster, capsys, tmp_path, analyzes):
    from doubles.kube_runfiles import shard_files

    assert run(["deploy", *SIM], capsys)[0] == 0
    assert run(["deploy", *SIM], capsys)[0] == 0  # the services applied twice: nothing changes, no Job
    assert cluster.kinds("Job") == []
    cluster.job_files = lambda pod, i: shard_files("r-once", i, 1)
    argv = ["bench", "--run-id", "r-once", "--out-dir", str(tmp_path / "res"), "--no-report", *SIM]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    assert analyzes == ["analyze_folder"]  # exactly one analysis of the collected run
    assert (tmp_path / "res" / "r-once" / "summary.json").exists()
    assert [w for op, w in cluster.calls if op == "apply" and w.startswith("Job")] == [
        "Job spectrn/spectrn-loadgen-r-once"
    ]
    assert cluster.find("Job", "spectrn-loadgen-r-once", "spectrn") is None

    code, _, err = run(argv, capsys)  # the same run id again: refused before any Job starts
    assert code == 4 and "already holds a run" in err
    assert len([w for op, w in cluster.calls if op == "apply" and w.startswith("Job")]) == 1
    assert analyzes == ["analyze_folder"]


def test_collect_after_the_cli_died_fetches_and_analyzes_once(cluster, capsys, tmp_path, analyzes, monkeypatch):
    from doubles.kube_runfiles import shard_files

    assert run(["deploy", *SIM], capsys)[0] == 0
    cluster.job_files = lambda pod, i: shard_files("r-died", i, 2)
    real_watch = cluster.watch

    def dying_watch(*args, **kw):  # the CLI is killed while it waits for the load pods
        if cluster.kinds("Job"):
            raise KeyboardInterrupt
        return real_watch(*args, **kw)

    monkeypatch.setattr(cluster, "watch", dying_watch)
    out = tmp_path / "res"
    argv = ["bench", "--run-id", "r-died", "--out-dir", str(out), "--no-report", "--set", "bench.loadgen_pods=2"]
    code, _, err = run([*argv, *SIM], capsys)
    assert code == 130 and "spectrn collect r-died" in " ".join(err.split())
    assert cluster.find("Job", "spectrn-loadgen-r-died", "spectrn") is not None
    assert analyzes == []
    monkeypatch.setattr(cluster, "watch", real_watch)

    code, stdout, err = run(["collect", "r-died", "--out", str(out), "--no-report", *SIM], capsys)
    assert code == 0, err
    assert stdout.strip().splitlines()[-1] == str(out / "r-died")  # the table above it, the folder last
    assert analyzes == ["analyze_folder"]
    summary = json.loads((out / "r-died" / "summary.json").read_text())
    assert summary["levels"][0]["variants"]["speculative"]["requests"]["completed"] == 12
    assert cluster.find("Job", "spectrn-loadgen-r-died", "spectrn") is None


def test_llmperf_bench_through_the_cli_ingests_once(cluster, capsys, tmp_path, analyzes):
    assert run(["deploy", *SIM], capsys)[0] == 0
    out = "/results/r-llm/llmperf/hello-world"
    rows = json.dumps(
        [
            {
                "error_code": None,
                "ttft_s": 0.05,
                "end_to_end_latency_s": e2e,
                "inter_token_latency_s": e2e / 64,
                "request_output_throughput_token_per_s": 64 / e2e,
                "number_output_tokens": 64,
                "number_input_tokens": 64,
            }
            for e2e in (3.0, 3.1, 2.9)
        ]
    ).encode()
    cluster.job_files = lambda pod, i: {
        f"{out}/{v}/m_64_64_individual_responses.json": rows for v in ("baseline", "speculative")
    }
    cluster.job_done_line = "llmperf finished; results in /results/r-llm"
    argv = ["bench", "--engine", "llmperf", "--run-id", "r-llm", "--out-dir", str(tmp_path / "res"), *SIM]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    assert analyzes == ["ingest", "analyze_folder"]  # ingested into records once, then finished once like any run
    summary = json.loads((tmp_path / "res" / "r-llm" / "summary.json").read_text())
    assert summary["provenance"]["engine"] == "llmperf"
