"""compile.py: one Job per configuration with the Deployment's own command line and artifact path;
artifact status through a running vLLM pod; Job application and waiting on the fake cluster."""

from __future__ import annotations

import subprocess

import pytest

from spectrn import render
from spectrn.compile import MARKER, apply_jobs, artifact_status, compile_jobs, job_name, prerequisites, wait_jobs
from spectrn.config import SpectrnConfig, build_config
from spectrn.deploy import deploy, render_for_deploy
from spectrn.errors import ConfigError
from spectrn.kube_fake import FakeKube


@pytest.fixture
def cfg() -> SpectrnConfig:
    return build_config({"s3": {"bucket": "my-models"}, "resources_mode": "device-plugin"}, environ={})


def _container(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]["containers"][0]


def test_one_job_per_configuration_mirrors_the_deployment(cfg: SpectrnConfig) -> None:
    jobs = compile_jobs(cfg, ["qwen3-0.6b", "qwen3-1.7b"], [5, 7])
    assert len(jobs) == 5 and len({j["metadata"]["name"] for j in jobs}) == 5
    assert all(j["kind"] == "Job" and j["apiVersion"] == "batch/v1" for j in jobs)
    spec_cfg = build_config(
        {**cfg.model_dump(mode="json"), "draft": "qwen3-0.6b", "num_speculative_tokens": 7}, environ={}
    )
    job = next(j for j in jobs if j["metadata"]["name"] == job_name(spec_cfg, True))
    dep = next(o for o in render.render_objects(spec_cfg, components=["speculative"]) if o["kind"] == "Deployment")
    jc, dc = _container(job), _container(dep)
    assert jc["args"] == dc["args"]  # the exact `vllm serve` arguments of the service it precompiles for
    assert jc["env"] == dc["env"]
    assert jc["image"] == dc["image"] and jc["resources"] == dc["resources"]
    env = {e["name"]: e.get("value") for e in jc["env"]}
    assert env["NEURON_COMPILED_ARTIFACTS"] == render.artifacts_path(spec_cfg, True)
    assert spec_cfg.artifact_key(True) in env["NEURON_COMPILED_ARTIFACTS"]
    script = jc["command"][2]
    assert jc["command"][:2] == ["/bin/bash", "-c"] and f"$ART/{MARKER}" in script and "vllm serve" in script
    assert job["metadata"]["labels"]["spectrn.io/window"] == "7"
    assert job["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "spectrn"
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert {v["name"] for v in pod["volumes"]} == {v["name"] for v in dep["spec"]["template"]["spec"]["volumes"]}
    base = next(j for j in jobs if j["metadata"]["labels"]["spectrn.io/variant"] == "baseline")
    assert "--speculative-config" not in _container(base)["args"]


def test_compile_script_is_valid_shell(cfg: SpectrnConfig) -> None:
    script = _container(compile_jobs(cfg, ["qwen3-1.7b"], [7], baseline=False)[0])["command"][2]
    subprocess.run(["bash", "-n", "-c", script], check=True)


def test_distinct_configurations_never_share_an_artifact_path(cfg: SpectrnConfig) -> None:
    jobs = compile_jobs(cfg, ["qwen3-0.6b", "qwen3-1.7b"], [5, 7, 10, 15])
    paths = [j["metadata"]["annotations"]["spectrn.io/artifacts"] for j in jobs]
    assert len(set(paths)) == len(paths)


def test_simulator_runtime_has_nothing_to_compile() -> None:
    sim = build_config({"runtime": "sim"}, environ={})
    with pytest.raises(ConfigError, match="nothing to compile"):
        compile_jobs(sim, ["qwen3-1.7b"], [7])
    assert set(artifact_status(None, sim, ["qwen3-1.7b"], [7]).values()) == {"not needed (simulator)"}


def test_artifact_status_through_a_running_pod(cfg: SpectrnConfig) -> None:
    fake = FakeKube()
    status = artifact_status(fake, cfg, ["qwen3-1.7b"], [5, 7])
    assert all(v.startswith("unknown") for v in status.values())
    deploy(fake, cfg, render_for_deploy(cfg, only="baseline"), clock=fake.clock, sleep=fake.sleep, poll_s=1)
    pod = next(p for p in fake.kinds("Pod") if p["status"].get("phase") == "Running")
    k7 = build_config({**cfg.model_dump(mode="json"), "num_speculative_tokens": 7}, environ={})
    fake.runs[pod["metadata"]["name"]].files[f"{render.artifacts_path(k7, True)}/{MARKER}"] = b"{}"
    status = artifact_status(fake, cfg, ["qwen3-1.7b"], [5, 7])
    assert status == {"baseline": "missing", "qwen3-1.7b-k5": "missing", "qwen3-1.7b-k7": "present"}


def test_apply_and_wait_on_the_fake_cluster(cfg: SpectrnConfig) -> None:
    fake = FakeKube()
    fake.job_finishes_without_collect = True
    jobs = compile_jobs(cfg, ["qwen3-1.7b"], [7])
    pre = prerequisites(cfg)
    assert {o["kind"] for o in pre} >= {"Namespace", "PersistentVolumeClaim"}
    names = apply_jobs(fake, jobs, pre)
    assert len(names) == 2 and all(fake.find("Job", n, cfg.namespace) for n in names)
    applied = sum(1 for c in fake.calls if c[0] == "apply")
    again = apply_jobs(fake, jobs)  # existing Jobs are left alone (same hash = same configuration)
    assert again == names and sum(1 for c in fake.calls if c[0] == "apply") == applied
    updates: list[str] = []
    states = wait_jobs(fake, cfg, names, on_update=updates.append, clock=fake.clock, sleep=fake.sleep, poll_s=1)
    assert set(states.values()) == {"Complete"} and updates
    fake2 = FakeKube()
    names2 = apply_jobs(fake2, jobs, pre)
    states2 = wait_jobs(fake2, cfg, names2, timeout_s=30, clock=fake2.clock, sleep=fake2.sleep, poll_s=1)
    assert set(states2.values()) == {"TimedOut"}
