"""Render fields a real trn2 cluster acts on, checked against values worked out here from the config: the
startup probe's budget (Kubernetes restarts a pod that fails it, hours into a Neuron compilation)."""

from __future__ import annotations

from typing import Any

import pytest

from doubles.render_support import FIXED_PROMPTS
from spectrn.render import manifests as render


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
