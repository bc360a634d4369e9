"""The deploy flow's own decisions: which services it waits for, how long by default, what status calls the
long start-up phase (issue 29's audit)."""

from __future__ import annotations

from typing import Any

import pytest

from doubles.kube_fake import FakeKube
from doubles.kubehelp import make_cfg, run_deploy
from spectrn.deploy.service import render_for_deploy, services_of, status
from spectrn.errors import DeployError

Obj = dict[str, Any]


def test_services_are_named_by_their_variant_label() -> None:
    objects = [
        {"kind": "Service", "metadata": {"name": "svc", "labels": {"spectrn.io/variant": "baseline"}}},
        {
            "kind": "Deployment",
            "metadata": {
                "name": "a",
                "labels": {"spectrn.io/variant": "speculative", "spectrn.io/component": "server"},
            },
        },
        {"kind": "Deployment", "metadata": {"name": "b", "labels": {"spectrn.io/component": "baseline"}}},
    ]
    assert services_of(objects) == [("speculative", "a"), ("baseline", "b")]


def test_deploy_renders_everything_but_the_load_job() -> None:
    kinds = sorted(o["kind"] + " " + o["metadata"]["name"] for o in render_for_deploy(make_cfg(runtime="sim")))
    assert "ServiceAccount spectrn-loadgen" in kinds  # the load Job's account is shared: deployed up front
    assert not [k for k in kinds if k.startswith("Job")]


def test_without_a_timeout_deploy_waits_the_startup_budget_plus_half_an_hour() -> None:
    fake = FakeKube(tick_s=60)  # one poll a minute: 31 polls
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin", probes={"startup_budget_s": 60})
    fake.behave("qwen-sd-vllm", "startup-timeout")
    with pytest.raises(DeployError) as err:
        run_deploy(fake, cfg, timeout_s=None, poll_s=60)
    # 60 s + 1800 s
    assert (
        "speculative service qwen-sd-vllm: startup probe timeout: still starting after 1860 s (startup budget 60 s)"
        in str(err.value)
    )


def test_status_of_a_neuron_server_not_yet_ready_says_compiling() -> None:
    fake = FakeKube()
    cfg = make_cfg()  # runtime neuron
    fake.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cfg.namespace}})
    fake.put(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": cfg.baseline_name, "namespace": cfg.namespace},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "base"}},
                "template": {"spec": {"containers": [{"name": "server", "image": "vllm:1"}]}},
            },
            "status": {"observedGeneration": 1, "replicas": 1},
        }
    )
    fake.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "base-0",
                "namespace": cfg.namespace,
                "labels": {"app": "base", "app.kubernetes.io/managed-by": "spectrn"},
            },
            "spec": {"containers": [{"name": "server"}]},
            "status": {
                "phase": "Running",
                "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}],
            },
        }
    )
    fake.logs["base-0"] = "INFO compiling graph 2/9\n"
    base, spec = status(fake, cfg)
    assert (base.variant, base.phase, base.detail) == ("baseline", "Compiling", "INFO compiling graph 2/9")
    assert (spec.variant, spec.name, spec.phase) == ("speculative", cfg.speculative_name, "Absent")
