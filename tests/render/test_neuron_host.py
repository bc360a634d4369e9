"""The vLLM container's added capabilities and the DRA claim's host-driver selector, rendered through the CLI
(docs/kubernetes.md "Capabilities", docs/neuron.md "Host driver")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

BASE = ["--set", "s3.bucket=my-models", "--set", "spectrn_image=registry.example.com/spectrn:0.1.0"]
# The attribute as the Neuron DRA docs name it (aws-neuron-sdk deploy/eks/dra.rst, "Common Attributes").
ATTRIBUTE = "device.attributes['neuron.aws.com'].neuronDriverVersion"


def _render(cli: Any, tmp: Path, config: dict[str, Any]) -> list[dict[str, Any]]:
    path, out = tmp / "spectrn.yaml", tmp / "out"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    code, _, err = cli("render", "--config", str(path), *BASE, "-o", str(out))
    assert code == 0, err
    return [d for f in sorted(out.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text(encoding="utf-8")) if d]


def _server_security(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    deployments = [o for o in objs if o["kind"] == "Deployment"]
    assert len(deployments) == 2
    return [c["securityContext"] for d in deployments for c in d["spec"]["template"]["spec"]["containers"]
            if c["name"] == "server"]  # fmt: skip


def _selectors(objs: list[dict[str, Any]]) -> list[str]:
    (claim,) = [o for o in objs if o["kind"] == "ResourceClaimTemplate"]
    (request,) = claim["spec"]["spec"]["devices"]["requests"]
    return [s["cel"]["expression"] for s in request.get("exactly", request)["selectors"]]


def test_no_capability_is_added_by_default(cli, tmp_path):
    for sc in _server_security(_render(cli, tmp_path, {})):
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False


def test_added_capabilities_reach_both_vllm_containers_and_all_stay_dropped(cli, tmp_path):
    objs = _render(cli, tmp_path, {"capabilities": {"add": ["IPC_LOCK", "SYS_ADMIN"]}})
    for sc in _server_security(objs):
        assert sc["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK", "SYS_ADMIN"]}
    text = "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "out").glob("*deployment*"))
    assert text.count("Pod Security Standards level: privileged (capabilities.add: IPC_LOCK, SYS_ADMIN)") == 2


def test_the_simulator_gets_no_added_capability(cli, tmp_path):
    objs = _render(cli, tmp_path, {"runtime": "sim", "capabilities": {"add": ["IPC_LOCK"]}})
    for sc in _server_security(objs):
        assert "add" not in sc["capabilities"]


@pytest.mark.parametrize("mode", ["dra-v1", "dra-v1beta1"])
def test_driver_versions_and_cel_are_anded_into_the_claim_selector(cli, tmp_path, mode):
    custom = f"{ATTRIBUTE}.matches('^2\\\\.(2[7-9]|[3-9][0-9])\\\\.')"
    config = {"resources_mode": mode, "neuron_driver": {"versions": ["2.30.2.0", "2.29.1.0"], "cel": custom}}
    (expression,) = _selectors(_render(cli, tmp_path, config))
    assert expression == (
        "device.attributes['neuron.aws.com'].instanceType == 'trn2.48xlarge'"
        f" && {ATTRIBUTE} in ['2.30.2.0', '2.29.1.0'] && ({custom})"
    )


def test_no_driver_clause_by_default(cli, tmp_path):
    (expression,) = _selectors(_render(cli, tmp_path, {}))
    assert "neuronDriverVersion" not in expression
