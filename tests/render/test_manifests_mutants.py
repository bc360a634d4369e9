"""The object list as ``spectrn render`` builds it: the whole text of the two ``ConfigError``s a wrong choice of
components gives (what the CLI prints after ``ConfigError:``), and which prompt file the load Job is told to read
when it is rendered alone or with prompts given in place of the packaged sets."""

from __future__ import annotations

from typing import Any

import pytest

from spectrn.errors import ConfigError
from spectrn.render import manifests as render

BASELINE = "baseline=http://qwen-vllm.spectrn.svc.cluster.local:8000"
SPECULATIVE = "speculative=http://qwen-sd-vllm.spectrn.svc.cluster.local:8000"


def _config_error(cfg: Any, **kw: Any) -> str:
    with pytest.raises(ConfigError) as info:
        render.render_objects(cfg, **kw)
    assert info.value.exit_code == 2
    return str(info.value)


def _job_args(objs: list[dict[str, Any]]) -> list[str]:
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (c,) = job["spec"]["template"]["spec"]["containers"]
    return c["args"]


# ---- refused choices ------------------------------------------------------------------------------


def test_unknown_components_are_named_sorted_with_every_component_to_choose_from(make_cfg: Any) -> None:
    text = _config_error(make_cfg(), components=["namespace", "vllm", "gpu"])
    assert text == (
        "unknown component(s) gpu, vllm (fix: choose from namespace, serviceaccounts, storage, devices, prompts, "
        "baseline, speculative, loadgen)"
    )


def test_the_load_job_asked_for_without_a_run_id_is_refused_with_how_to_give_one(make_cfg: Any) -> None:
    text = _config_error(make_cfg(), components=["loadgen"])
    assert text == "the load Job needs a run id (fix: pass run_id (spectrn render --run-id ID))"


# ---- the prompt file the load Job reads -------------------------------------------------------------


def test_the_load_job_rendered_alone_reads_the_configured_packaged_prompt_set(make_cfg: Any) -> None:
    objs = render.render_objects(make_cfg({"bench": {"prompts": "structured"}}), components=["loadgen"], run_id="r1")
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("ConfigMap", "spectrn-config-r1"),
        ("Job", "spectrn-loadgen-r1"),
    ]
    assert _job_args(objs) == [
        "loadgen",
        "--endpoint",
        BASELINE,
        "--endpoint",
        SPECULATIVE,
        "--config",
        "/etc/spectrn/spectrn.yaml",
        "--prompts-file",
        "/etc/spectrn/prompts/structured.yaml",
        "--run-id",
        "r1",
        "--out",
        "/results/r1",
        "--hold-until-collected",
        "3600",
        "--quiet",
    ]


def test_given_prompts_fill_the_prompt_configmap_and_are_the_file_the_load_job_reads(make_cfg: Any) -> None:
    given = {"user-prompts.yaml": "name: mine\nprompts:\n  - id: a\n    text: hello\n"}
    objs = render.render_objects(make_cfg({"bench": {"prompts": "structured"}}), run_id="r2", prompts=given)
    (prompts_cm,) = [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] != "spectrn-config-r2"]
    assert prompts_cm["data"] == {"user-prompts.yaml": "name: mine\nprompts:\n  - id: a\n    text: hello\n"}
    assert _job_args(objs) == [
        "loadgen",
        "--endpoint",
        BASELINE,
        "--endpoint",
        SPECULATIVE,
        "--config",
        "/etc/spectrn/spectrn.yaml",
        "--prompts-file",
        "/etc/spectrn/prompts/user-prompts.yaml",
        "--run-id",
        "r2",
        "--out",
        "/results/r2",
        "--hold-until-collected",
        "3600",
        "--quiet",
    ]
