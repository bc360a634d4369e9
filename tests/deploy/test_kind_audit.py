"""The kind helper's node patch (issue 29's audit): exactly the named nodes, zero allowed, negatives refused."""

from __future__ import annotations

import pytest

from doubles.kube_fake import FakeKube
from spectrn.deploy.kind import advertise_fake_neuron
from spectrn.errors import ConfigError


def test_only_the_named_nodes_are_patched_and_zero_devices_is_allowed() -> None:
    fake = FakeKube(nodes=2, neuron_per_node=16)
    assert advertise_fake_neuron(fake, nodes=["node-1"], neuron=0, neuroncore=0) == ["node-1"]
    assert [c for c in fake.calls if c[0] == "patch_node_status"] == [("patch_node_status", "node-1")]
    status = fake.find("Node", "node-1")["status"]
    for section in ("capacity", "allocatable"):
        assert status[section]["aws.amazon.com/neuron"] == "0"
        assert status[section]["aws.amazon.com/neuroncore"] == "0"
    assert fake.find("Node", "node-0")["status"]["allocatable"]["aws.amazon.com/neuron"] == "16"


@pytest.mark.parametrize(("neuron", "neuroncore"), [(-1, 128), (16, -1)])
def test_a_negative_count_is_refused_before_any_patch(neuron: int, neuroncore: int) -> None:
    fake = FakeKube()
    with pytest.raises(ConfigError, match="--neuron and --neuroncore must be zero or more"):
        advertise_fake_neuron(fake, neuron=neuron, neuroncore=neuroncore)
    assert not [c for c in fake.calls if c[0] == "patch_node_status"]
