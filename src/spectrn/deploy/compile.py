"""Precompiled Neuron artifacts: one Kubernetes Job per configuration, and which configurations have them.

A Neuron compile of one (target, draft, window, TP, batch, sequence length, image, dialect) configuration
takes hours on trn2. ``spectrn compile`` renders ``manifests/compile-job.yaml.j2`` once per sweep
configuration: the vLLM Neuron image running the Deployment's own ``vllm serve`` command line, writing into
the same ``NEURON_COMPILED_ARTIFACTS`` folder under the S3 mount (``render.server.artifacts_path``, keyed by
``SpectrnConfig.artifact_key``), exiting 0 once ``/health`` answers 200 after writing the marker file
``<artifacts>/.spectrn-compiled``. A sweep can then deploy each cell without waiting for compilation.

Artifact status (``artifact_status``) looks for that marker through ``kubectl exec``-style access into a
running spectrn vLLM pod (which mounts the bucket): ``present``, ``missing``, or ``unknown`` when no such pod
runs or the exec fails. It never guesses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from spectrn.configuration.config import SpectrnConfig
from spectrn.errors import ConfigError, DeployError, KubeError, one_line
from spectrn.labels import setup_label

MARKER = ".spectrn-compiled"
TEMPLATE = "compile-job.yaml.j2"
COMPONENT = "compile"

# The wrapper: vLLM compiles (or loads) the artifacts at start-up; /health turns 200 once it is serving.
# The text is the same for every configuration: it reads the artifact folder from NEURON_COMPILED_ARTIFACTS
# (the container's env), the port from the `vllm serve` arguments it passes on ("$@"), and derives the
# marker's artifact key from the folder name, so no configured value is ever part of the script.
WRAPPER = r"""set -u
ART="${NEURON_COMPILED_ARTIFACTS:?NEURON_COMPILED_ARTIFACTS is not set}"
MARK="$ART/__MARKER__"
if [ -e "$MARK" ]; then echo "spectrn compile: artifacts already present in $ART"; exit 0; fi
mkdir -p "$ART"
PORT=8000
PREV=""
for ARG in "$@"; do
  if [ "$PREV" = "--port" ]; then PORT="$ARG"; fi
  PREV="$ARG"
done
export SPECTRN_HEALTH_URL="http://127.0.0.1:${PORT}/health" SPECTRN_ARTIFACT_KEY="${ART##*/}" SPECTRN_MARKER="$MARK"
HEALTHY='import os, sys, urllib.request as u; r = u.urlopen(os.environ["SPECTRN_HEALTH_URL"], timeout=5)
sys.exit(0 if r.status == 200 else 1)'
MARKER='import json, os, time
with open(os.environ["SPECTRN_MARKER"], "w") as f:
    json.dump({"artifact_key": os.environ["SPECTRN_ARTIFACT_KEY"],
               "compiled_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, f)
    f.write("\n")'
echo "spectrn compile: compiling into $ART"
vllm serve "$@" &
PID=$!
trap 'kill "$PID" 2>/dev/null || true' TERM INT
while kill -0 "$PID" 2>/dev/null; do
  if python3 -c "$HEALTHY" 2>/dev/null; then
    python3 -c "$MARKER"
    echo "spectrn compile: done, marker $MARK written"
    kill "$PID" 2>/dev/null || true
    wait "$PID" 2>/dev/null || true
    exit 0
  fi
  sleep 15
done
wait "$PID"
RC=$?
echo "spectrn compile: vllm exited with code $RC before /health answered 200" >&2
exit 1
""".replace("__MARKER__", MARKER)


class CompileError(DeployError):
    """A compile Job failed or did not finish in time."""


def configurations(
    cfg: SpectrnConfig, drafts: Sequence[str], windows: Sequence[int], *, baseline: bool = True
) -> list[tuple[SpectrnConfig, bool]]:
    """``(config, speculative)`` for each configuration to compile, baseline first when asked for."""
    out: list[tuple[SpectrnConfig, bool]] = [(cfg, False)] if baseline else []
    for d in drafts:
        for w in windows:
            data = cfg.model_dump(mode="json")
            data.update(draft=d, num_speculative_tokens=w)
            try:
                out.append((SpectrnConfig.model_validate(data), True))
            except ValueError as e:
                raise ConfigError(f"draft {d} window {w}: {one_line(e)}", hint="fix --drafts / --windows") from None
    return out


def job_name(cfg: SpectrnConfig, speculative: bool) -> str:
    # The key's trailing hash already covers everything that changes compilation.
    return f"spectrn-compile-{cfg.artifact_key(speculative).rsplit('-', 1)[-1]}"


def compile_resources(cfg: SpectrnConfig, server: dict[str, Any]) -> dict[str, Any]:
    """The Deployment's resources (devices, memory) with the compile Job's own CPU (``compile.cpu``)."""
    out = {part: dict(value) if isinstance(value, dict) else value for part, value in server.items()}
    for part in ("requests", "limits"):
        out[part]["cpu"] = cfg.compile.cpu
    return out


def compile_job(cfg: SpectrnConfig, speculative: bool) -> dict[str, Any]:
    """The Job that precompiles one configuration (parsed back from YAML and checked)."""
    from spectrn.render.server import _server_ctx, artifacts_path
    from spectrn.render.templates import _labels, _Renderer

    if cfg.runtime != "neuron":
        raise ConfigError(
            f"runtime: {cfg.runtime!r} has nothing to compile",
            hint="compile Jobs are for runtime: neuron; the simulator needs no artifacts",
        )
    variant = "speculative" if speculative else "baseline"
    ctx = _server_ctx(cfg, variant)  # the Deployment's own image, args, env, devices and resources
    key = cfg.artifact_key(speculative)
    extra = {"spectrn.io/variant": variant, "spectrn.io/artifact-hash": key.rsplit("-", 1)[-1]}
    if speculative:
        extra["spectrn.io/window"] = str(cfg.num_speculative_tokens)
        extra["spectrn.io/draft"] = cfg.draft_label
    labels = _labels(cfg, COMPONENT, **extra)
    objs = _Renderer(cfg).render(
        TEMPLATE,
        name=job_name(cfg, speculative),
        labels=labels,
        artifacts=artifacts_path(cfg, speculative),
        deadline_s=cfg.probes.startup_budget_s + 3600,
        dra=ctx["dra"],
        claim_name=ctx["claim_name"],
        image=ctx["image"],
        command=["/bin/bash", "-c", WRAPPER, "spectrn-compile"],
        args=ctx["args"],
        env=ctx["env"],
        resources=compile_resources(cfg, ctx["resources"]),
        fs_group=ctx["fs_group"],
        scheduler_name=ctx["scheduler_name"],
    )
    if len(objs) != 1 or objs[0].get("kind") != "Job":
        raise ConfigError(f"{TEMPLATE} must render exactly one Job", hint="fix the template")
    return objs[0]


def compile_jobs(
    cfg: SpectrnConfig, drafts: Sequence[str], windows: Sequence[int], *, baseline: bool = True
) -> list[dict[str, Any]]:
    return [compile_job(c, spec) for c, spec in configurations(cfg, drafts, windows, baseline=baseline)]


def prerequisites(cfg: SpectrnConfig) -> list[dict[str, Any]]:
    """What a compile pod needs that the services also need: namespace, ServiceAccounts, S3 volume, devices."""
    from spectrn.render import manifests as render

    shared = [c for c in render.SHARED_COMPONENTS if c != "prompts"]
    return render.render_objects(cfg, components=shared)


def apply_jobs(kube: Any, jobs: Sequence[dict[str, Any]], prereqs: Sequence[dict[str, Any]] = ()) -> list[str]:
    """Apply the prerequisites (server-side apply: idempotent), then create the Jobs; a Job that already exists
    (same name = same configuration hash) is left alone, so re-running never restarts a compilation."""
    for obj in prereqs:
        kube.apply(obj)
    names = []
    for job in jobs:
        meta = job["metadata"]
        if kube.get("batch/v1", "Job", meta["name"], meta["namespace"]) is None:
            kube.apply(job)
        names.append(meta["name"])
    return names


def job_state(job: dict[str, Any] | None) -> str:
    if job is None:
        return "Absent"
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
            return str(c["type"])
    return "Running"


def wait_jobs(
    kube: Any,
    cfg: SpectrnConfig,
    names: Sequence[str],
    *,
    timeout_s: float | None = None,
    on_update: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 30.0,
) -> dict[str, str]:
    """Poll until every Job is Complete or Failed (or the timeout); returns name -> state."""
    limit = timeout_s if timeout_s is not None else cfg.probes.startup_budget_s + 3600
    deadline = clock() + limit
    states: dict[str, str] = {}
    while True:
        new = {n: job_state(kube.get("batch/v1", "Job", n, cfg.namespace)) for n in names}
        if new != states and on_update:
            on_update(", ".join(f"{n}: {s}" for n, s in new.items()))
        states = new
        if all(s in ("Complete", "Failed", "Absent") for s in states.values()):
            return states
        if clock() >= deadline:
            return {n: (s if s != "Running" else "TimedOut") for n, s in states.items()}
        sleep(poll_s)


def _probe_pod(kube: Any, cfg: SpectrnConfig) -> str | None:
    """A running spectrn vLLM pod (it mounts the bucket), or None."""
    for component in ("baseline", "speculative"):
        pods = kube.list("v1", "Pod", cfg.namespace, label_selector=f"spectrn.io/component={component}")
        for p in pods:
            if (p.get("status") or {}).get("phase") == "Running":
                return str(p["metadata"]["name"])
    return None


def artifact_status(
    kube: Any, cfg: SpectrnConfig, drafts: Sequence[str], windows: Sequence[int], *, baseline: bool = True
) -> dict[str, str]:
    """``present`` / ``missing`` / ``unknown`` per configuration label (``baseline``, ``<draft>-k<window>``)."""
    from spectrn.render.server import artifacts_path

    confs = configurations(cfg, drafts, windows, baseline=baseline)
    labels = ["baseline" if not spec else setup_label(c.draft, c.num_speculative_tokens, sep="-") for c, spec in confs]
    if cfg.runtime != "neuron":
        return dict.fromkeys(labels, "not needed (simulator)")
    try:
        pod = _probe_pod(kube, cfg)
    except KubeError:
        pod = None
    if pod is None:
        return dict.fromkeys(labels, "unknown (no running vLLM pod to look into the bucket)")
    out = {}
    for label, (c, spec) in zip(labels, confs, strict=True):
        marker = f"{artifacts_path(c, spec)}/{MARKER}"
        try:
            kube.exec(pod, cfg.namespace, ["test", "-e", marker], container="server", timeout_s=30)
            out[label] = "present"
        except KubeError as e:
            out[label] = "missing" if "exit status 1" in str(e) or "ExecFailed" in str(e) else f"unknown ({e})"
    return out
