"""A Recreate rollout that takes time (``FakeKube.recreate_grace_ticks``): the Deployment reports the new
generation observed while its old pod is still Ready and Terminating, and no new pod exists yet. spectrn must
read that as "rolling", never as "Ready", and finish only when the new pod serves."""

from __future__ import annotations

from doubles.kube_fake import FakeKube
from doubles.kubehelp import make_cfg, run_deploy
from spectrn.deploy.apply import apply_plan
from spectrn.deploy.plan import make_plan
from spectrn.deploy.service import render_for_deploy
from spectrn.deploy.wait import observe_service

SD = "qwen-sd-vllm"


def _ready(pod: dict) -> bool:  # type: ignore[type-arg]
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in pod["status"].get("conditions") or [])


def _sd_pods(fake: FakeKube) -> list[dict]:  # type: ignore[type-arg]
    return [p for p in fake.kinds("Pod") if p["metadata"]["name"].startswith(SD)]


def test_new_generation_observed_with_the_old_pod_still_ready_is_not_ready(fake: FakeKube) -> None:
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    run_deploy(fake, cfg)
    (old,) = _sd_pods(fake)
    fake.recreate_grace_ticks = 3
    new_cfg = make_cfg(runtime="sim", resources_mode="device-plugin", num_speculative_tokens=5)
    apply_plan(fake, make_plan(fake, render_for_deploy(new_cfg)))
    dep = fake.find("Deployment", SD, "spectrn")
    assert dep is not None
    st = dep["status"]
    # the state a real cluster shows in the grace period: new generation observed, nothing updated, the old
    # pod still counted Ready
    assert st["observedGeneration"] == dep["metadata"]["generation"] == 2
    assert st["updatedReplicas"] == 0 and st["readyReplicas"] == 1
    (still,) = _sd_pods(fake)
    assert still["metadata"]["name"] == old["metadata"]["name"]
    assert _ready(still) and still["metadata"].get("deletionTimestamp")
    state = observe_service(fake, "spectrn", "speculative", SD)
    assert state.phase != "Ready" and state.window == "5"
    assert "rolling update" in state.detail
    # one tick later: still terminating, still no new pod (Recreate never overlaps the two)
    fake.sleep(1)
    assert [p["metadata"]["name"] for p in _sd_pods(fake)] == [old["metadata"]["name"]]
    assert observe_service(fake, "spectrn", "speculative", SD).phase != "Ready"


def test_deploy_waits_through_a_slow_recreate_and_ends_on_the_new_pod(fake: FakeKube) -> None:
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    run_deploy(fake, cfg)
    (old,) = _sd_pods(fake)
    fake.recreate_grace_ticks = 4
    report = run_deploy(fake, make_cfg(runtime="sim", resources_mode="device-plugin", num_speculative_tokens=5))
    spec = next(s for s in report.states if s.variant == "speculative")
    assert spec.phase == "Ready" and spec.window == "5"
    (new,) = _sd_pods(fake)
    assert new["metadata"]["name"] != old["metadata"]["name"] and _ready(new)
    assert not new["metadata"].get("deletionTimestamp")
    dep = fake.find("Deployment", SD, "spectrn")
    assert dep is not None and dep["status"]["updatedReplicas"] == 1 and dep["status"]["replicas"] == 1
