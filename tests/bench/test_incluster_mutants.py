"""What the in-cluster collection asks the cluster and what it tells the user, pinned request by request.

The cluster is the fake one (``doubles.kube_fake``) with every call it receives recorded whole: the namespace,
the container, the tail length, the watch's resourceVersion and timeout. Pods are put in by hand with their
phase (``Pending``, ``Running``, ``Succeeded``, ``Failed``, as the Pod API spells them), next to decoys a wrong
namespace or a wrong label selector would pick up. Messages are asserted whole, written out here by hand.
"""

from __future__ import annotations

import io
import json
import locale
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.kube_fake import FakeKube, _PodRun
from doubles.kube_runfiles import SPEC_PROM, record, shard_files
from doubles.kubehelp import make_cfg, run_deploy
from spectrn.bench.incluster import (
    INDEX_ANNOTATION,
    LoadJob,
    _results_ready,
    _safe_extract,
    _stream,
    collect,
    copy_results,
    find_load_job,
    ingest_llmperf_results,
    mark_collected,
    merge_shards,
    run_incluster_bench,
    start_load_job,
    wait_for_results,
)
from spectrn.errors import AnalysisError, BenchError, ConfigError, Interrupted
from spectrn.events import Emitter, Event
from spectrn.kube.api import KubeApiError
from spectrn.run.records import RunMeta, read_records

RUN = "r20260101-1200"
NS = "bench-ns"
JOB = f"spectrn-loadgen-{RUN}"
OUT = f"/results/{RUN}"
SELECTOR = f"spectrn.io/run-id={RUN},spectrn.io/component=loadgen"
LABELS = {"spectrn.io/run-id": RUN, "spectrn.io/component": "loadgen"}
LOST_HINT = (
    "re-run the bench; if the pod failed, its log names the cause (endpoint unreachable, bad prompt set); "
    "keep the CLI running or run `spectrn collect` within the hold time"
)


class Cluster(FakeKube):
    """The fake cluster, keeping every call's arguments; ``list_script`` fails listings by HTTP status (None:
    the listing succeeds) and ``done_after`` writes ``<out>/.done`` into every pod at that successful listing
    of pods."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[Any, ...]] = []
        self.list_script: list[int | None] = []
        self.done_after: int | None = None
        self.listings = 0
        self.sleeps: list[float] = []

    def list_meta(self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None):
        self.seen.append(("list", api_version, kind, namespace, label_selector))
        if self.list_script:
            status = self.list_script.pop(0)
            if status is not None:
                self.fail_next("list", status=status, message=f"server said {status}")
        out = super().list_meta(api_version, kind, namespace, label_selector)
        self.listings += kind == "Pod"
        if kind == "Pod" and self.listings == self.done_after:
            for run in self.runs.values():
                run.files[f"{OUT}/.done"] = b""
        return out

    def watch(self, api_version, kind, namespace=None, label_selector=None, resource_version=None, timeout_s=30):
        self.seen.append(("watch", api_version, kind, namespace, label_selector, resource_version, timeout_s))
        return super().watch(api_version, kind, namespace, label_selector, resource_version, timeout_s)

    def exec(self, pod, namespace, command, *, container=None, timeout_s=300):
        self.seen.append(("exec", pod, namespace, " ".join(command), container))
        return super().exec(pod, namespace, command, container=container, timeout_s=timeout_s)

    def pod_logs(self, name, namespace, *, container=None, tail_lines=None, previous=False):
        self.seen.append(("logs", name, namespace, container, tail_lines))
        return super().pod_logs(name, namespace, container=container, tail_lines=tail_lines, previous=previous)

    def events_for(self, kind, name, namespace):
        self.seen.append(("events", kind, name, namespace))
        return super().events_for(kind, name, namespace)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        super().sleep(seconds)

    def calls_of(self, op: str) -> list[tuple[Any, ...]]:
        return [c[1:] for c in self.seen if c[0] == op]


def _job(engine: str = "spectrn", pods: int = 1) -> LoadJob:
    return LoadJob(RUN, JOB, NS, engine, pods)


def _pod(
    kube: Cluster,
    name: str,
    phase: str,
    *,
    index: int = 0,
    namespace: str = NS,
    labels: dict[str, str] | None = None,
    files: dict[str, bytes] | None = None,
    logs: str = "",
    status: dict[str, Any] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": dict(LABELS if labels is None else labels),
        "annotations": {INDEX_ANNOTATION: str(index)},
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {}, "status": status or {"phase": phase}}
    kube.put(pod)
    kube.runs[name] = _PodRun("job", owner_kind="Job", owner=JOB, index=index, files=dict(files or {}))
    kube.logs[name] = logs
    return pod


def _event(kube: Cluster, pod: str, reason: str, message: str, namespace: str = NS) -> None:
    kube.events.append(
        {
            "involvedObject": {"kind": "Pod", "name": pod, "namespace": namespace},
            "reason": reason,
            "message": message,
            "type": "Warning",
        }
    )


def _wait(kube: Cluster, job: LoadJob | None = None, **kw: Any) -> tuple[list[dict[str, Any]], list[Event]]:
    events: list[Event] = []
    kw.setdefault("timeout_s", 600)
    kw.setdefault("poll_s", 5.0)
    pods = wait_for_results(kube, job or _job(), on_event=events.append, clock=kube.clock, sleep=kube.sleep, **kw)
    return pods, events


# ---- wait_for_results: a pod that ended before collection -------------------------------------------------


def _decoys(kube: Cluster) -> None:
    """Ended pods that are not the Job's: another namespace, another run, one being deleted (listed first)."""
    _pod(kube, "a-elsewhere", "Failed", namespace="aaa")
    _pod(kube, "a-other-run", "Failed", labels={**LABELS, "spectrn.io/run-id": "r20250101-0000"})
    _pod(kube, "a-deleting", "Failed", deleting=True)


def test_a_failed_pod_reports_its_last_five_log_lines_and_last_three_events() -> None:
    kube = Cluster()
    _decoys(kube)
    _pod(kube, "load-0", "Failed", logs="l1\nl2\n\nl3\nl4\nl5\nl6\n")
    for i in range(1, 5):
        _event(kube, "load-0", f"R{i}", f"m{i}")
    _event(kube, "load-0", "Elsewhere", "same name, other namespace", namespace="aaa")
    with pytest.raises(BenchError) as err:
        _wait(kube)
    assert err.value.message == (
        "load pod load-0 ended (Failed) before its results were collected: results are lost; "
        "last log lines: l3 | l4 | l5 | l6; events: R2: m2 | R3: m3 | R4: m4"
    )
    assert err.value.hint == LOST_HINT
    assert kube.calls_of("list") == [("v1", "Pod", NS, SELECTOR)]
    assert kube.calls_of("events") == [("Pod", "load-0", NS)]
    # the whole log streamed first, then its last five lines asked for the message
    assert kube.calls_of("logs") == [("load-0", NS, "load", None), ("load-0", NS, "load", 5)]


def test_a_succeeded_pod_streams_its_log_and_names_it_without_events() -> None:
    kube = Cluster()
    _pod(kube, "load-0", "Succeeded", logs="only line\n")
    with pytest.raises(BenchError) as err:
        _wait(kube)[1]
    assert err.value.message == (
        "load pod load-0 ended (Succeeded) before its results were collected: results are lost; "
        "last log lines: only line"
    )
    assert kube.calls_of("logs")[0] == ("load-0", NS, "load", None)


def test_an_ended_pod_streams_what_it_logged_before_the_error() -> None:
    kube = Cluster()
    _pod(kube, "load-0", "Failed", logs="starting\ncannot reach http://svc:8000\n")
    events: list[Event] = []
    with pytest.raises(BenchError):
        wait_for_results(
            kube, _job(), on_event=events.append, timeout_s=60, clock=kube.clock, sleep=kube.sleep, poll_s=5.0
        )
    assert [(e.kind, e.text) for e in events] == [("info", "starting"), ("info", "cannot reach http://svc:8000")]


def test_an_ended_pod_with_a_blank_log_and_no_events_says_only_that_results_are_lost() -> None:
    kube = Cluster()
    _pod(kube, "load-0", "Failed", logs="  \n")
    with pytest.raises(BenchError) as err:
        _wait(kube)
    assert err.value.message == "load pod load-0 ended (Failed) before its results were collected: results are lost"


# ---- wait_for_results: a pod that cannot start -------------------------------------------------------------


def test_an_unschedulable_pod_stops_the_wait_with_the_diagnosis_from_its_events() -> None:
    kube = Cluster()
    unschedulable = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": ""}],
    }
    _pod(kube, "load-0", "Pending", status=unschedulable)
    _event(kube, "load-0", "FailedScheduling", "0/2 nodes are available: 2 Insufficient aws.amazon.com/neuron.")
    with pytest.raises(BenchError) as err:
        _wait(kube)
    assert err.value.message == (
        "load pod load-0: Unschedulable: insufficient Neuron devices: "
        "0/2 nodes are available: 2 Insufficient aws.amazon.com/neuron."
    )
    assert err.value.hint == (
        "free Neuron devices or add a trn2.48xlarge node (check `kubectl describe nodes`), or lower "
        "resources.neuron_devices; deploy one service at a time with --only; "
        f"then `spectrn collect {RUN}` or re-run"
    )
    assert kube.calls_of("events") == [("Pod", "load-0", NS)]
    assert kube.calls_of("logs") == []  # a pending pod has no log to stream


def test_a_pending_pod_without_a_diagnosis_is_waited_for_until_the_timeout() -> None:
    kube = Cluster()
    _pod(kube, "load-0", "Pending", logs="never read\n")
    start = kube.now
    with pytest.raises(BenchError) as err:
        _wait(kube, timeout_s=10, poll_s=5.0)
    assert err.value.message == f"the load Job {JOB} did not finish within 10 s (0/1 pod(s) done)"
    assert err.value.hint == f"it keeps running; fetch the results later with `spectrn collect {RUN}`"
    # polls at 0, 5 and 10 s: 10 s is not over the timeout yet, 15 s is
    assert kube.now - start == 15.0
    assert kube.calls_of("logs") == []


# ---- wait_for_results: the API server goes away for a while --------------------------------------------------


def _ready_pod(kube: Cluster) -> None:
    _pod(kube, "load-0", "Running", files={f"{OUT}/run.json": b"{}"})


@pytest.mark.parametrize("status", [0, 429, 500, 503])
def test_six_failed_listings_in_a_row_are_waited_out(status: int) -> None:
    kube = Cluster()
    _ready_pod(kube)
    kube.list_script = [status] * 6
    kube.done_after = 1
    pods, _ = _wait(kube, poll_s=3.0)
    assert [p["metadata"]["name"] for p in pods] == ["load-0"]
    assert kube.sleeps == [3.0] * 6


def test_the_count_of_failed_listings_starts_again_after_a_good_one() -> None:
    kube = Cluster()
    _ready_pod(kube)
    kube.list_script = [503] * 6 + [None] + [503] * 6
    kube.done_after = 2
    pods, _ = _wait(kube, poll_s=3.0)
    assert [p["metadata"]["name"] for p in pods] == ["load-0"]


def test_a_seventh_failed_listing_in_a_row_gives_up_with_a_collect_hint() -> None:
    kube = Cluster()
    _ready_pod(kube)
    kube.list_script = [503] * 7
    kube.done_after = 1
    with pytest.raises(BenchError) as err:
        _wait(kube, poll_s=3.0)
    assert err.value.message == (
        "lost contact with the API server while the load Job runs: list Pod: HTTP 503 InternalError: server said 503"
    )
    assert err.value.hint == f"the Job keeps its results; fetch them with `spectrn collect {RUN}`"
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_a_refused_listing_is_not_retried() -> None:
    kube = Cluster()
    _ready_pod(kube)
    kube.list_script = [403]
    with pytest.raises(KubeApiError) as err:
        _wait(kube)
    assert err.value.status == 403 and kube.sleeps == []


# ---- _pause: the watch between listings ---------------------------------------------------------------------


def test_between_listings_the_pods_are_watched_from_the_listings_version() -> None:
    kube = Cluster()
    _ready_pod(kube)
    kube.done_after = 3
    _wait(kube, poll_s=4.0)
    rvs = [c[4] for c in kube.calls_of("watch")]
    assert kube.calls_of("watch") == [("v1", "Pod", NS, SELECTOR, rv, 4.0) for rv in rvs]
    assert len(rvs) == 2 and all(rv and rv.isdigit() for rv in rvs)
    assert kube.expired_watches == 0 and kube.sleeps == []


def test_a_failed_watch_waits_a_poll_before_listing_again() -> None:
    kube = Cluster()
    _ready_pod(kube)
    kube.done_after = 2
    kube.fail_next("watch", status=500)
    _wait(kube, poll_s=4.0)
    assert kube.sleeps == [4.0]


# ---- _results_ready -----------------------------------------------------------------------------------------


def test_results_are_ready_when_the_done_marker_exists() -> None:
    kube = Cluster()
    _pod(kube, "load-0", "Running", files={f"{OUT}/.done": b""})
    assert _results_ready(kube, _job(), "load-0") is True
    assert kube.calls_of("exec") == [("load-0", NS, f"test -e {OUT}/.done", "load")]


@pytest.mark.parametrize(
    ("run_json", "ready"),
    [
        (b'{"run_id": "r", "finished_at": 1767268800.0}', True),
        (b'{"run_id": "r", "finished_at": null}', False),
        (b'{"run_id": "r", "finish', False),  # being rewritten right now
    ],
)
def test_without_the_marker_results_are_ready_when_run_json_carries_finished_at(run_json: bytes, ready: bool) -> None:
    kube = Cluster()
    _pod(kube, "load-0", "Running", files={f"{OUT}/run.json": run_json})
    assert _results_ready(kube, _job(), "load-0") is ready
    assert kube.calls_of("exec") == [
        ("load-0", NS, f"test -e {OUT}/.done", "load"),
        ("load-0", NS, f"cat {OUT}/run.json", "load"),
    ]


def test_results_are_not_ready_while_the_pod_holds_nothing() -> None:
    kube = Cluster()
    _pod(kube, "load-0", "Running")
    assert _results_ready(kube, _job(), "load-0") is False


def test_an_exec_that_fails_for_another_reason_than_the_command_propagates() -> None:
    kube = Cluster()
    _pod(kube, "load-0", "Running", files={f"{OUT}/.done": b""})
    kube.fail_next("exec", status=500, message="exec broke")
    with pytest.raises(KubeApiError, match="exec broke"):
        _results_ready(kube, _job(), "load-0")


def _llmperf_log(lines_after: int) -> str:
    return "warming up\n" + f"llmperf finished; results in {OUT}/llmperf\n" + "holding\n" * lines_after


@pytest.mark.parametrize(("lines_after", "ready"), [(0, True), (49, True), (50, False)])
def test_llmperf_results_are_ready_when_the_last_fifty_log_lines_say_so(lines_after: int, ready: bool) -> None:
    kube = Cluster()
    _pod(kube, "load-0", "Running", logs=_llmperf_log(lines_after))
    assert _results_ready(kube, _job("llmperf"), "load-0") is ready
    assert kube.calls_of("logs") == [("load-0", NS, "load", 50)]


def test_llmperf_results_are_not_ready_while_the_log_cannot_be_read() -> None:
    kube = Cluster()
    _pod(kube, "load-0", "Running", logs=_llmperf_log(0))
    kube.fail_next("logs", status=500)
    assert _results_ready(kube, _job("llmperf"), "load-0") is False


# ---- _stream ------------------------------------------------------------------------------------------------


def test_a_shards_log_is_passed_on_from_its_first_line_once() -> None:
    kube = Cluster()
    pod = _pod(kube, "load-1", "Running", index=1, logs="starting\nbaseline: 3/8 requests (37%), elapsed 2s\n")
    events: list[Event] = []
    printed: dict[str, int] = {}
    job = _job(pods=2)
    _stream(kube, job, pod, printed, Emitter(events.append))
    kube.logs["load-1"] += "speculative: 8/8 requests (100%), 2 errors, elapsed 9s, done\nbye\n"
    _stream(kube, job, pod, printed, Emitter(events.append))
    assert [(e.kind, e.text, dict(e.fields)) for e in events] == [
        ("info", "[shard 1] starting", {}),
        (
            "progress",
            "[shard 1] baseline",
            {"task": f"{RUN}/1/baseline", "completed": 3, "total": 8, "unit": "requests", "group": RUN, "errors": 0},
        ),
        (
            "progress",
            "[shard 1] speculative",
            {
                "task": f"{RUN}/1/speculative",
                "completed": 8,
                "total": 8,
                "unit": "requests",
                "group": RUN,
                "errors": 2,
            },
        ),
        ("info", "[shard 1] bye", {}),
    ]
    assert printed == {"load-1": 4}
    assert kube.calls_of("logs") == [("load-1", NS, "load", None)] * 2


# ---- _safe_extract ------------------------------------------------------------------------------------------


def _tar(entries: list[tuple[str, bytes | None]]) -> bytes:
    """``(name, data)``: a file; ``(name, None)``: a folder."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_extract_makes_nested_folders_again_and_files_after_skipped_entries(tmp_path: Path) -> None:
    dest = tmp_path / "d"
    data = _tar([(".", None), ("./metrics/deep", None), ("./metrics/deep", None), ("./a.txt", b"A")])
    buf = io.BytesIO(data)
    with tarfile.open(fileobj=buf, mode="a") as tar:  # a link and a fifo between the files: skipped, not fatal
        link = tarfile.TarInfo("./link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
        fifo = tarfile.TarInfo("./fifo")
        fifo.type = tarfile.FIFOTYPE
        tar.addfile(fifo)
        info = tarfile.TarInfo("./metrics/deep/b.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"B"))
    names = _safe_extract(buf.getvalue(), dest)
    assert names == ["a.txt", "metrics/deep/b.txt"]
    assert (dest / "metrics" / "deep").is_dir() and not (dest / "link").exists() and not (dest / "fifo").exists()
    assert (dest / "a.txt").read_bytes() == b"A" and (dest / "metrics" / "deep" / "b.txt").read_bytes() == b"B"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]  # "." made no folder of its own


def test_extract_refuses_a_gzipped_stream_as_corrupt(tmp_path: Path) -> None:
    gz = io.BytesIO()
    with tarfile.open(fileobj=gz, mode="w:gz") as tar:
        info = tarfile.TarInfo("./a.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"A"))
    with pytest.raises(BenchError) as err:
        _safe_extract(gz.getvalue(), tmp_path / "d")
    assert re.fullmatch(r"results archive from the pod is corrupt: .+", err.value.message)
    assert err.value.hint == "re-run `spectrn collect`"


def test_extract_refuses_an_archive_over_the_size_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import spectrn.bench.incluster as incluster

    data = _tar([("./a.txt", b"A")])
    monkeypatch.setattr(incluster, "MAX_RESULTS_BYTES", len(data) - 1)
    with pytest.raises(BenchError) as err:
        _safe_extract(data, tmp_path / "d")
    assert err.value.message == f"results archive is {len(data)} bytes, over the {len(data) - 1}-byte limit"
    monkeypatch.setattr(incluster, "MAX_RESULTS_BYTES", len(data))
    assert _safe_extract(data, tmp_path / "d") == ["a.txt"]  # exactly at the limit is accepted


def test_extract_keeps_a_run_json_as_written(tmp_path: Path) -> None:
    text = json.dumps({"run_id": RUN, "finished_at": 1.0}).encode()
    assert _safe_extract(_tar([("./run.json", text)]), tmp_path / "d") == ["run.json"]
    assert (tmp_path / "d" / "run.json").read_bytes() == text


def test_extract_makes_an_empty_folder_of_the_archive(tmp_path: Path) -> None:
    assert _safe_extract(_tar([("./empty/sub", None), ("./a.txt", b"A")]), tmp_path / "d") == ["a.txt"]
    assert (tmp_path / "d" / "empty" / "sub").is_dir()


# ---- find_load_job ------------------------------------------------------------------------------------------


def _put_job(kube: FakeKube, name: str, namespace: str = NS, labels: dict[str, str] | None = None, **spec: Any) -> None:
    kube.put(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(LABELS if labels is None else labels)},
            "spec": spec,
        }
    )


def _put_cm(kube: FakeKube, name: str, namespace: str = NS, labels: dict[str, str] | None = None) -> None:
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(LABELS if labels is None else labels)},
            "data": {},
        }
    )


OTHER_RUN = {**LABELS, "spectrn.io/run-id": "r20250101-0000"}


def test_the_load_job_and_its_config_map_are_found_by_run_and_namespace() -> None:
    kube = Cluster()
    _put_job(kube, "a-job-elsewhere", namespace="aaa")
    _put_job(kube, "a-job-of-another-run", labels=OTHER_RUN)
    _put_job(kube, JOB, completions=3, parallelism=2)
    _put_cm(kube, "a-cm-elsewhere", namespace="aaa")
    _put_cm(kube, "a-cm-of-another-run", labels=OTHER_RUN)
    _put_cm(kube, "a-cm-unlabeled", labels={})
    _put_cm(kube, f"spectrn-config-{RUN}")
    job = find_load_job(kube, NS, RUN)
    assert (job.run_id, job.name, job.namespace, job.engine, job.pods_expected) == (RUN, JOB, NS, "spectrn", 3)
    assert [(o["apiVersion"], o["kind"], o["metadata"]["namespace"], o["metadata"]["name"]) for o in job.objects] == [
        ("batch/v1", "Job", NS, JOB),
        ("v1", "ConfigMap", NS, f"spectrn-config-{RUN}"),
    ]
    assert kube.calls_of("list") == [("batch/v1", "Job", NS, SELECTOR), ("v1", "ConfigMap", NS, SELECTOR)]


def test_an_llmperf_job_is_found_as_llmperf() -> None:
    kube = Cluster()
    _put_job(kube, f"spectrn-llmperf-{RUN}")
    job = find_load_job(kube, NS, RUN)
    assert (job.name, job.engine, job.pods_expected) == (f"spectrn-llmperf-{RUN}", "llmperf", 1)


def test_a_run_without_a_load_job_names_where_it_looked_and_where_results_go() -> None:
    kube = Cluster()
    _put_job(kube, JOB, namespace="aaa")
    with pytest.raises(BenchError) as err:
        find_load_job(kube, NS, RUN)
    assert err.value.message == f"no load Job for run {RUN} in namespace 'bench-ns'"
    assert err.value.hint == (
        "check the run id (`kubectl get jobs -l spectrn.io/component=loadgen`); a Job is deleted once its results "
        "were collected, and they are then in results/<run-id>/"
    )


# ---- start_load_job -----------------------------------------------------------------------------------------


def test_a_bench_without_deployed_services_names_them_all() -> None:
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    with pytest.raises(BenchError) as err:
        start_load_job(FakeKube(), cfg, RUN, "spectrn")
    assert err.value.message == "service(s) qwen-vllm, qwen-sd-vllm are not deployed in namespace 'spectrn'"
    assert err.value.hint == "run `spectrn deploy` first (or `spectrn bench --local` to bench without a cluster)"


def test_a_second_load_job_for_a_run_is_refused_but_not_one_in_another_namespace() -> None:
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    kube = FakeKube()
    run_deploy(kube, cfg)
    _put_job(kube, f"spectrn-llmperf-{RUN}", namespace="aaa")
    job = start_load_job(kube, cfg, RUN, "llmperf")
    assert (job.name, job.namespace, job.engine) == (f"spectrn-llmperf-{RUN}", "spectrn", "llmperf")
    assert kube.find("Job", f"spectrn-loadgen-{RUN}") is None  # the llmperf Job was rendered, not spectrn's
    with pytest.raises(BenchError) as err:
        start_load_job(kube, cfg, RUN, "llmperf")
    assert err.value.message == f"a load Job for run {RUN} already exists"
    assert err.value.hint == f"collect it with `spectrn collect {RUN}`, or choose another run id"


# ---- copy_results, mark_collected ---------------------------------------------------------------------------


def test_a_pod_is_copied_and_released_through_its_load_container(tmp_path: Path) -> None:
    kube = Cluster()
    pod = _pod(kube, "load-0", "Running", files={f"{OUT}/run.json": b"{}", "/elsewhere/x": b"x"})
    job = _job()
    assert copy_results(kube, job, [pod], tmp_path) == {0: tmp_path}
    mark_collected(kube, job, [pod])
    assert kube.calls_of("exec") == [
        ("load-0", NS, f"tar cf - -C {OUT} .", "load"),
        ("load-0", NS, f"touch {OUT}/.collected", "load"),
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_a_pod_with_nothing_under_its_results_folder_is_named(tmp_path: Path) -> None:
    kube = Cluster()
    pod = _pod(kube, "load-1", "Running", index=1, files={"/elsewhere/x": b"x"})
    with pytest.raises(BenchError) as err:
        copy_results(kube, _job(pods=2), [pod], tmp_path)
    assert err.value.message == f"load pod load-1 has no files under {OUT}"
    assert err.value.hint == "read the pod log (`kubectl logs`); the load generator wrote nothing"


# ---- collect ------------------------------------------------------------------------------------------------


def _collectable(kube: Cluster, *, done: bool = True) -> None:
    _put_job(kube, JOB)
    _put_cm(kube, f"spectrn-config-{RUN}")
    files = {f"{OUT}/run.json": json.dumps({"run_id": RUN, "spectrn_version": "0", "started_at": 1.0}).encode()}
    if done:
        files[f"{OUT}/.done"] = b""
    _pod(kube, "load-0", "Running", files=files)


def test_collect_refuses_a_malformed_run_id_naming_the_argument(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        collect(Cluster(), NS, "bad id", out_root=tmp_path)
    assert err.value.message == (
        "run id 'bad id' (from the RUN_ID argument) is not usable: it names the run folder and Kubernetes objects"
    )


def test_collect_looks_for_the_job_in_the_given_namespace_only(tmp_path: Path) -> None:
    kube = Cluster()
    _put_job(kube, JOB, namespace="aaa")
    with pytest.raises(BenchError) as err:
        collect(kube, NS, RUN, out_root=tmp_path, timeout_s=10, clock=kube.clock, sleep=kube.sleep)
    assert err.value.message == f"no load Job for run {RUN} in namespace 'bench-ns'"


def test_collect_waits_with_a_five_second_watch_then_copies_and_deletes_the_job(tmp_path: Path) -> None:
    kube = Cluster()
    _collectable(kube, done=False)
    kube.done_after = 2
    got = collect(kube, NS, RUN, out_root=tmp_path, clock=kube.clock, sleep=kube.sleep)
    assert (got.run_dir, got.engine) == (tmp_path / RUN, "spectrn")
    assert [c[-1] for c in kube.calls_of("watch")] == [5.0]
    assert kube.find("Job", JOB) is None and kube.find("ConfigMap", f"spectrn-config-{RUN}") is None


def test_collect_passes_its_timing_to_the_wait(tmp_path: Path) -> None:
    kube = Cluster()
    _collectable(kube, done=False)
    kube.fail_next("watch", status=500)
    with pytest.raises(BenchError) as err:
        collect(kube, NS, RUN, out_root=tmp_path, timeout_s=7, clock=kube.clock, sleep=kube.sleep, poll_s=2.0)
    assert err.value.message == f"the load Job {JOB} did not finish within 7 s (0/1 pod(s) done)"
    # polls at 0, 2 (after the failed watch's sleep), 4, 6 and 8 s
    assert kube.sleeps == [2.0]
    assert [c[-1] for c in kube.calls_of("watch")] == [2.0] * 4


def test_collect_into_a_path_that_is_a_file_names_the_run_folder(tmp_path: Path) -> None:
    kube = Cluster()
    _collectable(kube)
    (tmp_path / RUN).write_text("x")
    with pytest.raises(ConfigError) as err:
        collect(kube, NS, RUN, out_root=tmp_path, clock=kube.clock, sleep=kube.sleep)
    assert err.value.message == f"run folder {tmp_path / RUN} exists and is not a folder"


# ---- run_incluster_bench ------------------------------------------------------------------------------------


def _deployed(**bench: Any) -> tuple[Any, Cluster]:
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin", **({"bench": bench} if bench else {}))
    kube = Cluster()
    run_deploy(kube, cfg)
    kube.seen.clear()
    return cfg, kube


def _pod_watches(kube: Cluster) -> list[float]:
    sel = f"spectrn.io/run-id={RUN},spectrn.io/component=loadgen"
    return [c[-1] for c in kube.calls_of("watch") if c[1] == "Pod" and c[3] == sel]


def test_the_bench_watches_five_seconds_at_a_time_unless_told(tmp_path: Path) -> None:
    cfg, kube = _deployed()
    kube.job_files = lambda pod, i: shard_files(RUN, 0, 1)
    run_incluster_bench(cfg, RUN, "spectrn", None, kube, out_root=tmp_path, clock=kube.clock, sleep=kube.sleep)
    assert set(_pod_watches(kube)) == {5.0}
    cfg, kube = _deployed()
    kube.job_files = lambda pod, i: shard_files(RUN, 0, 1)
    run_incluster_bench(
        cfg, RUN, "spectrn", None, kube, out_root=tmp_path / "b", clock=kube.clock, sleep=kube.sleep, poll_s=2.0
    )
    assert set(_pod_watches(kube)) == {2.0}


def test_the_bench_connects_to_the_current_context_without_a_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import spectrn.kube.client as client

    cfg, kube = _deployed()
    kube.job_files = lambda pod, i: shard_files(RUN, 0, 1)
    monkeypatch.setattr(client, "connect", lambda: kube)
    run_dir = run_incluster_bench(cfg, RUN, "spectrn", None, out_root=tmp_path, clock=kube.clock, sleep=kube.sleep)
    assert (run_dir / "run.json").exists()


def test_a_one_request_bench_waits_for_startup_one_request_and_the_slack() -> None:
    cfg, kube = _deployed(requests=1, timeout_s=100)
    kube.tick_s = 500.0
    kube.job_files = lambda pod, i: shard_files(RUN, 0, 1, done=False)
    with pytest.raises(BenchError) as err:
        run_incluster_bench(cfg, RUN, "spectrn", None, kube, out_root=Path("/nonexistent"), clock=kube.clock,
                            sleep=kube.sleep, poll_s=500)  # fmt: skip
    expected = cfg.probes.startup_budget_s + 100 + 1800
    assert err.value.message == f"the load Job {JOB} did not finish within {expected:.0f} s (0/1 pod(s) done)"
    assert err.value.hint == (
        f"it keeps running; fetch the results later with `spectrn collect {RUN}`; "
        f"the Job is kept: `spectrn collect {RUN}` retries"
    )


def test_an_error_without_a_hint_gets_the_collect_hint_alone(tmp_path: Path) -> None:
    cfg, kube = _deployed()
    kube.job_files = lambda pod, i: {**shard_files(RUN, 0, 1), f"{OUT}/../evil": b"x"}
    with pytest.raises(BenchError) as err:
        run_incluster_bench(cfg, RUN, "spectrn", None, kube, out_root=tmp_path, clock=kube.clock, sleep=kube.sleep)
    assert err.value.message == "results archive holds an unsafe path './../evil'"
    assert err.value.hint == f"the Job is kept: `spectrn collect {RUN}` retries"


def test_ctrl_c_names_the_kept_job_and_both_ways_out(tmp_path: Path) -> None:
    cfg, kube = _deployed()
    kube.job_files = lambda pod, i: shard_files(RUN, 0, 1, done=False)

    def stop(event: Event) -> None:
        if event.text.startswith("progress"):
            raise KeyboardInterrupt

    with pytest.raises(Interrupted) as err:
        run_incluster_bench(cfg, RUN, "spectrn", stop, kube, out_root=tmp_path, clock=kube.clock, sleep=kube.sleep)
    assert err.value.message == f"bench stopped; the load Job {JOB} keeps its results"
    assert err.value.hint == f"fetch them with `spectrn collect {RUN}`, or delete it with `kubectl delete job {JOB}`"


def test_a_folder_holding_a_run_is_refused_naming_what_it_holds(tmp_path: Path) -> None:
    (tmp_path / RUN / "shards").mkdir(parents=True)
    (tmp_path / RUN / "run.json").write_text("{}")
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    with pytest.raises(BenchError) as err:
        run_incluster_bench(cfg, RUN, "spectrn", None, FakeKube(), out_root=tmp_path)
    assert err.value.message == f"{tmp_path / RUN} already holds a run (run.json, shards)"
    assert err.value.hint == "choose another --run-id, or remove the folder"


# ---- merge_shards -------------------------------------------------------------------------------------------


def _prom(drafts: int, draft_tokens: int, accepted: int, comment: str = "") -> str:
    return comment + SPEC_PROM.format(drafts=drafts, draft_tokens=draft_tokens, accepted=accepted)


def _shard(
    root: Path,
    idx: int,
    *,
    started: float,
    finished: float | None,
    scrapes: dict[str, str] | None = None,
    acceptance: dict[str, Any] | None = None,
    requests: bool = True,
) -> Path:
    folder = root / "shards" / str(idx)
    (folder / "metrics").mkdir(parents=True)
    meta = RunMeta(run_id=RUN, spectrn_version="0.1.0", started_at=started, finished_at=finished, shard=idx, shards=3)
    (folder / "run.json").write_text(meta.model_dump_json())
    if requests:
        recs = [record("speculative", 10 * idx, idx), record("baseline", 10 * idx + 1, idx)]
        recs[0] = recs[0].model_copy(update={"warmup": True})
        (folder / "requests.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in recs))
    for name, text in (scrapes or {}).items():
        (folder / "metrics" / name).write_text(text, encoding="utf-8")
    if acceptance is not None:
        (folder / "acceptance.json").write_text(json.dumps(acceptance))
    return folder


def test_merging_no_shards_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AnalysisError) as err:
        merge_shards(tmp_path / RUN, {})
    assert err.value.message == f"no shard folders to merge into {tmp_path / RUN}"


def test_a_shard_with_a_broken_run_json_is_named(tmp_path: Path) -> None:
    root = tmp_path / RUN
    shards = {0: _shard(root, 0, started=1.0, finished=2.0), 1: _shard(root, 1, started=1.0, finished=2.0)}
    (shards[1] / "run.json").write_text("{")
    with pytest.raises(AnalysisError) as err:
        merge_shards(root, shards)
    assert err.value.message == (
        f"shard 1: {shards[1] / 'run.json'} is not valid run metadata: "
        "Invalid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )
    assert err.value.hint == "re-run the bench"


def test_a_shard_with_a_broken_record_is_named_with_the_readers_hint(tmp_path: Path) -> None:
    root = tmp_path / RUN
    shards = {0: _shard(root, 0, started=1.0, finished=2.0), 1: _shard(root, 1, started=1.0, finished=2.0)}
    (shards[1] / "requests.jsonl").write_text('{"x": 1}\n{"variant": "baseline"}\n')
    with pytest.raises(AnalysisError) as err:
        merge_shards(root, shards)
    assert err.value.message == (
        f"shard 1: {shards[1] / 'requests.jsonl'} line 1 is not a request record: variant: Field required "
        "(and 4 more problems)"
    )
    assert err.value.hint == "the file was damaged; remove or repair that line (only a torn last line is skipped)"


def test_merged_shards_are_one_run_of_as_many_shards_as_folders(tmp_path: Path) -> None:
    root = tmp_path / RUN
    shards = {1: _shard(root, 1, started=10.0, finished=20.0), 2: _shard(root, 2, started=11.0, finished=21.0)}
    merge_shards(root, shards)
    meta = json.loads((root / "run.json").read_text())
    assert (meta["shard"], meta["shards"], meta["started_at"], meta["finished_at"]) == (0, 2, 10.0, 21.0)


def test_records_of_every_shard_are_merged_warmups_included_past_a_shard_without_any(tmp_path: Path) -> None:
    root = tmp_path / RUN
    shards = {
        0: _shard(root, 0, started=1.0, finished=2.0, requests=False),
        1: _shard(root, 1, started=1.0, finished=2.0),
        2: _shard(root, 2, started=1.0, finished=2.0),
    }
    merge_shards(root, shards)
    recs = read_records(root / "requests.jsonl")
    assert [(r.index, r.shard, r.warmup) for r in recs] == [
        (10, 1, True),
        (11, 1, False),
        (20, 2, True),
        (21, 2, False),
    ]


def test_the_after_scrape_is_the_one_of_the_shard_that_ended_last_not_the_highest_index(tmp_path: Path) -> None:
    root = tmp_path / RUN
    before, after = "speculative.c4.before.prom", "speculative.c4.after.prom"
    shards = {
        0: _shard(root, 0, started=5.0, finished=50.0, scrapes={before: _prom(1, 7, 4), after: _prom(11, 77, 44)}),
        1: _shard(root, 1, started=1.0, finished=30.0, scrapes={before: _prom(2, 14, 8), after: _prom(9, 63, 36)}),
    }
    merge_shards(root, shards)
    # before from shard 1 (started first): 2, 14, 8; after from shard 0 (ended last): 11, 77, 44
    assert (root / "metrics" / before).read_text() == _prom(2, 14, 8)
    assert (root / "metrics" / after).read_text() == _prom(11, 77, 44)
    got = json.loads((root / "acceptance.json").read_text())["speculative@c4"]
    assert (got["drafts"], got["draft_tokens"], got["accepted_tokens"]) == (9.0, 63.0, 36.0)


def test_a_before_scrape_without_an_after_gives_no_acceptance(tmp_path: Path) -> None:
    root = tmp_path / RUN
    shards = {0: _shard(root, 0, started=1.0, finished=2.0, scrapes={"speculative.c4.before.prom": _prom(1, 7, 4)})}
    merge_shards(root, shards)
    assert json.loads((root / "acceptance.json").read_text()) == {"speculative@c4": None}


def test_without_scrapes_the_acceptance_of_the_shard_that_started_first_is_kept(tmp_path: Path) -> None:
    root = tmp_path / RUN
    shards = {
        0: _shard(root, 0, started=5.0, finished=9.0, acceptance={"speculative@c4": {"rate": 0.25}}),
        1: _shard(root, 1, started=1.0, finished=8.0, acceptance={"speculative@c4": {"rate": 0.75}}),
    }
    merge_shards(root, shards)
    assert json.loads((root / "acceptance.json").read_text()) == {"speculative@c4": {"rate": 0.75}}


@pytest.fixture
def ascii_locale() -> Iterator[None]:
    """The C locale's ASCII as the default text encoding (a host without a UTF-8 locale)."""
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)


def test_scrapes_are_read_as_utf8_whatever_the_locale(tmp_path: Path, ascii_locale: None) -> None:
    root = tmp_path / RUN
    text = _prom(1, 7, 4, comment="# scraped from the server in Zürich\n")
    shards = {0: _shard(root, 0, started=1.0, finished=2.0, scrapes={"speculative.c4.before.prom": text})}
    merge_shards(root, shards)
    assert (root / "metrics" / "speculative.c4.before.prom").read_bytes() == text.encode("utf-8")


# ---- llmperf results ----------------------------------------------------------------------------------------


def _llmperf_files(root: str) -> dict[str, bytes]:
    row = {
        "error_code": None,
        "error_msg": "",
        "ttft_s": 0.05,
        "end_to_end_latency_s": 1.0,
        "inter_token_latency_s": 1 / 64,
        "request_output_throughput_token_per_s": 64.0,
        "number_total_tokens": 128,
        "number_output_tokens": 64,
        "number_input_tokens": 64,
    }
    return {
        f"{root}/hello/{v}/Qwen-Qwen3-32B_64_64_individual_responses.json": json.dumps([row] * 3).encode()
        for v in ("baseline", "speculative")
    }


def _write(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)


def test_llmperf_results_keep_the_pods_run_json(tmp_path: Path) -> None:
    run_dir = tmp_path / RUN
    _write(run_dir, _llmperf_files("llmperf"))
    meta = RunMeta(run_id=RUN, spectrn_version="0.1.0", started_at=123.0, notes=["from the pod"])
    (run_dir / "run.json").write_text(meta.model_dump_json())
    ingest_llmperf_results(run_dir, RUN)
    got = json.loads((run_dir / "run.json").read_text())
    assert (got["run_id"], got["started_at"], got["notes"][0]) == (RUN, 123.0, "from the pod")


def test_llmperf_results_without_run_json_take_the_run_id(tmp_path: Path) -> None:
    run_dir = tmp_path / RUN
    _write(run_dir, _llmperf_files("llmperf"))
    ingest_llmperf_results(run_dir, RUN)
    assert json.loads((run_dir / "run.json").read_text())["run_id"] == RUN


def test_llmperf_results_may_lie_in_the_run_folder_itself(tmp_path: Path) -> None:
    run_dir = tmp_path / RUN
    _write(run_dir, _llmperf_files("."))
    ingest_llmperf_results(run_dir, RUN)
    assert {r.prompt_class for r in read_records(run_dir / "requests.jsonl")} == {"hello"}


def test_a_collected_llmperf_run_is_named_by_its_run_id(tmp_path: Path) -> None:
    kube = Cluster()
    _put_job(kube, f"spectrn-llmperf-{RUN}")
    _pod(kube, "load-0", "Running", files={f"{OUT}/.done": b"", **_llmperf_files(f"{OUT}/llmperf")})
    got = collect(kube, NS, RUN, out_root=tmp_path, clock=kube.clock, sleep=kube.sleep)
    assert got.engine == "llmperf"
    assert json.loads((got.run_dir / "run.json").read_text())["run_id"] == RUN
