"""publish_run: datums in batches through a sink, with a resumable ledger (publish.json), then the dashboard."""

from __future__ import annotations

import hashlib
import json
import math
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spectrn.analyze.run import ensure_summary
from spectrn.errors import PublishError, Terminated
from spectrn.publish.aws import Boto3Sink, MetricsSink, require_aws
from spectrn.publish.dashboard import build_dashboard, dashboard_name, dashboard_run
from spectrn.publish.datums import MetricsFn, batch_datums, batch_hash, build_metric_datums
from spectrn.publish.limits import MAX_DATUMS_PER_CALL, _iso, check_timestamps
from spectrn.run.folder import RunFolder
from spectrn.run.publish_ledger import DashboardRecord, LastError, PublishTarget, SentCall


@dataclass
class PublishResult:
    run_id: str
    namespace: str
    target: str
    batches: int
    sent_now: int
    already_sent: int
    datums: int
    samples: int
    dashboard: str | None
    dashboard_messages: list[str]
    state_path: Path
    nonfinite_dropped: list[str]
    time_shift_s: float
    warnings: list[str]

    def describe(self) -> list[str]:
        """Human-readable outcome, one line each."""
        lines = [
            f"published run {self.run_id} to CloudWatch namespace {self.namespace} ({self.target}): "
            f"{self.sent_now} PutMetricData calls now, {self.already_sent} already sent earlier, "
            f"{self.batches} in all ({self.datums} datums, {self.samples} samples)",
            f"progress: {self.state_path}",
        ]
        if self.time_shift_s:
            lines.append(f"timestamps shifted by {self.time_shift_s / 86400:+.2f} days (--retime)")
        if self.nonfinite_dropped:
            lines.append(f"dropped {len(self.nonfinite_dropped)} non-finite values (listed in {self.state_path.name})")
        if self.dashboard:
            lines.append(f"dashboard: {self.dashboard}")
        lines += [f"dashboard note: {m}" for m in self.dashboard_messages]
        lines += [f"warning: {w}" for w in self.warnings]
        return lines


def _run_lock(run_dir: Path) -> AbstractContextManager[None]:
    """One publish per run folder at a time (two at once would both send the unsent calls), and none while
    another spectrn process writes the folder."""
    from spectrn.run.lock import hold_run_folder

    return hold_run_folder(
        run_dir,
        error=PublishError,
        fix="wait for it to finish (another publish, or a bench or analyze still writing it); then re-run to send "
        "anything not sent yet",
    )


class _CtrlC:
    """Ctrl-C or SIGTERM while a PutMetricData call is in flight: the call finishes and is recorded before the
    publish stops (SIGTERM then ends it as ``Terminated``, exit 143).

    CloudWatch has no idempotency token and cannot delete datapoints: a call interrupted after the service took
    it, but before publish.json recorded it, would be sent again by the re-run and counted twice. A second
    Ctrl-C stops at once (a hung endpoint must not hold the terminal)."""

    def __init__(self) -> None:
        self.signum: int | None = None  # the first signal received during a call

    @contextmanager
    def deferred(self) -> Iterator[None]:
        import threading

        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous: dict[int, Any] = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        if previous[signal.SIGINT] is None:  # installed outside Python: restore Python's default
            previous[signal.SIGINT] = signal.default_int_handler
        if previous[signal.SIGTERM] is None:
            previous[signal.SIGTERM] = signal.SIG_DFL

        def first(signum: int, frame: Any) -> None:
            self.signum = signum
            signal.signal(signum, previous[signum])  # the second one acts as usual

        for s in previous:
            if previous[s] is not signal.SIG_IGN:  # an ignored signal stays ignored (nohup, `cmd &` in a script)
                signal.signal(s, first)
        try:
            yield
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


def publish_run(
    run_dir: Path,
    sink: MetricsSink | None = None,
    *,
    region: str | None = None,
    endpoint_url: str | None = None,
    max_attempts: int = 8,
    namespace: str | None = None,
    storage_resolution: int | None = None,
    dashboard: bool = True,
    dashboard_prefix: str | None = None,
    run_id: str | None = None,
    force: bool = False,
    retime: bool = False,
    skip_nonfinite: bool = False,
    now: float | None = None,
    metrics_fn: MetricsFn | None = None,
    progress: Callable[[int, int], None] | None = None,
    max_datums_per_call: int = MAX_DATUMS_PER_CALL,
) -> PublishResult:
    """Publish a run's per-request distributions (and its dashboard) through ``sink``, resumably.

    Progress is saved to ``publish.json`` after every accepted call; a re-run sends only batches whose
    content hash is not recorded as sent to this namespace and target. ``force`` resends everything
    (CloudWatch then counts those samples twice). On failure raises ``PublishError`` saying what was and
    was not sent.

    Without ``sink``, CloudWatch through boto3 (``region`` or the run's ``cloudwatch.region`` or the AWS
    chain; ``endpoint_url`` or ``AWS_ENDPOINT_URL_CLOUDWATCH``). ``progress(done, total)`` is called after
    every accepted call; the outcome is returned (``PublishResult.describe()`` for people), never printed.
    """
    run = RunFolder.open(run_dir)
    run_dir = run.path
    summary = ensure_summary(run)
    cw = run.meta.config.cloudwatch
    if sink is None:
        if endpoint_url is None:
            require_aws(run_dir, region or cw.region)
        sink = Boto3Sink(region=region or cw.region, endpoint_url=endpoint_url, max_attempts=max_attempts)
    ns = namespace or cw.namespace
    res = int(storage_resolution or cw.storage_resolution)
    prefix = dashboard_prefix or cw.dashboard_prefix
    now = time.time() if now is None else now
    with _run_lock(run_dir):
        ledger = run.publish_ledger()
        key = f"{ns}@{sink.target}"
        target = ledger.targets.setdefault(key, PublishTarget(namespace=ns, target=sink.target))
        warnings: list[str] = []

        def save() -> Path:
            return run.write_publish_ledger(ledger)

        # Once calls went out, keep their timestamps: a re-run reproduces the same batches (and hashes) whether
        # or not --retime is repeated; re-timing data already sent at its own times would count it twice.
        recorded = target.time_shift_s
        if target.sent and not force:
            if retime and not recorded:
                raise PublishError(
                    f"run {run.run_id} was already published to {ns} ({sink.target}) with its original timestamps; "
                    "--retime would send the same samples again at new times (CloudWatch would count them twice)",
                    hint="re-run without --retime to finish that publish, or pass --force to publish a second copy",
                )
            shift = recorded
        elif retime:
            last_end = summary.time_range[1] if summary.time_range else run.meta.started_at
            shift = recorded or math.floor((now - 120 - last_end) / 60) * 60
        else:
            shift = 0.0
        per_call = min(max_datums_per_call, MAX_DATUMS_PER_CALL)
        if target.sent and not force:
            # Calls are identified by content: other batch boundaries or resolution would resend sent samples.
            for name, earlier, value in (
                ("max_datums_per_call", target.max_datums_per_call, per_call),
                ("storage_resolution", target.storage_resolution, res),
            ):
                if earlier is not None and earlier != value:
                    warnings.append(
                        f"kept {name}={earlier} of the earlier publish (not {value}): "
                        "changing it now would send samples twice"
                    )
            per_call = target.max_datums_per_call or per_call
            res = target.storage_resolution or res
        plan = build_metric_datums(
            run,
            namespace=ns,
            run_id=run_id,
            storage_resolution=res,
            time_shift_s=shift,
            skip_nonfinite=skip_nonfinite,
            metrics_fn=metrics_fn,
        )
        if not plan.datums:
            raise PublishError(f"run {run.run_id} has no measured requests to publish", hint="check requests.jsonl")
        check_timestamps(plan.datums, now, run_id=run.run_id)
        batches = batch_datums(plan.datums, namespace=ns, max_datums=per_call)
        hashes = [batch_hash(b, ns) for b in batches]
        digest = hashlib.sha256("".join(hashes).encode()).hexdigest()[:32]
        if force:
            target.sent = {}
        elif target.plan_digest and target.plan_digest != digest and target.sent:
            warnings.append(
                "the run's data changed since the last publish to this target; batches whose content changed are sent "
                "again and CloudWatch keeps the earlier values too"
            )
        target.run_id = plan.run_id
        target.plan_digest = digest
        target.batches = len(batches)
        target.datums = len(plan.datums)
        target.samples = plan.samples
        target.time_shift_s = shift
        target.max_datums_per_call = per_call
        target.storage_resolution = res
        target.nonfinite_dropped = list(plan.nonfinite_dropped)
        target.updated_at = _iso(now)
        sent = target.sent
        already = sum(1 for h in hashes if h in sent)
        sent_now = 0
        state_path = save()
        stop = _CtrlC()
        for i, (batch, h) in enumerate(zip(batches, hashes, strict=True)):
            if h in sent:
                continue
            with stop.deferred():  # the call and its record in publish.json, as one step for Ctrl-C
                try:
                    sink.put_metric_data(ns, batch)
                except PublishError as e:
                    missing = [j for j, hh in enumerate(hashes) if hh not in sent]
                    miss_datums = sum(len(batches[j]) for j in missing)
                    done = len(batches) - len(missing)
                    target.last_error = LastError(batch=i, message=e.message, at=_iso(time.time()))
                    save()
                    sent_part = (
                        f"Sent: {done}/{len(batches)} batches ({sent_now} in this attempt, {already} earlier, "
                        f"{len(plan.datums) - miss_datums} datums)"
                    )
                    err = PublishError(
                        f"publish of run {run.run_id} to {ns} ({sink.target}) stopped at batch "
                        f"{i + 1}/{len(batches)}: {e.message}. {sent_part}; not sent: {len(missing)} batches "
                        f"({miss_datums} datums). Progress is saved in {state_path}",
                        hint=f"fix the cause and re-run `spectrn publish {run_dir}`: only the unsent batches are sent",
                    )
                    err.sent_batches = done  # type: ignore[attr-defined]
                    err.unsent_batches = len(missing)  # type: ignore[attr-defined]
                    raise err from e
                sent[h] = SentCall(index=i, datums=len(batch), sent_at=_iso(time.time()))
                sent_now += 1
                target.last_error = None
                save()
            if progress:
                progress(i + 1, len(batches))
            if stop.signum is not None:  # Ctrl-C or SIGTERM during that call: it went through, is recorded: stop
                if stop.signum == signal.SIGTERM:
                    raise Terminated(
                        f"stopped by SIGTERM during publish; the call in flight was recorded in {state_path}",
                        hint=f"re-run `spectrn publish {run_dir}`: only the unsent batches are sent",
                    )
                raise KeyboardInterrupt

        dash_name = None
        messages: list[str] = []
        if dashboard:
            dash_name, messages = publish_dashboard([(run, shift)], sink, namespace=ns, prefix=prefix, run_id=run_id)
            target.dashboard = DashboardRecord(name=dash_name, published_at=_iso(time.time()))
            save()
        result = PublishResult(
            run_id=plan.run_id,
            namespace=ns,
            target=sink.target,
            batches=len(batches),
            sent_now=sent_now,
            already_sent=already,
            datums=len(plan.datums),
            samples=plan.samples,
            dashboard=dash_name,
            dashboard_messages=messages,
            state_path=state_path,
            nonfinite_dropped=plan.nonfinite_dropped,
            time_shift_s=shift,
            warnings=warnings,
        )
        return result


def recorded_time_shift(run_dir: Path, namespace: str, target: str | None = None) -> float:
    """The ``--retime`` shift an earlier publish of this run used (0 when none), so the dashboard's time range
    matches the data."""
    for t in RunFolder(run_dir).publish_ledger().targets.values():
        if t.namespace == namespace and (target is None or t.target == target):
            return t.time_shift_s
    return 0.0


def publish_dashboard(
    runs: Sequence[tuple[RunFolder, float]],
    sink: MetricsSink,
    *,
    namespace: str,
    prefix: str,
    run_id: str | None,
) -> tuple[str, list[str]]:
    """Build, validate and put one dashboard for one run, or for several (a sweep's cells, each published with
    the sweep's id as ``run_id``: one line per Config), each run with the time shift its data was sent with;
    returns (name, CloudWatch's validation messages). The body is sent compact."""
    views = [dashboard_run(r, run_id=run_id, time_shift_s=shift) for r, shift in runs]
    body = build_dashboard(views, namespace=namespace, region=sink.region)
    name = dashboard_name(prefix, views[0].run_id)
    return name, sink.put_dashboard(name, json.dumps(body, separators=(",", ":")))
