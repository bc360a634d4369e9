"""The in-cluster bench: run the load Job, stream its progress, collect its results, clean up.

    render_load_job -> apply -> stream pod logs -> results ready? -> exec tar out of each pod
        -> touch <out>/.collected (the pod may exit) -> merge shards -> delete the Job

The collected run folder is finished by whoever asked for it, exactly once (``spectrn.finish``): ``spectrn
bench`` and ``spectrn collect`` like a local run, a sweep per cell. llmperf's result folders are ingested into
the run's records here, so an llmperf run finishes (and publishes) like any other.

The load pods keep their results in an emptyDir and wait (``--hold-until-collected``) until
``<out>/.collected`` appears, so if the CLI dies after the Job started, ``spectrn collect RUN_ID`` finds the
pods by their ``spectrn.io/run-id`` label and fetches the results later; the Job is deleted only after a
successful collection.

A pod's results are ready when ``<out>/.done`` exists, or ``<out>/run.json`` carries ``finished_at``
(``spectrn loadgen`` writes it last), or (llmperf) the script logged that it finished.

With several pods (an Indexed Job, ``bench.loadgen_pods``), each
pod's folder is copied to ``results/<run-id>/shards/<index>/`` and merged: ``requests.jsonl`` concatenated
(every record keeps its shard index), ``run.json`` united (earliest start, latest end, notes of all
shards), the metrics scrapes taken from the earliest ``before`` and the latest ``after`` so acceptance
covers the whole run, and ``acceptance.json`` recomputed from them.
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any, cast

from spectrn.errors import AnalysisError, BenchError, Interrupted
from spectrn.events import PROGRESS_LINE, Emitter, OnEvent
from spectrn.kube.api import COMPONENT_LABEL, KubeApi, KubeApiError, Obj
from spectrn.run.folder import ACCEPTANCE, METRICS, REQUESTS, RunFolder
from spectrn.run.records import RequestRecord, RunMeta

if TYPE_CHECKING:
    from spectrn.configuration.config import SpectrnConfig

RUN_ID_LABEL = "spectrn.io/run-id"
RESULTS_MOUNT = "/results"
LOAD_CONTAINER = "load"
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
MAX_RESULTS_BYTES = 2 * 1024**3
LLMPERF_DONE = "llmperf finished; results in"
Clock = Callable[[], float]
Sleep = Callable[[float], None]


@dataclass
class LoadJob:
    run_id: str
    name: str
    namespace: str
    engine: str
    pods_expected: int
    objects: list[Obj] = field(default_factory=list)

    @property
    def out(self) -> str:
        return f"{RESULTS_MOUNT}/{self.run_id}"

    @property
    def selector(self) -> str:
        return f"{RUN_ID_LABEL}={self.run_id},{COMPONENT_LABEL}=loadgen"


def _engine_of(job: Obj) -> str:
    return "llmperf" if "llmperf" in job["metadata"]["name"] else "spectrn"


def _expected_pods(job: Obj) -> int:
    spec = job.get("spec") or {}
    return int(spec.get("completions") or spec.get("parallelism") or 1)


def _index(pod: Obj) -> int:
    annotations = pod["metadata"].get("annotations") or {}
    labels = pod["metadata"].get("labels") or {}
    raw = annotations.get(INDEX_ANNOTATION) or labels.get(INDEX_ANNOTATION)
    try:
        return int(str(raw))
    except ValueError:  # neither ("None": a Job that is not Indexed) or not a number
        return 0


# ---- running ------------------------------------------------------------------------------------


def start_load_job(kube: KubeApi, cfg: SpectrnConfig, run_id: str, engine: str) -> LoadJob:
    """Render and apply the load Job (and its ConfigMap); refuse when the services are not deployed."""
    from spectrn.deploy.apply import apply_plan
    from spectrn.deploy.plan import make_plan
    from spectrn.deploy.service import status
    from spectrn.render.load_job import render_load_job

    objects = render_load_job(cfg, run_id, engine)
    states = status(kube, cfg)
    absent = [s.name for s in states if s.phase == "Absent"]
    if absent:
        raise BenchError(
            f"service(s) {', '.join(absent)} are not deployed in namespace {cfg.namespace!r}",
            hint="run `spectrn deploy` first (or `spectrn bench --local` to bench without a cluster)",
        )
    job = next(o for o in objects if o["kind"] == "Job")
    if kube.get("batch/v1", "Job", job["metadata"]["name"], cfg.namespace) is not None:
        raise BenchError(
            f"a load Job for run {run_id} already exists",
            hint=f"collect it with `spectrn collect {run_id}`, or choose another run id",
        )
    apply_plan(kube, make_plan(kube, objects))
    return LoadJob(run_id, job["metadata"]["name"], cfg.namespace, engine, _expected_pods(job), objects)


def find_load_job(kube: KubeApi, namespace: str, run_id: str) -> LoadJob:
    jobs = kube.list("batch/v1", "Job", namespace, f"{RUN_ID_LABEL}={run_id},{COMPONENT_LABEL}=loadgen")
    if not jobs:
        raise BenchError(
            f"no load Job for run {run_id} in namespace {namespace!r}",
            hint="check the run id (`kubectl get jobs -l spectrn.io/component=loadgen`); a Job is deleted once "
            "its results were collected, and they are then in results/<run-id>/",
        )
    job = jobs[0]
    objects = [job]
    # list items carry apiVersion and kind (``KubeApi.list`` puts them back), as ``delete_load_job`` needs
    objects += kube.list("v1", "ConfigMap", namespace, f"{RUN_ID_LABEL}={run_id},{COMPONENT_LABEL}=loadgen")
    return LoadJob(run_id, job["metadata"]["name"], namespace, _engine_of(job), _expected_pods(job), objects)


def _results_ready(kube: KubeApi, job: LoadJob, pod: str) -> bool:
    # A command that exits non-zero means "not yet"; any other failure (API down, pod gone) propagates.
    try:
        kube.exec(pod, job.namespace, ["test", "-e", f"{job.out}/.done"], container=LOAD_CONTAINER)
        return True
    except KubeApiError as e:
        if e.reason != "ExecFailed":
            raise
    if job.engine == "llmperf":
        # The llmperf script announces the end of its last test case before it starts holding.
        try:
            return LLMPERF_DONE in kube.pod_logs(pod, job.namespace, container=LOAD_CONTAINER, tail_lines=50)
        except KubeApiError:
            return False
    try:
        raw = kube.exec(pod, job.namespace, ["cat", f"{job.out}/run.json"], container=LOAD_CONTAINER)
    except KubeApiError as e:
        if e.reason != "ExecFailed":
            raise
        return False
    try:
        return json.loads(raw).get("finished_at") is not None
    except ValueError:
        return False  # being rewritten right now


def wait_for_results(
    kube: KubeApi,
    job: LoadJob,
    *,
    on_event: OnEvent | None = None,
    timeout_s: float,
    clock: Clock,
    sleep: Sleep,
    poll_s: float,
) -> list[Obj]:
    """Stream the pods' logs until every pod holds finished results; return the pods."""
    from spectrn.deploy.diagnose import diagnose_pod

    start = clock()
    printed: dict[str, int] = {}
    transient = 0
    while True:
        try:
            listed, rv = kube.list_meta("v1", "Pod", job.namespace, job.selector)
            pods = [p for p in listed if not p["metadata"].get("deletionTimestamp")]
            ready_pods = []
            for pod in sorted(pods, key=_index):
                name = pod["metadata"]["name"]
                phase = (pod.get("status") or {}).get("phase")
                if phase in ("Running", "Succeeded", "Failed"):
                    _stream(kube, job, pod, printed, Emitter(on_event))
                if phase in ("Succeeded", "Failed"):
                    events = kube.events_for("Pod", name, job.namespace)
                    log = _safe_tail(kube, name, job.namespace)
                    raise BenchError(
                        f"load pod {name} ended ({phase}) before its results were collected: results are lost"
                        + (f"; last log lines: {' | '.join(log)}" if log else "")
                        + (f"; events: {' | '.join(_brief_events(events))}" if events else ""),
                        hint="re-run the bench; if the pod failed, its log names the cause (endpoint unreachable, "
                        "bad prompt set); keep the CLI running or run `spectrn collect` within the hold time",
                    )
                if phase == "Pending":
                    diag = diagnose_pod(pod, kube.events_for("Pod", name, job.namespace))
                    if diag is not None and diag.fatal:
                        raise BenchError(
                            f"load pod {name}: {diag.cause}: {diag.detail}",
                            hint=f"{diag.next_step}; then `spectrn collect {job.run_id}` or re-run",
                        )
                if phase == "Running" and _results_ready(kube, job, name):
                    ready_pods.append(pod)
            transient = 0
        except KubeApiError as e:
            if e.status in (0, 429) or e.status >= 500:
                transient += 1
                if transient > 6:
                    raise BenchError(
                        f"lost contact with the API server while the load Job runs: {e.message}",
                        hint=f"the Job keeps its results; fetch them with `spectrn collect {job.run_id}`",
                    ) from None
                sleep(poll_s)
                continue
            raise
        if len(ready_pods) >= job.pods_expected:
            return ready_pods
        if clock() - start > timeout_s:
            raise BenchError(
                f"the load Job {job.name} did not finish within {timeout_s:.0f} s "
                f"({len(ready_pods)}/{job.pods_expected} pod(s) done)",
                hint=f"it keeps running; fetch the results later with `spectrn collect {job.run_id}`",
            )
        _pause(kube, job, rv, poll_s, sleep)


def _pause(kube: KubeApi, job: LoadJob, rv: str, poll_s: float, sleep: Sleep) -> None:
    """Wait up to ``poll_s`` for a change of the load pods after the listing at ``rv`` (a watch from there
    sends only newer events; without it the server would replay every pod at once)."""
    try:
        for _ in kube.watch("v1", "Pod", job.namespace, job.selector, resource_version=rv or None, timeout_s=poll_s):
            return
    except KubeApiError as e:
        if e.gone:
            return  # 410: our resourceVersion fell out of the server's history; the next loop re-lists
        sleep(poll_s)  # the next listing reports persistent problems


def _brief_events(events: list[Obj]) -> list[str]:
    return [f"{e.get('reason')}: {e.get('message')}" for e in events[-3:]]


def _safe_tail(kube: KubeApi, pod: str, namespace: str) -> list[str]:
    try:
        text = kube.pod_logs(pod, namespace, container=LOAD_CONTAINER, tail_lines=5)
    except KubeApiError:
        return []
    return [line for line in text.splitlines() if line.strip()]


def _stream(kube: KubeApi, job: LoadJob, pod: Obj, printed: dict[str, int], emit: Emitter) -> None:
    """The pod's new log lines; the load generator's progress lines become progress (a bar with an ETA)."""
    name = pod["metadata"]["name"]
    try:
        text = kube.pod_logs(name, job.namespace, container=LOAD_CONTAINER)
    except KubeApiError:
        return
    lines = text.splitlines()
    seen = printed.get(name, 0)
    shard = _index(pod)
    prefix = f"[shard {shard}] " if job.pods_expected > 1 else ""
    for line in lines[seen:]:
        m = PROGRESS_LINE.match(line)
        if m is None:
            emit("info", f"{prefix}{line}")
            continue
        emit.progress(
            f"{job.run_id}/{shard}/{m['text']}", f"{prefix}{m['text']}", completed=int(m["completed"]),
            total=int(m["total"]), unit=m["unit"], group=job.run_id, errors=int(m["errors"] or 0),
        )  # fmt: skip
    printed[name] = len(lines)


# ---- collecting -----------------------------------------------------------------------------------


def _safe_extract(data: bytes, dest: Path) -> list[str]:
    """Extract a tar stream from a pod; only plain files and folders below ``dest`` are accepted."""
    if len(data) > MAX_RESULTS_BYTES:
        raise BenchError(f"results archive is {len(data)} bytes, over the {MAX_RESULTS_BYTES}-byte limit")
    dest.mkdir(parents=True, exist_ok=True)
    names = []
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar.getmembers():
                rel = PurePosixPath(member.name)
                if rel.is_absolute() or ".." in rel.parts:
                    raise BenchError(f"results archive holds an unsafe path {member.name!r}")
                if not (member.isfile() or member.isdir()):
                    continue  # links and devices are never part of a result folder
                if member.isdir():
                    dest.joinpath(*rel.parts).mkdir(parents=True, exist_ok=True)
                    continue
                src = cast(IO[bytes], tar.extractfile(member))  # a regular file's reader, never None
                target = RunFolder(dest).copy_in(str(rel), src)
                names.append(str(target.relative_to(dest)))
    except tarfile.TarError as e:
        raise BenchError(f"results archive from the pod is corrupt: {e}", hint="re-run `spectrn collect`") from None
    return names


def copy_results(kube: KubeApi, job: LoadJob, pods: list[Obj], run_dir: Path) -> dict[int, Path]:
    """Copy each pod's ``<out>`` into the run folder (one pod) or ``shards/<index>/`` (several)."""
    out: dict[int, Path] = {}
    for pod in pods:
        idx = _index(pod)
        dest = run_dir if job.pods_expected == 1 else run_dir / "shards" / str(idx)
        data = kube.exec(
            pod["metadata"]["name"], job.namespace, ["tar", "cf", "-", "-C", job.out, "."], container=LOAD_CONTAINER
        )
        files = _safe_extract(data, dest)
        if not files:
            raise BenchError(
                f"load pod {pod['metadata']['name']} has no files under {job.out}",
                hint="read the pod log (`kubectl logs`); the load generator wrote nothing",
            )
        out[idx] = dest
    return out


def mark_collected(kube: KubeApi, job: LoadJob, pods: list[Obj]) -> None:
    for pod in pods:
        kube.exec(pod["metadata"]["name"], job.namespace, ["touch", f"{job.out}/.collected"], container=LOAD_CONTAINER)


def merge_shards(run_dir: Path, shards: dict[int, Path]) -> None:
    """Unite shard folders into ``run_dir`` (see the module docstring): their ``RunMeta`` and ``RequestRecord``s
    read as any run folder is, the result written through ``RunFolder``."""
    if not shards:
        raise AnalysisError(f"no shard folders to merge into {run_dir}")
    metas: dict[int, RunMeta] = {}
    for idx, folder in sorted(shards.items()):
        try:
            metas[idx] = RunFolder(folder).meta
        except AnalysisError as e:
            raise AnalysisError(f"shard {idx}: {e.message}", hint="re-run the bench") from None
    out = RunFolder(run_dir)
    out.write_records(_shard_records(shards))
    first = metas[min(metas)]
    ends = [m.finished_at for m in metas.values()]
    endpoints: dict[str, str] = {}
    notes: list[str] = []
    for idx, m in sorted(metas.items()):
        endpoints.update(m.endpoints)
        notes += [f"shard {idx}: {note}" for note in m.notes]
    merged = first.model_copy(
        update={
            "shard": 0,
            "shards": len(shards),
            "started_at": min(m.started_at for m in metas.values()),
            "finished_at": None if None in ends else max(e for e in ends if e is not None),
            "interrupted": any(m.interrupted for m in metas.values()),
            "endpoints": endpoints,
            "notes": notes,
        }
    )
    out.write_meta(merged)
    _merge_metrics(out, shards, metas)


def _shard_records(shards: dict[int, Path]) -> Iterator[RequestRecord]:
    """Every shard's records in shard order, each with the folder's index as its shard."""
    for idx, folder in sorted(shards.items()):
        if not (folder / REQUESTS).exists():
            continue
        try:
            for rec in RunFolder(folder).records(measured=False):  # a torn last line is skipped
                yield rec.model_copy(update={"shard": idx})  # the pod's index, which its loadgen wrote too
        except AnalysisError as e:
            raise AnalysisError(f"shard {idx}: {e.message}", hint=e.hint) from None


def _merge_metrics(out: RunFolder, shards: dict[int, Path], metas: dict[int, RunMeta]) -> None:
    # Counters are server-wide: the earliest "before" and the latest "after" span every shard's requests.
    earliest = min(metas, key=lambda i: metas[i].started_at)
    latest = max(metas, key=lambda i: metas[i].finished_at or 0.0)
    chosen: dict[str, Path] = {}
    for idx, folder in shards.items():
        for prom in sorted((folder / METRICS).glob("*.prom")):
            tag = "before" if prom.name.endswith(".before.prom") else "after"
            if (tag == "before" and idx == earliest) or (tag == "after" and idx == latest):
                chosen[prom.name] = prom
    if not chosen:
        if (shards[earliest] / ACCEPTANCE).exists():
            out.write_acceptance(RunFolder(shards[earliest]).acceptance())
        return
    texts = {name: path.read_text(encoding="utf-8") for name, path in chosen.items()}
    for name, text in texts.items():
        out.write_scrape(name, text)
    from spectrn.loadgen.metrics import acceptance_delta, parse_metrics

    acceptance: dict[str, Any] = {}
    for name in sorted(texts):
        if not name.endswith(".before.prom"):
            continue
        key = name.removesuffix(".before.prom")  # <variant>.<level>
        after = texts.get(f"{key}.after.prom")
        variant, _, level = key.partition(".")
        before_snap = parse_metrics(texts[name])
        after_snap = parse_metrics(after) if after is not None else None
        acceptance[f"{variant}@{level}"] = acceptance_delta(before_snap, after_snap)
    out.write_acceptance(acceptance)


def ingest_llmperf_results(run_dir: Path, run_id: str) -> None:
    """The llmperf pod's result folders (``llmperf/<test case>/<variant>/``) as the run's records, so the run
    is finished, reported and published like any other (``spectrn.finish``)."""
    from spectrn.analyze.llmperf import ingest

    meta = RunFolder(run_dir).meta if (run_dir / "run.json").exists() else None
    source = run_dir / "llmperf" if (run_dir / "llmperf").is_dir() else run_dir
    ingest(source, run_dir, run_id=run_id, meta=meta)


def delete_load_job(kube: KubeApi, job: LoadJob) -> None:
    for obj in job.objects:  # all in the Job's namespace: rendered there, or listed there
        kube.delete(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], job.namespace)


def collect_job(
    kube: KubeApi,
    job: LoadJob,
    out_root: Path,
    *,
    on_event: OnEvent | None,
    timeout_s: float,
    clock: Clock,
    sleep: Sleep,
    poll_s: float,
) -> Path:
    """Wait for results, copy them out, release the pods, merge (llmperf: ingest), delete the Job; return the
    run folder, ready for ``spectrn.finish.finish``."""
    from spectrn.paths import safe_output_dir

    pods = wait_for_results(
        kube,
        job,
        on_event=on_event,
        timeout_s=timeout_s,
        clock=clock,
        sleep=sleep,
        poll_s=poll_s,
    )
    run_dir = safe_output_dir(out_root / job.run_id, what="run folder")
    shards = copy_results(kube, job, pods, run_dir)
    if job.pods_expected > 1:
        merge_shards(run_dir, shards)
    Emitter(on_event)("info", f"collected {len(pods)} pod(s) into {run_dir}")
    mark_collected(kube, job, pods)
    if job.engine == "llmperf":
        ingest_llmperf_results(run_dir, job.run_id)
    delete_load_job(kube, job)
    return run_dir


def run_incluster_bench(
    cfg: SpectrnConfig,
    run_id: str,
    engine: str,
    on_event: OnEvent | None,
    kube: KubeApi | None = None,
    *,
    out_root: Path = Path("results"),
    timeout_s: float | None = None,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
    poll_s: float = 5.0,
) -> Path:
    """``spectrn bench`` against the deployed services from inside the cluster; returns ``<out_root>/<run-id>``
    holding the collected (not yet analyzed) results.

    ``kube`` defaults to the current kube context (``$KUBECONFIG``), or the in-cluster config inside a pod.
    """
    held = [
        n
        for n in ("run.json", "requests.jsonl", "summary.json", "shards", "llmperf")
        if (out_root / run_id / n).exists()
    ]
    if held:
        # A second Job for a run id whose results are already here would overwrite them (and a publish ledger
        # recorded for them); the local bench refuses the same way.
        raise BenchError(
            f"{out_root / run_id} already holds a run ({', '.join(held)})",
            hint="choose another --run-id, or remove the folder",
        )
    if kube is None:
        from spectrn.kube.client import connect

        kube = connect()
    job = start_load_job(kube, cfg, run_id, engine)
    Emitter(on_event)(
        "info", f"started Job {job.namespace}/{job.name} ({job.pods_expected} pod(s)); streaming progress"
    )
    if timeout_s is None:
        per_request = cfg.bench.timeout_s
        timeout_s = cfg.probes.startup_budget_s + per_request * max(1, cfg.bench.requests) + 1800
    try:
        return collect_job(
            kube, job, out_root, on_event=on_event, timeout_s=timeout_s, clock=clock, sleep=sleep, poll_s=poll_s
        )
    except KeyboardInterrupt:
        raise Interrupted(
            f"bench stopped; the load Job {job.name} keeps its results",
            hint=f"fetch them with `spectrn collect {run_id}`, or delete it with `kubectl delete job {job.name}`",
        ) from None
    except (BenchError, KubeApiError) as e:
        e.hint = (e.hint + "; " if e.hint else "") + f"the Job is kept: `spectrn collect {run_id}` retries"
        raise


@dataclass
class Collected:
    run_dir: Path
    engine: str  # spectrn or llmperf: what the folder holds and how it is analyzed


def collect(
    kube: KubeApi,
    namespace: str,
    run_id: str,
    *,
    out_root: Path = Path("results"),
    on_event: OnEvent | None = None,
    timeout_s: float = 600,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
    poll_s: float = 5.0,
) -> Collected:
    """``spectrn collect RUN_ID``: fetch the results of a load Job whose CLI went away."""
    from spectrn.names import check_run_id

    check_run_id(run_id, source="the RUN_ID argument")
    job = find_load_job(kube, namespace, run_id)
    run_dir = collect_job(
        kube,
        job,
        out_root,
        on_event=on_event,
        timeout_s=timeout_s,
        clock=clock,
        sleep=sleep,
        poll_s=poll_s,
    )  # the pod's log streams too: its load generator's progress lines become bars with the time left
    return Collected(run_dir, job.engine)
