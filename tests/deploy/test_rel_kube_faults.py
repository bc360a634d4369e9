"""Kubernetes API errors through ``spectrn deploy / status / teardown`` against the fake API (``FakeKube``).

Behaviour under test: refusals (403 Forbidden, 409 Conflict) and failed writes stop the command with
KubeError (exit 7), the server's message and the next step, and roll back what this call created;
watch hiccups (410 Gone, connection reset) are survived by re-listing; a re-run after the fault finishes
the job (every command is idempotent).
"""

from __future__ import annotations

import pytest

from doubles.kube_fake import FakeKube
from doubles.relhelp import last_line, run_cli
from spectrn.run.summary import Summary

SIM = ["--set", "runtime=sim", "--set", "resources_mode=device-plugin"]
MANAGED = "app.kubernetes.io/managed-by"


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    fake = FakeKube(context="kind-spectrn")
    fake.put(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node-0"},
            "status": {"allocatable": {"aws.amazon.com/neuron": "16", "aws.amazon.com/neuroncore": "128"}},
        }
    )
    monkeypatch.setattr("spectrn.kube.client.connect", lambda **kw: fake)
    return fake


def _managed(fake: FakeKube) -> list[tuple[str, str]]:
    return sorted(
        (k, n) for (_, k, _, n), o in fake.objects.items() if (o["metadata"].get("labels") or {}).get(MANAGED)
    )


@pytest.mark.parametrize(
    ("status", "reason", "message", "expect", "hint"),
    [
        (403, "Forbidden", 'deployments.apps is forbidden: User "dev" cannot create', "HTTP 403", "RBAC"),
        (409, "Conflict", "Operation cannot be fulfilled: the object has been modified", "HTTP 409", "re-run"),
        (0, "", "", "Connection reset by peer", None),
    ],
    ids=["403-forbidden", "409-conflict", "connection-reset"],
)
def test_apply_refused_part_way_exits_7_rolls_back_and_a_rerun_succeeds(
    cluster, capsys, status, reason, message, expect, hint
) -> None:
    cluster.fail_next("apply", kind="Deployment", status=status, reason=reason, message=message)
    code, _, err = run_cli(["deploy", *SIM], capsys)
    assert code == 7, err
    line = " ".join(err.split())
    assert "Error:" in line and expect in line and "(fix:" in line
    if hint:
        assert hint in line
    if message:
        assert message.split(":")[0] in line  # the API server's own words are kept
    assert not [o for o in _managed(cluster) if o[0] == "Deployment"]  # nothing half-deployed is left running

    code, _, err = run_cli(["deploy", *SIM], capsys)
    assert code == 0, err
    assert "both services are ready" in err


# a reset or a 500 costs one real poll interval (5 s) of back-off each: one of those is enough to prove it
@pytest.mark.parametrize(
    ("status", "reason", "times"),
    [(410, "Gone", 3), (0, "", 1), (500, "InternalError", 1)],
    ids=["410-gone", "reset", "500"],
)
def test_watch_interruptions_are_survived(cluster, capsys, status, reason, times) -> None:
    cluster.fail_next("watch", status=status, reason=reason, message="too old resource version", times=times)
    code, _, err = run_cli(["deploy", *SIM], capsys)
    assert code == 0, err
    assert "both services are ready" in err
    assert not any(f.times for f in cluster._failures)  # the faults were really hit


def test_status_forbidden_names_the_permission_to_ask_for(cluster, capsys) -> None:
    assert run_cli(["deploy", *SIM], capsys)[0] == 0
    cluster.fail_next(
        "get", kind="Deployment", status=403, reason="Forbidden", message='deployments.apps is forbidden: User "dev"'
    )
    code, _, err = run_cli(["status", *SIM], capsys)
    assert code == 7
    line = last_line(err)
    assert line.startswith("KubeApiError: get Deployment") and "HTTP 403" in line and "forbidden" in line
    assert "RBAC" in line and "kubectl auth can-i" in line


def test_teardown_interrupted_by_an_api_error_is_finished_by_a_rerun(cluster, capsys) -> None:
    assert run_cli(["deploy", *SIM], capsys)[0] == 0
    assert _managed(cluster)
    cluster.fail_next("delete", kind="Service", status=500, reason="InternalError", message="etcd timeout")
    code, _, err = run_cli(["teardown", "--yes", *SIM], capsys)
    assert code == 7, err
    assert "etcd timeout" in " ".join(err.split())
    code, _, err = run_cli(["teardown", "--yes", *SIM], capsys)
    assert code == 0, err
    assert _managed(cluster) == []


@pytest.mark.slow  # six real 5 s back-offs before the bench gives up
def test_api_lost_during_an_in_cluster_bench_then_collect_fetches_the_results(cluster, capsys, tmp_path) -> None:
    """The API server stops answering while the load Job runs: bench exits 4 pointing at `spectrn collect`,
    the Job keeps its results, and `spectrn collect` fetches and analyzes them once the API is back."""
    import json

    from spectrn.run.records import RunMeta
    from support import minimal_record

    def job_files(pod: str, index: int) -> dict[str, bytes]:
        meta = RunMeta(run_id="r-x", spectrn_version="0.1.0", started_at=1.8e9, finished_at=1.8e9 + 100)
        recs = "".join(json.dumps(minimal_record(v, i)) + "\n" for v in ("baseline", "speculative") for i in range(6))
        return {"/results/r-x/run.json": meta.model_dump_json().encode(), "/results/r-x/requests.jsonl": recs.encode()}

    assert run_cli(["deploy", *SIM], capsys)[0] == 0
    cluster.job_files = job_files
    cluster.fail_next("exec", status=0, times=10_000)  # every exec into the load pod: connection reset
    out = tmp_path / "res"
    code, _, err = run_cli(["bench", "--run-id", "r-x", "--out-dir", out, "--no-report", *SIM], capsys)
    assert code == 4
    line = last_line(err)
    assert line.startswith("BenchError: lost contact with the API server") and "spectrn collect r-x" in line
    assert cluster.find("Job", "spectrn-loadgen-r-x", "spectrn") is not None  # kept for collect
    assert not (out / "r-x" / "summary.json").exists()

    for failure in cluster._failures:  # the API server is back
        failure.times = 0
    code, _, err = run_cli(["collect", "r-x", "--out", out, *SIM], capsys)
    assert code == 0, err
    s = Summary.model_validate_json((out / "r-x" / "summary.json").read_text())
    assert s.levels[0].variants["baseline"].requests.completed == 6
