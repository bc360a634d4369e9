"""Compile Jobs' deadline and state, and where artifact status looks (issue 29's audit).

A small scripted cluster stands in for the API (only what ``compile.py`` calls), so each expected value is read
off the objects written here."""

from __future__ import annotations

from typing import Any

import pytest

from doubles.kubehelp import make_cfg
from spectrn.deploy.compile import artifact_status, compile_job, job_state, wait_jobs
from spectrn.errors import KubeError

Obj = dict[str, Any]


def test_a_compile_job_may_run_its_startup_budget_plus_an_hour() -> None:
    cfg = make_cfg(probes={"startup_budget_s": 7200})
    job = compile_job(cfg, speculative=True)
    assert job["spec"]["activeDeadlineSeconds"] == 10800  # 7200 s + 3600 s


@pytest.mark.parametrize(
    ("conditions", "state"),
    [
        ([], "Running"),
        ([{"type": "Failed", "status": "False"}, {"type": "Complete", "status": "False"}], "Running"),
        ([{"type": "Complete", "status": "True"}], "Complete"),
        ([{"type": "Suspended", "status": "True"}, {"type": "Failed", "status": "True"}], "Failed"),
    ],
)
def test_a_job_is_finished_only_by_a_true_complete_or_failed_condition(conditions: list[Obj], state: str) -> None:
    assert job_state({"status": {"conditions": conditions}}) == state
    assert job_state(None) == "Absent"


class Scripted:
    """Answers ``get`` with Jobs by name and ``list``/``exec`` with pods; records each exec's pod and command."""

    def __init__(self, jobs: dict[str, Obj | None] | None = None, pods: dict[str, list[Obj]] | None = None) -> None:
        self.jobs = jobs or {}
        self.pods = pods or {}
        self.present: set[str] = set()
        self.execs: list[tuple[str, str]] = []

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        return self.jobs.get(name)

    def list(self, api_version: str, kind: str, namespace: str | None = None, label_selector: str = "") -> list[Obj]:
        return self.pods.get(label_selector, [])

    def exec(self, pod: str, namespace: str, command: list[str], **kw: Any) -> bytes:
        self.execs.append((pod, command[-1]))
        if command[-1] not in self.present:
            raise KubeError(f"exec test -e in pod {namespace}/{pod}: exit status 1: ")
        return b""


def running(name: str, phase: str = "Running") -> Obj:
    return {"metadata": {"name": name}, "status": {"phase": phase}}


def test_artifacts_are_looked_for_in_a_running_pod_only() -> None:
    cfg = make_cfg()
    kube = Scripted(
        pods={
            "spectrn.io/component=baseline": [running("base-0", "Pending")],
            "spectrn.io/component=speculative": [running("spec-0")],
        }
    )
    status = artifact_status(kube, cfg, [], [], baseline=True)
    assert status == {"baseline": "missing"}
    assert [pod for pod, _ in kube.execs] == ["spec-0"]


def test_without_a_running_pod_nothing_is_guessed() -> None:
    cfg = make_cfg()
    kube = Scripted(pods={"spectrn.io/component=baseline": [running("base-0", "Pending")]})
    assert artifact_status(kube, cfg, ["qwen3-1.7b"], [7]) == {
        "baseline": "unknown (no running vLLM pod to look into the bucket)",
        "qwen3-1.7b-k7": "unknown (no running vLLM pod to look into the bucket)",
    }
    assert kube.execs == []


def test_waiting_ends_when_every_job_is_finished_or_gone() -> None:
    cfg = make_cfg()
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    kube = Scripted(jobs={"a": done, "b": None})
    slept: list[float] = []
    states = wait_jobs(kube, cfg, ["a", "b"], timeout_s=60, clock=lambda: sum(slept), sleep=slept.append, poll_s=30)
    assert states == {"a": "Complete", "b": "Absent"} and slept == []  # no poll: nothing left to wait for
