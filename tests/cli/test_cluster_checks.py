"""Every command that renders for a cluster shows the cluster-only warnings and refusals, as ``render`` does.

Each command states itself whether it renders for a cluster and whether it starts spectrn's load Job; nothing is
read from a library's global state (issue: ``deploy``, ``bench``, ``sweep`` and ``compile`` once skipped them).
The cluster is unreachable in these tests: the checks run when the config is loaded, before any cluster call.
"""

from __future__ import annotations

import pytest

from spectrn.kube.api import KubeApiError

BUCKET = ("--set", "s3.bucket=my-models")
PRELOADED = ("--set", "spectrn_image_preloaded=true")
KARPENTER = ("--set", "node_provisioning=karpenter")
AUTO_MODE = ("--set", "node_provisioning=auto-mode")

# argv of each command as it renders or deploys for a cluster
CLUSTER_ARGV = {
    "render": ("render",),
    "deploy": ("deploy", "--dry-run"),
    "bench": ("bench", "--run-id", "r-1", "--no-report"),
    "sweep": ("sweep", "--windows", "5", "--no-report"),
    "compile": ("compile", "--windows", "5", "--dry-run"),
}
LOAD_JOB_COMMANDS = ("bench", "sweep")


@pytest.fixture
def no_cluster(monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.chdir(tmp_path)

    def connect(**kw):
        raise KubeApiError("no cluster in this test", reason="ConfigError", hint="none")

    monkeypatch.setattr("spectrn.kube.client.connect", connect)


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("name", list(CLUSTER_ARGV))
def test_karpenter_and_auto_mode_warnings_fire_in_every_cluster_command(cli, no_cluster, name):
    argv = CLUSTER_ARGV[name]
    _, _, err = cli(*argv, *BUCKET, *PRELOADED, *KARPENTER)
    assert "Karpenter supports DRA from version 1.15" in flat(err), err
    _, _, err = cli(*argv, *BUCKET, *PRELOADED, *AUTO_MODE)
    assert "DRA is not currently supported with EKS Auto Mode" in flat(err), err
    _, _, err = cli(*argv, *PRELOADED, "--set", "resources_mode=device-plugin")
    assert "s3.bucket: still the placeholder" in flat(err), err


@pytest.mark.parametrize("name", LOAD_JOB_COMMANDS)
def test_a_load_job_image_no_node_can_pull_is_refused_before_any_cluster_call(cli, no_cluster, name):
    code, out, err = cli(*CLUSTER_ARGV[name], *BUCKET)
    assert code == 2 and out == "", err
    assert "spectrn_image: 'spectrn:0.1.0' (the default) names no registry" in flat(err)
    assert "no cluster in this test" not in err  # refused before connecting
    ecr = "123456789012.dkr.ecr.us-east-2.amazonaws.com/spectrn:0.1.0"
    code, _, err = cli(*CLUSTER_ARGV[name], *BUCKET, "--set", f"spectrn_image={ecr}")
    assert code == 7 and "no cluster in this test" in err  # the image passes; the (absent) cluster is next


def test_the_llmperf_engine_needs_no_spectrn_image(cli, no_cluster):
    code, _, err = cli(*CLUSTER_ARGV["bench"], "--engine", "llmperf", *BUCKET)
    assert code == 7 and "names no registry" not in err


@pytest.mark.parametrize("name", ["deploy", "bench", "sweep"])
def test_the_simulator_image_warns_in_every_command_that_deploys_it(cli, no_cluster, name):
    _, _, err = cli(*CLUSTER_ARGV[name], "--set", "runtime=sim", "--set", "resources_mode=device-plugin")
    assert "sim.image: 'spectrn:0.1.0' (the default) names no registry" in flat(err), err


@pytest.mark.parametrize(
    "argv",
    [
        ("bench", "--local", "--requests", "1", "--run-id", "r-loc"),
        ("sweep", "--local", "--windows", "5", "--requests", "1"),
    ],
    ids=["bench", "sweep"],
)
def test_local_runs_show_no_cluster_warning(cli, no_cluster, monkeypatch, argv):
    """--local renders nothing for a cluster; the run itself is stopped right after the config is loaded."""

    def stop(*a, **kw):
        raise SystemExit(0)

    monkeypatch.setattr("spectrn.cli.bench_cmd._bench_local", stop)
    monkeypatch.setattr("spectrn.sweep.runners.local_runner", stop)
    _, _, err = cli(*argv, *KARPENTER)
    assert "Karpenter" not in err and "s3.bucket" not in err and "names no registry" not in err
