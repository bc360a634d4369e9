"""Helpers for the Kubernetes tests (imported by name; ``conftest`` modules of other folders share a name)."""

from __future__ import annotations

from typing import Any

from doubles.kube_fake import FakeKube
from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.sources import build_config
from spectrn.deploy.service import DeployReport, deploy, render_for_deploy


def make_cfg(**over: Any) -> SpectrnConfig:
    data: dict[str, Any] = {"s3": {"bucket": "my-models"}}
    data.update(over)
    return build_config(data, environ={})


def add_slices(fake: FakeKube, node: str = "node-0", devices: int = 16, version: str = "resource.k8s.io/v1") -> None:
    """Publish DRA devices of the Neuron driver for ``node``, as the Neuron DRA driver does."""
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


def run_deploy(fake: FakeKube, cfg: SpectrnConfig, *, only: str | None = None, **kw: Any) -> DeployReport:
    kw.setdefault("timeout_s", 600)
    kw.setdefault("grace_s", 30)
    return deploy(fake, cfg, render_for_deploy(cfg, only), clock=fake.clock, sleep=fake.sleep, **kw)
