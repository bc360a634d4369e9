"""Fixtures for the Kubernetes tests: configurations and a fake cluster."""

from __future__ import annotations

import pytest
from kubehelp import add_slices, make_cfg

from doubles.kube_fake import FakeKube
from spectrn.spec.config import SpectrnConfig


@pytest.fixture
def sim_cfg() -> SpectrnConfig:
    """The kind smoke configuration: simulator image, device-plugin extended resources."""
    return make_cfg(runtime="sim", resources_mode="device-plugin")


@pytest.fixture
def neuron_cfg() -> SpectrnConfig:
    """The published experiment: real vLLM, DRA resource.k8s.io/v1, S3 model volume."""
    return make_cfg()


@pytest.fixture
def fake() -> FakeKube:
    f = FakeKube()
    add_slices(f)
    return f
