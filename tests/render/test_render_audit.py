"""Render fields a real trn2 cluster acts on, checked against values worked out here from the config: the
startup probe's budget (Kubernetes restarts a pod that fails it, hours into a Neuron compilation), the order
``kubectl apply -f DIR`` reads the files in, and each pod's Pod Security Standards level."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from doubles.render_support import FIXED_PROMPTS
from spectrn.render import load_job
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


def _job_container(cfg: Any, engine: str, **kw: Any) -> dict[str, Any]:
    objs = load_job.render_load_job(cfg, "audit", engine, prompts=FIXED_PROMPTS, **kw)
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (c,) = job["spec"]["template"]["spec"]["containers"]
    return c


@pytest.mark.parametrize(
    ("ignore_eos", "params"),
    [
        # fixed lengths: every request exactly max_tokens, so min_tokens = max_tokens as well
        (True, {"temperature": 0.0, "ignore_eos": True, "min_tokens": 200}),
        (False, {"temperature": 0.0, "ignore_eos": False}),
        (None, {"temperature": 0.0}),  # unset: the published experiment's natural ends
    ],
)
def test_llmperf_job_sends_the_sampling_params_the_output_lengths_need(
    make_cfg: Any, ignore_eos: bool | None, params: dict[str, Any]
) -> None:
    cfg = make_cfg({"bench": {"ignore_eos": ignore_eos, "max_tokens": 200, "temperature": 0.0}})
    env = {e["name"]: e.get("value") for e in _job_container(cfg, "llmperf")["env"]}
    assert json.loads(env["SPECTRN_SAMPLING_PARAMS"]) == params


def test_a_load_pod_without_a_hold_is_not_told_to_hold(make_cfg: Any) -> None:
    args = _job_container(make_cfg({}), "spectrn", hold_s=0)["args"]
    assert "--hold-until-collected" not in args and args[-1] == "--quiet"
    args = _job_container(make_cfg({}), "spectrn", hold_s=5)["args"]
    assert args[args.index("--hold-until-collected") + 1] == "5"


def test_llmperf_runs_the_first_load_level_and_budgets_its_waves(make_cfg: Any) -> None:
    cfg = make_cfg({"bench": {"concurrency": [2, 8], "requests": 9, "timeout_s": 100}})
    env = {e["name"]: e.get("value") for e in _job_container(cfg, "llmperf")["env"]}
    # 9 requests in waves of 2: 5 waves of at most 100 s each
    assert (env["SPECTRN_CONCURRENCY"], env["SPECTRN_REQUESTS"], env["SPECTRN_RUN_TIMEOUT_S"]) == ("2", "9", "500")


def test_a_non_default_port_reaches_the_server_its_container_and_its_service(make_cfg: Any) -> None:
    cfg = make_cfg({"port": 8080})
    objs = render.render_objects(cfg, run_id="audit", prompts=FIXED_PROMPTS)
    for variant in ("baseline", "speculative"):
        c = _server_container(cfg, variant)
        assert c["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
        assert c["args"][c["args"].index("--port") + 1] == "8080"
    services = [o for o in objs if o["kind"] == "Service"]
    assert len(services) == 2
    for svc in services:
        assert svc["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}]
