"""compile.py: one Job per configuration with the Deployment's own command line and artifact path;
artifact status through a running vLLM pod; Job application and waiting on the fake cluster."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from doubles.kube_fake import FakeKube
from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.sources import build_config
from spectrn.deploy.compile import MARKER, apply_jobs, artifact_status, compile_jobs, job_name, prerequisites, wait_jobs
from spectrn.deploy.service import deploy, render_for_deploy
from spectrn.errors import ConfigError
from spectrn.render import manifests as render
from spectrn.render import server


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
    assert env["NEURON_COMPILED_ARTIFACTS"] == server.artifacts_path(spec_cfg, True)
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
    fake.runs[pod["metadata"]["name"]].files[f"{server.artifacts_path(k7, True)}/{MARKER}"] = b"{}"
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


FAKE_VLLM = """#!{python}
import http.server, sys, time
args = sys.argv[2:]
port = int(args[args.index("--port") + 1])
if "{mode}" == "crash":
    sys.exit(3)
time.sleep(0.5)  # "compiling"
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


@pytest.mark.parametrize("mode", ["ok", "crash"])
def test_compile_wrapper_runs_against_a_stand_in_vllm(mode: str, tmp_path: Path) -> None:
    """The Job's script with a stand-in `vllm` on PATH: marker written and exit 0 once /health is 200; exit 1
    when vLLM dies first; a second run with the marker present exits at once."""
    import os
    import sys

    from spectrn.runtimes.launch import free_port

    port = free_port()
    cfg = build_config({"s3": {"bucket": "my-models"}, "resources_mode": "device-plugin", "port": port}, environ={})
    job = compile_jobs(cfg, ["qwen3-1.7b"], [7], baseline=False)[0]
    c = _container(job)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "vllm"
    fake.write_text(FAKE_VLLM.format(python=sys.executable, mode=mode))
    fake.chmod(0o755)
    art = tmp_path / "artifacts"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "NEURON_COMPILED_ARTIFACTS": str(art)}
    script = c["command"][2].replace("sleep 15", "sleep 0.2")  # poll faster than in a real Job
    cmd = [*c["command"][:2], script, c["command"][3], *c["args"]]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    if mode == "crash":
        assert proc.returncode == 1 and "exited with code 3" in proc.stderr
        assert not (art / MARKER).exists()
        return
    assert proc.returncode == 0, proc.stderr
    import socket

    with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
        sock.connect(("127.0.0.1", port))  # the wrapper stopped vLLM before exiting
    marker = (art / MARKER).read_text()
    assert "artifact_key" in marker and "compiled_at" in marker
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=20)
    assert again.returncode == 0 and "already present" in again.stdout


def test_compile_jobs_have_their_own_cpu_and_the_deployments_pod_settings(cfg: SpectrnConfig) -> None:
    big = build_config({**cfg.model_dump(mode="json"), "compile": {"cpu": "190"}}, environ={})
    (job,) = compile_jobs(big, ["qwen3-1.7b"], [7], baseline=False)
    dep = next(o for o in render.render_objects(big, components=["speculative"]) if o["kind"] == "Deployment")
    jc, dc = _container(job), _container(dep)
    assert jc["resources"]["requests"]["cpu"] == jc["resources"]["limits"]["cpu"] == "190"
    assert dc["resources"]["requests"]["cpu"] == "90"  # the service keeps resources.cpu
    others = {k: v for k, v in jc["resources"]["requests"].items() if k != "cpu"}
    assert others == {k: v for k, v in dc["resources"]["requests"].items() if k != "cpu"}  # devices, memory
    pod, dpod = job["spec"]["template"]["spec"], dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["fsGroup"] == dpod["securityContext"]["fsGroup"] == 1000  # writes the bucket
    assert pod["schedulerName"] == dpod["schedulerName"] == "my-scheduler"  # device-plugin mode


def test_the_wrapper_holds_no_configured_value(cfg: SpectrnConfig) -> None:
    from spectrn.deploy.compile import WRAPPER

    odd = build_config(
        {**cfg.model_dump(mode="json"), "port": 9321, "s3": {"bucket": "b-1", "mount_path": "/w"}}, environ={}
    )
    for job in compile_jobs(odd, ["qwen3-0.6b"], [5]):
        c = _container(job)
        assert c["command"] == ["/bin/bash", "-c", WRAPPER, "spectrn-compile"]
    assert "9321" not in WRAPPER and "/w/" not in WRAPPER and "$(" not in WRAPPER
