"""The wait for both services at its edges: when a Deployment's rollout counts as complete (status fields the
API server omits when zero, a generation not yet observed, a Deployment scaled to 0), which pods are looked at
and in which phase, the exact reads it sends (selectors, log tails, previous logs, the watch), the detail and
diagnosis shown, the age and window columns, and the wait loop's timing (grace period, its reset, transient
errors, watch failures) and whole failure messages.

Objects are written by hand in the shapes the API server returns (``DeploymentStatus`` and ``PodStatus`` fields,
``omitempty`` counts left out when zero); no controller runs: the fake's watch only lets the injected clock run,
and sleeps are recorded. Every expected state, request and message is written out in the test."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import spectrn.deploy.wait as wait_module
from doubles.kube_fake import FakeKube
from spectrn.deploy.wait import ServiceState, age_of, observe_service, wait_ready, window_of
from spectrn.errors import DeployError
from spectrn.kube.api import KubeApiError, ObjList

Obj = dict[str, Any]
NS = "spectrn"
MANAGED = "app.kubernetes.io/managed-by=spectrn"
RV = "4711"


class Cluster(FakeKube):
    """The fake with hand-made objects and no controller: records each read with every argument as sent; its
    watch lets the clock run ``timeout_s`` and reports no event; ``before_get`` steps run one per Deployment read
    (the first request of each loop of the wait), to change the objects or to fail that read."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[Any, ...]] = []
        self.sleeps: list[float] = []
        self.before_get: list[Callable[[], None]] = []
        self.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        self.requests.append(("get", api_version, kind, name, namespace))
        if kind == "Deployment" and self.before_get:
            self.before_get.pop(0)()
        return super().get(api_version, kind, name, namespace)

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjList:
        self.requests.append(("list", api_version, kind, namespace, label_selector))
        return FakeKube.list_meta(self, api_version, kind, namespace, label_selector)[0]

    def list_meta(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[ObjList, str]:
        self.requests.append(("list_meta", api_version, kind, namespace, label_selector))
        return FakeKube.list_meta(self, api_version, kind, namespace, label_selector)[0], RV

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_s: float = 30,
    ) -> Iterator[tuple[str, Obj]]:
        self.requests.append(("watch", api_version, kind, namespace, label_selector, resource_version, timeout_s))
        self._check_fail("watch", kind)
        self.now += timeout_s
        return iter(())

    def pod_logs(
        self,
        name: str,
        namespace: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        self.requests.append(("logs", name, namespace, tail_lines, previous))
        return super().pod_logs(name, namespace, container=container, tail_lines=tail_lines, previous=previous)

    def events_for(self, kind: str, name: str, namespace: str) -> ObjList:
        self.requests.append(("events", kind, name, namespace))
        return super().events_for(kind, name, namespace)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


SELECTOR = {"app": "qwen-sd-vllm", "tier": "server"}
COMPLETE = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}
SCHEDULED = {"type": "PodScheduled", "status": "True"}
NOT_READY = {"type": "Ready", "status": "False"}


def deployment(
    fake: Cluster,
    status: Obj,
    *,
    name: str = "qwen-sd-vllm",
    replicas: int = 1,
    generation: int = 1,
    args: list[str] | None = None,
    created: str = "2026-01-01T00:00:00Z",
) -> None:
    fake.put(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": name,
                "namespace": NS,
                "uid": f"uid-{name}",
                "generation": generation,
                "creationTimestamp": created,
            },
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"tier": "server", "app": name}},
                "template": {
                    "metadata": {"labels": {"app": name, "tier": "server"}},
                    "spec": {"containers": [{"name": "server", "image": "vllm:1", "args": args or []}]},
                },
            },
            "status": status,
        }
    )


def pod(fake: Cluster, name: str, status: Obj, *, app: str = "qwen-sd-vllm") -> None:
    fake.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": app, "tier": "server"}},
            "spec": {"containers": [{"name": "server", "image": "vllm:1"}]},
            "status": status,
        }
    )


def event(fake: Cluster, pod_name: str, reason: str, message: str, etype: str = "Warning") -> None:
    fake.events.append(
        {
            "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": NS},
            "type": etype,
            "reason": reason,
            "message": message,
            "count": 1,
        }
    )


def starting(restarts: int = 0, last: Obj | None = None) -> Obj:
    """A scheduled, running pod whose server is not ready yet."""
    cs = {"name": "server", "image": "vllm:1", "state": {"running": {}}, "restartCount": restarts}
    if last is not None:
        cs["lastState"] = last
    return {"phase": "Running", "conditions": [SCHEDULED, NOT_READY], "containerStatuses": [cs]}


def waiting(reason: str) -> Obj:
    cs = {"name": "server", "image": "vllm:1", "state": {"waiting": {"reason": reason}}, "restartCount": 0}
    return {"phase": "Pending", "conditions": [SCHEDULED], "containerStatuses": [cs]}


def unscheduled(message: str, reason: str | None = "Unschedulable") -> Obj:
    cond = {"type": "PodScheduled", "status": "False", "message": message}
    if reason:
        cond["reason"] = reason
    return {"phase": "Pending", "conditions": [cond]}


def observe(fake: Cluster, variant: str = "speculative", name: str = "qwen-sd-vllm") -> ServiceState:
    return observe_service(fake, NS, variant, name, starting_label="Starting")


def summary(s: ServiceState) -> tuple[str, int, int, str]:
    return (s.phase, s.ready, s.desired, s.detail)


# ---- when a rollout is complete ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "generation", "status", "expected"),
    [
        # two replicas wanted, one of each count: half done
        (2, 1, {**COMPLETE}, ("Creating", 1, 2, "rolling update: waiting for the new pod")),
        # a new template (generation 2) the controller has not observed yet
        (1, 2, {**COMPLETE}, ("Creating", 1, 1, "rolling update: waiting for the new pod")),
        # just created: the controller has written no status yet
        (1, 1, {}, ("Creating", 0, 1, "waiting for the pod")),
        # the pod is not ready: readyReplicas and availableReplicas are 0, so left out
        (
            1,
            1,
            {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1},
            ("Creating", 0, 1, "waiting for the pod"),
        ),
        # the ready pod is the old template's: updatedReplicas 0, left out
        (
            1,
            2,
            {"observedGeneration": 2, "replicas": 1, "readyReplicas": 1, "availableReplicas": 1},
            ("Creating", 1, 1, "rolling update: waiting for the new pod"),
        ),
        # ready but not yet available (minReadySeconds): availableReplicas 0, left out
        (
            1,
            1,
            {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1},
            ("Creating", 1, 1, "rolling update: waiting for the new pod"),
        ),
        # scaled to 0 and observed: every count is 0, so only observedGeneration is left
        (0, 1, {"observedGeneration": 1}, ("Ready", 0, 0, "")),
        # scaled to 0, not observed yet
        (0, 1, {}, ("Creating", 0, 0, "waiting for the pod")),
        (
            2,
            3,
            {"observedGeneration": 3, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2},
            ("Ready", 2, 2, ""),
        ),
    ],
)
def test_ready_only_when_every_count_of_the_observed_generation_is_reached(
    replicas: int, generation: int, status: Obj, expected: tuple[str, int, int, str]
) -> None:
    fake = Cluster()
    deployment(fake, status, replicas=replicas, generation=generation)
    assert summary(observe(fake)) == expected


def test_a_ready_pod_of_an_unfinished_rollout_is_not_looked_at() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1})
    ready = {
        "phase": "Running",
        "conditions": [SCHEDULED, {"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": "server", "ready": True, "restartCount": 0, "state": {"running": {}}}],
    }
    pod(fake, "qwen-sd-vllm-0", ready)
    s = observe(fake)
    assert summary(s) == ("Creating", 1, 1, "rolling update: waiting for the new pod")
    assert [r[0] for r in fake.requests] == ["get", "list"]  # no events nor logs of the ready pod


# ---- the pods' phase and detail -------------------------------------------------------------------------


def test_a_pod_waiting_for_its_init_containers_is_pulling() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", waiting("PodInitializing"))
    assert summary(observe(fake)) == ("Pulling", 0, 1, "PodInitializing")


def test_a_pod_the_scheduler_has_not_seen_yet_is_scheduling_with_no_detail() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", {"phase": "Pending"})  # no condition yet
    s = observe(fake)
    assert (summary(s), s.diagnosis, s.logs, s.events) == (("Scheduling", 0, 1, ""), None, [], [])


def test_an_old_pod_serving_beside_a_new_pod_with_no_detail_is_named_without_a_colon() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 2, "readyReplicas": 1, "availableReplicas": 1})
    pod(fake, "p-new", {"phase": "Pending"})
    assert summary(observe(fake)) == ("Scheduling", 1, 1, "rolling update (old pod serving)")


def test_an_old_pod_serving_keeps_the_new_pods_detail_whole() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 2, "readyReplicas": 1, "availableReplicas": 1})
    pod(fake, "p-new", starting())
    fake.logs["p-new"] = "INFO waiting for the NEFF cache: \nINFO loading shards: "
    s = observe(fake)
    assert summary(s) == ("Starting", 1, 1, "rolling update (old pod serving): INFO loading shards: ")


def test_a_scheduling_pod_is_less_advanced_than_a_pulling_one_listed_before_it() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 2}, replicas=2)
    pod(fake, "a-pulling", waiting("ContainerCreating"))
    pod(fake, "b-scheduling", unscheduled("queued behind another pod", reason=None))
    event(fake, "b-scheduling", "Scheduled", "waiting", etype="Normal")
    s = observe(fake)
    assert summary(s) == ("Scheduling", 0, 2, "queued behind another pod")
    assert s.events == ["Normal Scheduled: waiting"]


def test_of_two_pods_in_the_same_phase_the_first_one_is_shown() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 2}, replicas=2)
    pod(fake, "a", unscheduled("first in the queue", reason=None))
    pod(fake, "b", unscheduled("second in the queue", reason=None))
    event(fake, "a", "Queued", "a's event", etype="Normal")
    event(fake, "b", "Queued", "b's event", etype="Normal")
    s = observe(fake)
    assert (s.phase, s.detail, s.events) == ("Scheduling", "first in the queue", ["Normal Queued: a's event"])


def test_a_starting_pod_shows_its_last_log_line_and_last_ten_lines() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", starting())
    fake.logs["p-0"] = "".join(f"line {i}\n" for i in range(1, 13))
    s = observe(fake)
    assert summary(s) == ("Starting", 0, 1, "line 12")
    assert s.logs == [f"line {i}" for i in range(3, 13)]
    assert fake.requests == [
        ("get", "apps/v1", "Deployment", "qwen-sd-vllm", NS),
        ("list", "v1", "Pod", NS, "app=qwen-sd-vllm,tier=server"),
        ("events", "Pod", "p-0", NS),
        ("logs", "p-0", NS, 20, False),
    ]


def test_a_starting_pod_without_log_lines_is_waiting_for_health() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", starting())
    s = observe(fake)
    assert (summary(s), s.logs) == (("Starting", 0, 1, "waiting for /health"), [])


def test_logs_that_cannot_be_read_leave_the_pod_waiting_for_health() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", starting())
    fake.logs["p-0"] = "never read\n"
    fake.fail_next("logs", kind="Pod", status=500)
    s = observe(fake)
    assert (summary(s), s.logs, s.diagnosis) == (("Starting", 0, 1, "waiting for /health"), [], None)


def test_a_pulling_pod_that_never_restarted_has_no_logs_read() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", waiting("ContainerCreating"))
    s = observe(fake)
    assert (summary(s), s.logs) == (("Pulling", 0, 1, "ContainerCreating"), [])
    assert [r[0] for r in fake.requests] == ["get", "list", "events"]


@pytest.mark.parametrize(
    ("restarts", "last"),
    [
        (2, {}),  # restarted, the previous container's record already gone
        (0, {"terminated": {"exitCode": 1, "reason": "Error"}}),  # a termination recorded, no restart counted
    ],
)
def test_a_pod_that_restarted_has_its_previous_logs_read(restarts: int, last: Obj) -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", starting(restarts, last))
    fake.previous_logs["p-0"] = "Traceback\nValueError: bad flag\n"
    s = observe(fake)
    assert fake.requests[2:] == [
        ("events", "Pod", "p-0", NS),
        ("logs", "p-0", NS, 20, True),
        ("logs", "p-0", NS, 20, False),
    ]
    assert (summary(s), s.logs) == (("Starting", 0, 1, "waiting for /health"), ["Traceback", "ValueError: bad flag"])


def test_a_startup_probe_kill_before_any_restart_shows_the_current_log_lines() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", starting())
    fake.logs["p-0"] = "compiling graph 3/9\n"
    event(fake, "p-0", "Killing", "Container server failed startup probe, will be restarted", etype="Normal")
    s = observe(fake)
    assert s.phase == "Failed"
    assert s.diagnosis is not None
    assert (s.diagnosis.cause, s.diagnosis.logs) == (
        "startup probe failed: the container was restarted before it became healthy",
        ["compiling graph 3/9"],
    )


def test_a_startup_probe_kill_seen_while_the_pod_initializes_again_is_diagnosed() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", waiting("PodInitializing"))
    event(fake, "p-0", "Killing", "Container server failed startup probe, will be restarted", etype="Normal")
    s = observe(fake)
    assert s.diagnosis is not None
    assert (s.phase, s.diagnosis.cause, s.diagnosis.logs) == (
        "Failed",
        "startup probe failed: the container was restarted before it became healthy",
        [],
    )


def test_a_pod_without_a_diagnosis_does_not_erase_an_earlier_pods() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 2}, replicas=2)
    pod(fake, "a", {"phase": "Pending", "conditions": [SCHEDULED]})
    event(fake, "a", "FailedMount", "bucket not found")
    pod(fake, "b", {"phase": "Pending", "conditions": [SCHEDULED]})
    s = observe(fake)
    assert s.diagnosis is not None
    assert (s.phase, s.diagnosis.cause, s.diagnosis.pod, s.detail) == (
        "Starting",
        "volume cannot be mounted",
        "a",
        "volume cannot be mounted: bucket not found",
    )


def test_of_two_fatal_diagnoses_the_first_pods_is_kept() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 2}, replicas=2)
    pod(fake, "a", unscheduled("0/3 nodes are available: 3 node(s) had untolerated taint"))
    pod(fake, "b", unscheduled("0/3 nodes are available: 3 Insufficient memory"))
    s = observe(fake)
    assert (s.phase, s.detail) == ("Failed", "Unschedulable: 0/3 nodes are available: 3 node(s) had untolerated taint")


def test_a_long_deployment_failure_is_cut_at_300_characters() -> None:
    fake = Cluster()
    message = "admission webhook denied the request: " + "x" * 400
    deployment(
        fake,
        {
            "observedGeneration": 1,
            "conditions": [{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": message}],
        },
    )
    s = observe(fake)
    head = "pods cannot be created (FailedCreate): admission webhook denied the request: "
    assert (s.phase, s.detail) == ("Failed", head + "x" * (300 - len(head)))
    assert len(s.detail) == 300


def test_a_long_pod_failure_is_cut_at_300_characters() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1})
    pod(fake, "p-0", unscheduled("0/9 nodes are available: " + "y" * 400))
    s = observe(fake)
    head = "Unschedulable: 0/9 nodes are available: "
    assert (s.phase, s.detail) == ("Failed", head + "y" * (300 - len(head)))


# ---- image, window and age columns ---------------------------------------------------------------------


def test_the_baseline_has_no_window_even_with_a_speculation_flag() -> None:
    fake = Cluster()
    deployment(fake, dict(COMPLETE), name="qwen-vllm", args=["--num-speculative-tokens", "3"])
    deployment(fake, dict(COMPLETE), args=["--num-speculative-tokens", "3"])
    base = observe(fake, "baseline", "qwen-vllm")
    spec = observe(fake, "speculative", "qwen-sd-vllm")
    assert (base.window, base.image, spec.window, spec.image) == ("-", "vllm:1", "3", "vllm:1")


@pytest.mark.parametrize(
    ("containers", "window"),
    [
        ([{"command": ["vllm", "serve", "--num-speculative-tokens", "7"]}], "7"),
        ([{"command": ["spectrn", "sim", "serve"], "args": ["--window=2"]}], "2"),
        ([{"name": "sidecar", "args": ["--port", "9"]}, {"name": "server", "args": ["--window", "4"]}], "4"),
        ([{"args": ["--window"]}, {"command": ["5"]}], "-"),  # a flag's value is in its own container
    ],
)
def test_the_window_is_read_from_each_containers_command_and_args(containers: list[Obj], window: str) -> None:
    assert window_of({"spec": {"template": {"spec": {"containers": containers}}}}) == window


def test_the_age_column_counts_from_the_deployments_creation(monkeypatch: pytest.MonkeyPatch) -> None:
    created = 1_767_225_600.0  # 2026-01-01T00:00:00Z
    now = created + 2 * 86400 + 3 * 3600 + 5 * 60
    monkeypatch.setattr(wait_module, "time", types.SimpleNamespace(time=lambda: now))
    fake = Cluster()
    deployment(fake, dict(COMPLETE), created="2026-01-01T00:00:00Z")
    assert observe(fake).age == "2d03h"


@pytest.mark.parametrize(
    ("timestamp", "now", "age"),
    [
        ("2026-01-01T00:00:00Z", 1_767_225_600.0, "0m00s"),
        ("2026-01-01T00:00:00Z", 1_767_225_600.0 - 30, "0m00s"),  # the client's clock behind the server's
        ("2026-01-01T00:00:00Z", 1_767_225_600.0 + 3 * 3600 + 7 * 60, "3h07m"),
        ("2026-01-01T00:00:00+00:00", 1_767_225_600.0 + 61, "1m01s"),
        ("", 1_767_225_600.0, ""),
        ("yesterday", 1_767_225_600.0, ""),
    ],
)
def test_age_of_an_rfc3339_timestamp(timestamp: str, now: float, age: str) -> None:
    assert age_of(timestamp, now=now) == age


# ---- the wait loop ----------------------------------------------------------------------------------------


def wait(fake: Cluster, services: list[tuple[str, str]], **kw: Any) -> list[ServiceState]:
    kw.setdefault("timeout_s", 600)
    kw.setdefault("poll_s", 7.0)
    kw.setdefault("grace_s", 60.0)
    return wait_ready(
        fake,
        NS,
        services,
        startup_budget_s=3600,
        starting_label="Starting",
        clock=fake.clock,
        sleep=fake.sleep,
        **kw,
    )


def becomes_ready(fake: Cluster) -> Callable[[], None]:
    return lambda: deployment(fake, dict(COMPLETE))


def test_each_loop_reads_the_service_then_watches_the_managed_pods_from_the_listed_version() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    fake.before_get = [lambda: None, becomes_ready(fake)]
    states = wait(fake, [("speculative", "qwen-sd-vllm")])
    assert [s.phase for s in states] == ["Ready"]
    assert fake.requests == [
        ("get", "apps/v1", "Deployment", "qwen-sd-vllm", NS),
        ("list", "v1", "Pod", NS, "app=qwen-sd-vllm,tier=server"),
        ("list_meta", "v1", "Pod", NS, MANAGED),
        ("watch", "v1", "Pod", NS, MANAGED, RV, 7.0),
        ("get", "apps/v1", "Deployment", "qwen-sd-vllm", NS),
        ("list_meta", "v1", "Pod", NS, MANAGED),
    ]


def transient(status: int) -> Callable[[], None]:
    def fail() -> None:
        raise KubeApiError(f"get Deployment qwen-sd-vllm: HTTP {status}", status=status)

    return fail


def test_the_transient_error_count_starts_again_after_a_good_read() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    burst = [transient(s) for s in (0, 429, 500, 503, 0, 429)]
    fake.before_get = [*burst, lambda: None, *burst, becomes_ready(fake)]
    states = wait(fake, [("speculative", "qwen-sd-vllm")])
    assert [s.phase for s in states] == ["Ready"]
    assert fake.sleeps == [7.0] * 12


def test_the_seventh_transient_error_in_a_row_ends_the_wait_with_a_hint() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    fake.before_get = [transient(429)] * 7
    with pytest.raises(DeployError) as err:
        wait(fake, [("speculative", "qwen-sd-vllm")])
    assert err.value.message == "lost contact with the API server while waiting: get Deployment qwen-sd-vllm: HTTP 429"
    assert err.value.hint == "the objects are applied; re-run `spectrn deploy` (it changes nothing) to keep waiting"
    assert fake.sleeps == [7.0] * 6


@pytest.mark.parametrize("status", [0, 429, 500, 503])
def test_a_watch_that_fails_for_a_while_is_waited_out_with_a_sleep(status: int) -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    fake.before_get = [lambda: None, becomes_ready(fake)]
    fake.fail_next("watch", kind="Pod", status=status)
    assert [s.phase for s in wait(fake, [("speculative", "qwen-sd-vllm")])] == ["Ready"]
    assert fake.sleeps == [7.0]


def test_an_expired_watch_re_lists_at_once() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    fake.before_get = [lambda: None, becomes_ready(fake)]
    fake.fail_next("watch", kind="Pod", status=410, reason="Expired")
    assert [s.phase for s in wait(fake, [("speculative", "qwen-sd-vllm")])] == ["Ready"]
    assert fake.sleeps == []


def test_a_forbidden_watch_is_raised() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    fake.fail_next("watch", kind="Pod", status=403, reason="Forbidden", message="watch is forbidden")
    with pytest.raises(KubeApiError, match="watch is forbidden") as err:
        wait(fake, [("speculative", "qwen-sd-vllm")])
    assert err.value.status == 403
    assert fake.sleeps == []


def crashing() -> Obj:
    cs = {
        "name": "server",
        "image": "vllm:1",
        "restartCount": 2,
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s restarting failed container"}},
    }
    return {"phase": "Running", "conditions": [SCHEDULED, NOT_READY], "containerStatuses": [cs]}


def test_a_crash_loop_ends_the_wait_at_once_with_its_whole_message() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", crashing())
    event(fake, "p-0", "BackOff", "Back-off restarting failed container")
    fake.previous_logs["p-0"] = "Traceback (most recent call last):\nValueError: unknown flag --foo\n"
    start = fake.clock()
    with pytest.raises(DeployError) as err:
        wait(fake, [("speculative", "qwen-sd-vllm")], grace_s=600.0)
    assert fake.clock() == start
    assert err.value.message == (
        "speculative service qwen-sd-vllm: CrashLoopBackOff: container server keeps exiting (exit code 1, "
        "restarts 2): back-off 20s restarting failed container\n"
        "  recent events:\n"
        "    Warning BackOff: Back-off restarting failed container\n"
        "  last log lines:\n"
        "    Traceback (most recent call last):\n"
        "    ValueError: unknown flag --foo\n"
        "objects are left in place for inspection; `spectrn teardown` removes them"
    )
    assert err.value.hint == (
        "speculative: read the last log lines (`kubectl logs --previous`); a bad vLLM flag, model path or "
        "speculation setting is the usual cause: fix it in spectrn.yaml and re-run `spectrn deploy`"
    )


def test_a_failed_startup_probe_ends_the_wait_at_once() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", starting(restarts=1, last={"terminated": {"exitCode": 137, "reason": "Error"}}))
    event(fake, "p-0", "Killing", "Container server failed startup probe, will be restarted", etype="Normal")
    start = fake.clock()
    with pytest.raises(DeployError) as err:
        wait(fake, [("speculative", "qwen-sd-vllm")], grace_s=600.0)
    assert fake.clock() == start
    assert err.value.message.startswith(
        "speculative service qwen-sd-vllm: startup probe failed: the container was restarted before it became "
        "healthy: Container server failed startup probe, will be restarted\n"
    )


def test_an_unschedulable_pod_ends_the_wait_exactly_when_the_grace_period_is_over() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", unscheduled("0/1 nodes are available: 1 Too many pods"))
    start = fake.clock()
    with pytest.raises(DeployError, match=r"^speculative service qwen-sd-vllm: Unschedulable: 0/1 nodes"):
        wait(fake, [("speculative", "qwen-sd-vllm")], poll_s=5.0, grace_s=10.0)
    assert fake.clock() - start == 10.0  # fatal at 0, 5, 10: 10 s of grace


def test_the_grace_period_starts_again_when_the_failure_goes_away() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", unscheduled("0/1 nodes are available: 1 Too many pods"))

    def scheduled() -> None:
        pod(fake, "p-0", waiting("ContainerCreating"))

    def unschedulable_again() -> None:
        pod(fake, "p-0", unscheduled("0/1 nodes are available: 1 Too many pods"))

    fake.before_get = [lambda: None, scheduled, unschedulable_again]
    start = fake.clock()
    with pytest.raises(DeployError, match="Unschedulable"):
        wait(fake, [("speculative", "qwen-sd-vllm")], poll_s=5.0, grace_s=10.0)
    assert fake.clock() - start == 20.0  # fatal at 0, not at 5, fatal again from 10: gives up at 20


# ---- what a timeout says ------------------------------------------------------------------------------------


def test_a_timeout_without_any_detail_says_the_phase_and_how_to_go_on() -> None:
    fake = Cluster()
    with pytest.raises(DeployError) as err:
        wait(fake, [("baseline", "nope")], timeout_s=14, poll_s=7.0)
    assert err.value.message == (
        "baseline service nope: not ready after 14 s (phase Absent)\n"
        "objects are left in place for inspection; `spectrn teardown` removes them"
    )
    assert err.value.hint == (
        "baseline: re-run with a longer --timeout, or inspect with `kubectl describe pod` / `spectrn status`"
    )


def test_a_timeout_of_two_services_names_each_with_its_events_logs_and_hint() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1}, name="qwen-vllm")
    pod(fake, "base-0", unscheduled("waiting for a node to join", reason=None), app="qwen-vllm")
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "spec-0", starting())
    event(fake, "spec-0", "Pulled", "image vllm:1 already present", etype="Normal")
    event(fake, "spec-0", "Started", "started container server", etype="Normal")
    fake.logs["spec-0"] = "loading weights\ncompiling graph 2/9\n"
    with pytest.raises(DeployError) as err:
        wait(fake, [("baseline", "qwen-vllm"), ("speculative", "qwen-sd-vllm")], timeout_s=10, poll_s=5.0)
    assert err.value.message == (
        "baseline service qwen-vllm: not ready after 10 s (phase Scheduling): waiting for a node to join\n"
        "speculative service qwen-sd-vllm: startup probe timeout: still starting after 10 s (startup budget 3600 s)\n"
        "  recent events:\n"
        "    Normal Pulled: image vllm:1 already present\n"
        "    Normal Started: started container server\n"
        "  last log lines:\n"
        "    loading weights\n"
        "    compiling graph 2/9\n"
        "objects are left in place for inspection; `spectrn teardown` removes them"
    )
    assert err.value.hint == (
        "baseline: re-run with a longer --timeout, or inspect with `kubectl describe pod` / `spectrn status`; "
        "speculative: raise probes.startup_budget_s and --timeout (first Neuron compilation of a configuration "
        "can take hours), or pre-compile the artifacts; `spectrn status` shows progress"
    )


def test_a_timeout_with_a_passing_diagnosis_shows_that_pods_events() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 2}, replicas=2)
    pod(fake, "a", unscheduled("queued", reason=None))
    event(fake, "a", "Queued", "a is queued", etype="Normal")
    pod(fake, "b", {"phase": "Pending", "conditions": [SCHEDULED]})
    event(fake, "b", "FailedMount", "bucket not found")
    with pytest.raises(DeployError) as err:
        wait(fake, [("speculative", "qwen-sd-vllm")], timeout_s=10, poll_s=5.0)
    assert err.value.message == (
        "speculative service qwen-sd-vllm: not ready after 10 s (phase Scheduling): volume cannot be mounted: "
        "bucket not found\n"
        "  recent events:\n"
        "    Warning FailedMount: bucket not found\n"
        "objects are left in place for inspection; `spectrn teardown` removes them"
    )
    assert err.value.hint == (
        "speculative: re-run with a longer --timeout, or inspect with `kubectl describe pod` / `spectrn status`"
    )


def test_a_timeout_within_a_fatal_diagnosis_grace_period_gives_the_diagnosis() -> None:
    fake = Cluster()
    deployment(fake, {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1})
    pod(fake, "p-0", unscheduled("0/1 nodes are available: 1 Too many pods"))
    with pytest.raises(DeployError) as err:
        wait(fake, [("speculative", "qwen-sd-vllm")], timeout_s=10, poll_s=5.0, grace_s=600.0)
    assert err.value.message == (
        "speculative service qwen-sd-vllm: Unschedulable: 0/1 nodes are available: 1 Too many pods\n"
        "objects are left in place for inspection; `spectrn teardown` removes them"
    )
    assert err.value.hint == (
        "speculative: read the scheduler message above and check node capacity, taints and selectors "
        "(`kubectl describe pod`)"
    )
