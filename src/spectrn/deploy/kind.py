"""kind clusters: fake Neuron capacity advertised on a node (the documented way to add extended resources)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from spectrn.deploy.objects import NEURON_RESOURCE, NEURONCORE_RESOURCE
from spectrn.errors import ConfigError, DeployError
from spectrn.kube.api import KubeApi

if TYPE_CHECKING:
    pass


def advertise_fake_neuron(
    kube: KubeApi, *, nodes: Sequence[str] | None = None, neuron: int = 16, neuroncore: int = 128
) -> list[str]:
    """Advertise ``aws.amazon.com/neuron`` / ``neuroncore`` extended resources on nodes (kind clusters only).

    This patches the node *status* (capacity and allocatable), the documented way to advertise extended
    resources; the scheduler then places pods that request them, and nothing on the node backs them.
    """
    if neuron < 0 or neuroncore < 0:
        raise ConfigError("--neuron and --neuroncore must be zero or more", hint="e.g. --neuron 16 --neuroncore 128")
    names = list(nodes) if nodes else [n["metadata"]["name"] for n in kube.list("v1", "Node")]
    if not names:
        raise DeployError("the cluster has no nodes to patch", hint="create the kind cluster first")
    ops = []
    for section in ("capacity", "allocatable"):
        for res, value in ((NEURON_RESOURCE, neuron), (NEURONCORE_RESOURCE, neuroncore)):
            ops.append({"op": "add", "path": f"/status/{section}/{res.replace('/', '~1')}", "value": str(value)})
    for name in names:
        kube.patch_node_status(name, ops)
    return names
