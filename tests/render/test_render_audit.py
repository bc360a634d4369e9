"""Render fields a real trn2 cluster acts on, checked against values worked out here from the config: the
startup probe's budget (Kubernetes restarts a pod that fails it, hours into a Neuron compilation), the order
``kubectl apply -f DIR`` reads the files in, and each pod's Pod Security Standards level."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from doubles.render_support import FIXED_PROMPTS
from spectrn.render import manifests as render
from spectrn.render.output import _notes, object_filename, write_objects


def _server_container(cfg: Any, variant: str) -> dict[str, Any]:
    objs = render.render_objects(cfg, run_id="audit", prompts=FIXED_PROMPTS)
    (dep,) = [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["labels"]["spectrn.io/variant"] == variant]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return c


@pytest.mark.parametrize(
    ("budget_s", "period_s", "failures", "timeout_s"),
    [
        (100, 30, 4, 10),  # 100 / 30 = 3.33: four periods, or the pod is killed before its budget is spent
        (17100, 30, 570, 10),  # the default: 17100 / 30 = 570 exactly
        (60, 5, 12, 5),  # a period under 10 s bounds the probe's own timeout
        (60, 600, 1, 10),  # a period longer than the budget: still one try
    ],
)
def test_startup_probe_allows_the_whole_budget_rounded_up(
    make_cfg: Any, budget_s: int, period_s: int, failures: int, timeout_s: int
) -> None:
    cfg = make_cfg({"probes": {"startup_budget_s": budget_s, "period_s": period_s}})
    for variant in ("baseline", "speculative"):
        probe = _server_container(cfg, variant)["startupProbe"]
        assert probe == {
            "httpGet": {"path": "/health", "port": "http"},
            "periodSeconds": period_s,
            "timeoutSeconds": timeout_s,
            "failureThreshold": failures,
        }


def test_object_files_are_numbered_from_01_with_two_digits_so_a_folder_applies_in_order(tmp_path: Path) -> None:
    objs = [{"kind": "ConfigMap", "metadata": {"name": f"cm-{i}"}} for i in range(11)]
    paths = write_objects(objs, tmp_path / "out")
    assert [p.name for p in paths][:2] == ["01-configmap-cm-0.yaml", "02-configmap-cm-1.yaml"]
    assert paths[-1].name == "11-configmap-cm-10.yaml"
    # kubectl apply -f DIR reads files in name order: that must be the render order
    assert sorted(p.name for p in paths) == [p.name for p in paths]
    assert object_filename(3, {"kind": "ResourceClaimTemplate", "metadata": {"name": "Spectrn_Neuron.16"}}) == (
        "03-resourceclaimtemplate-spectrn-neuron.16.yaml"
    )


def test_each_pod_is_labelled_with_its_pod_security_level(make_cfg: Any) -> None:
    notes = {}
    for runtime in ("sim", "neuron"):
        objs = render.render_objects(make_cfg({"runtime": runtime}), run_id="audit", prompts=FIXED_PROMPTS)
        notes[runtime] = {_notes(o)[0] for o in objs if o["kind"] == "Deployment"}
    assert notes == {
        "sim": {"Pod Security Standards level: restricted."},
        "neuron": {"Pod Security Standards level: baseline (root in the Neuron DLC, /dev/shm, S3 volume)."},
    }
