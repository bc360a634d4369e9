"""Fixtures for the Kubernetes tests: configurations, a fake cluster, and a quick way to deploy into it."""

from __future__ import annotations

from typing import Any

import pytest

from spectrn.config import SpectrnConfig, build_config
from spectrn.deploy import DeployReport, deploy, render_for_deploy
from spectrn.kube_fake import FakeKube


def make_cfg(**over: Any) -> SpectrnConfig:
    data: dict[str, Any] = {"s3": {"bucket": "my-models"}}
    for key, value in over.items():
        data[key] = value
    return build_config(data, environ={})


@pytest.fixture
def sim_cfg() -> SpectrnConfig:
    """The kind smoke configuration: simulator image, device-plugin extended resources."""
    return make_cfg(runtime="sim", resources_mode="device-plugin")


@pytest.fixture
def neuron_cfg() -> SpectrnConfig:
    """The published experiment: real vLLM, DRA resource.k8s.io/v1, S3 model volume."""
    return make_cfg()


def add_slices(fake: FakeKube, node: str = "node-0", devices: int = 16, version: str = "resource.k8s.io/v1") -> None:
    fake.put(
        {
            "apiVersion": version,
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-neuron"},
            "spec": {
                "driver": "neuron.aws.com",
                "nodeName": node,
                "devices": [{"name": f"neuron-{i}"} for i in range(devices)],
            },
        }
    )


@pytest.fixture
def fake() -> FakeKube:
    f = FakeKube()
    add_slices(f)
    return f


def run_deploy(fake: FakeKube, cfg: SpectrnConfig, *, only: str | None = None, **kw: Any) -> DeployReport:
    kw.setdefault("timeout_s", 600)
    kw.setdefault("grace_s", 30)
    return deploy(fake, cfg, render_for_deploy(cfg, only), clock=fake.clock, sleep=fake.sleep, **kw)
