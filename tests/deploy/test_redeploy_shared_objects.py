"""Redeploys that change the shared objects, not only Deployment args: the prompts ConfigMap (a new workload
file) and a ServiceAccount (an IRSA role added, then removed). Exactly the changed object is applied, the
servers are not rolled, and a field spectrn stops sending (the role annotation) is removed from the cluster,
as server-side apply removes the fields a manager no longer applies."""

from __future__ import annotations

from pathlib import Path

import yaml

from doubles.kube_fake import FakeKube
from doubles.kubehelp import make_cfg, run_deploy

ROLE = "arn:aws:iam::123456789012:role/spectrn-vllm"
BASE = {"runtime": "sim", "resources_mode": "device-plugin"}


def _applied(fake: FakeKube) -> list[str]:
    return [what for op, what in fake.calls if op == "apply"]


def _pods(fake: FakeKube) -> list[str]:
    return sorted(p["metadata"]["name"] for p in fake.kinds("Pod"))


def test_a_service_account_role_is_added_then_removed(fake: FakeKube) -> None:
    run_deploy(fake, make_cfg(**BASE))
    pods, n = _pods(fake), len(_applied(fake))
    report = run_deploy(fake, make_cfg(**BASE, service_accounts={"vllm_role_arn": ROLE}))
    assert [i.name for i in report.plan.changes] == ["ServiceAccount spectrn/spectrn-vllm"]
    assert _applied(fake)[n:] == ["ServiceAccount spectrn/spectrn-vllm"]
    sa = fake.find("ServiceAccount", "spectrn-vllm", "spectrn")
    assert sa is not None and sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] == ROLE
    loadgen = fake.find("ServiceAccount", "spectrn-loadgen", "spectrn")
    assert loadgen is not None and "eks.amazonaws.com/role-arn" not in (loadgen["metadata"].get("annotations") or {})
    assert _pods(fake) == pods and {s.phase for s in report.states} == {"Ready"}
    # the role removed from the config: the annotation goes from the cluster too
    n = len(_applied(fake))
    report = run_deploy(fake, make_cfg(**BASE))
    assert [i.name for i in report.plan.changes] == ["ServiceAccount spectrn/spectrn-vllm"]
    sa = fake.find("ServiceAccount", "spectrn-vllm", "spectrn")
    assert sa is not None and "eks.amazonaws.com/role-arn" not in (sa["metadata"].get("annotations") or {})
    assert _applied(fake)[n:] == ["ServiceAccount spectrn/spectrn-vllm"] and _pods(fake) == pods


def test_a_new_workload_file_updates_the_prompts_configmap_only(fake: FakeKube, tmp_path: Path) -> None:
    run_deploy(fake, make_cfg(**BASE))
    before = dict(fake.find("ConfigMap", "spectrn-prompts", "spectrn")["data"])  # type: ignore[index]
    pods, n = _pods(fake), len(_applied(fake))
    workload = tmp_path / "mine.yaml"
    workload.write_text(
        yaml.safe_dump(
            {"name": "mine", "prompts": [{"id": "a", "class": "tickets", "text": "Summarise ticket 4812 in JSON."}]}
        )
    )
    report = run_deploy(fake, make_cfg(**BASE, bench={"prompts": str(workload)}))
    assert "ConfigMap spectrn/spectrn-prompts" in [i.name for i in report.plan.changes]
    assert "ConfigMap spectrn/spectrn-prompts" in _applied(fake)[n:]
    data = fake.find("ConfigMap", "spectrn-prompts", "spectrn")["data"]  # type: ignore[index]
    added = set(data) - set(before)
    assert len(added) == 1, added
    shipped = yaml.safe_load(data[added.pop()])
    assert shipped["name"] == "mine"
    assert [(p["id"], p["class"], p["text"]) for p in shipped["prompts"]] == [
        ("a", "tickets", "Summarise ticket 4812 in JSON.")
    ]
    assert all(data[k] == v for k, v in before.items())  # the packaged sets are unchanged
    assert _pods(fake) == pods  # the servers do not read the prompts: nothing rolls
