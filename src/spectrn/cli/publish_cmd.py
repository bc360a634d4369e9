"""``spectrn publish`` and ``spectrn dashboard``: a run's distributions and dashboard in CloudWatch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from spectrn.cli.common import Output, OutputOpt, err_console, print_document

if TYPE_CHECKING:
    from spectrn.run.folder import RunFolder

# this module's commands; spectrn.cli.main adds them to the app
commands = typer.Typer()

RunDirArg = Annotated[Path, typer.Argument(metavar="RUN_DIR", help="Run folder, e.g. results/<run-id>.")]
NamespaceOpt = Annotated[
    str | None,
    typer.Option(
        "--namespace", metavar="NAMESPACE", help="CloudWatch namespace (default: the run's cloudwatch.namespace)."
    ),
]
RegionOpt = Annotated[
    str | None,
    typer.Option(
        "--region",
        metavar="REGION",
        help="AWS region (default: the run's cloudwatch.region, then the AWS resolution chain).",
    ),
]
EndpointUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--endpoint-url",
        metavar="URL",
        help="CloudWatch endpoint (a local test server, a VPC endpoint); default: AWS_ENDPOINT_URL_CLOUDWATCH or AWS.",
    ),
]
PrefixOpt = Annotated[
    str | None,
    typer.Option(
        "--prefix", metavar="PREFIX", help="Dashboard name prefix (default: the run's cloudwatch.dashboard_prefix)."
    ),
]
RunIdOpt = Annotated[
    str | None,
    typer.Option(
        "--run-id", metavar="ID", help="Publish under this RunId instead of the run's own (e.g. a sweep's id)."
    ),
]


def _open(run_dir: Path, console: Any) -> RunFolder:
    """The run folder, analyzed if it has no summary.json yet; an unclean run is published (the dashboard
    says so too), but never silently."""
    from spectrn.analyze.run import ensure_summary
    from spectrn.cli.show import warn_unclean
    from spectrn.run.folder import RunFolder

    folder = RunFolder.open(run_dir)
    warn_unclean(console, ensure_summary(folder))
    return folder


@commands.command("publish")
def publish(
    run_dir: RunDirArg,
    namespace: NamespaceOpt = None,
    region: RegionOpt = None,
    endpoint_url: EndpointUrlOpt = None,
    storage_resolution: Annotated[
        int | None,
        typer.Option(
            "--storage-resolution",
            metavar="1|60",
            help="1 (high resolution) or 60 (default: cloudwatch.storage_resolution).",
        ),
    ] = None,
    dashboard: Annotated[
        bool, typer.Option("--dashboard/--no-dashboard", help="Also create or replace the run's dashboard.")
    ] = True,
    prefix: PrefixOpt = None,
    run_id: RunIdOpt = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Resend every batch, even those publish.json records as sent: CloudWatch then counts them twice.",
        ),
    ] = False,
    retime: Annotated[
        bool,
        typer.Option(
            "--retime",
            help="Shift timestamps so the run ends now (for runs older than CloudWatch's 14-day limit).",
        ),
    ] = False,
    skip_nonfinite: Annotated[
        bool,
        typer.Option("--skip-nonfinite", help="Drop NaN/Inf values (listed in publish.json) instead of failing."),
    ] = False,
    max_attempts: Annotated[
        int,
        typer.Option(
            "--max-attempts", metavar="N", min=1, max=20, help="Attempts per call (botocore adaptive retries)."
        ),
    ] = 8,
    batch_size: Annotated[
        int,
        typer.Option(
            "--batch-size",
            metavar="N",
            min=1,
            max=1000,
            help="Datums per PutMetricData call (at most 1000; calls also stay < 1 MB).",
        ),
    ] = 1000,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be sent (calls, datums, samples); send nothing.")
    ] = False,
    emf: Annotated[
        bool,
        typer.Option("--emf", help="Write metrics.emf.jsonl (Embedded Metric Format) instead of calling CloudWatch."),
    ] = False,
    output: OutputOpt = Output.table,
) -> None:
    """Publish a run's per-request distributions to CloudWatch (re-runnable: sends only unsent batches)."""
    from spectrn.cli.show import publish_progress, say
    from spectrn.publish.datums import batch_datums, build_metric_datums
    from spectrn.publish.emf import write_emf
    from spectrn.publish.publisher import publish_run

    console = err_console()
    folder = _open(run_dir, console)
    if emf:
        from spectrn.errors import PublishError
        from spectrn.run.lock import hold_run_folder

        with hold_run_folder(run_dir, error=PublishError):  # not while a bench or an analyze writes the folder
            path = write_emf(run_dir, namespace=namespace, run_id=run_id)
        if output != Output.table:
            print_document({"emf": str(path)}, output)
        else:
            typer.echo(f"wrote {path}")
        return
    if dry_run:
        cw = folder.meta.config.cloudwatch
        ns = namespace or cw.namespace
        res = storage_resolution or cw.storage_resolution
        plan = build_metric_datums(
            folder, namespace=ns, run_id=run_id, storage_resolution=res, skip_nonfinite=skip_nonfinite
        )
        if not plan.datums:  # the same refusal as a real publish
            from spectrn.errors import PublishError

            raise PublishError(f"run {plan.run_id} has no measured requests to publish", hint="check requests.jsonl")
        batches = batch_datums(plan.datums, namespace=ns, max_datums=batch_size)
        if output != Output.table:
            print_document(
                {"dry_run": True, "namespace": ns, "run_id": plan.run_id, "calls": len(batches),
                 "datums": len(plan.datums), "samples": plan.samples, "storage_resolution": res},
                output,
            )  # fmt: skip
            return
        typer.echo(
            f"would send {len(batches)} PutMetricData calls to namespace {ns}: {len(plan.datums)} datums, "
            f"{plan.samples} samples, RunId {plan.run_id}"
        )
        return
    result = publish_run(
        run_dir,
        progress=publish_progress(console),
        region=region,
        endpoint_url=endpoint_url,
        max_attempts=max_attempts,
        namespace=namespace,
        storage_resolution=storage_resolution,
        dashboard=dashboard,
        dashboard_prefix=prefix,
        run_id=run_id,
        force=force,
        retime=retime,
        skip_nonfinite=skip_nonfinite,
        max_datums_per_call=batch_size,
    )
    if output != Output.table:
        print_document(
            {"dry_run": False, "namespace": result.namespace, "run_id": result.run_id, "target": result.target,
             "calls": result.batches, "sent_now": result.sent_now, "already_sent": result.already_sent,
             "datums": result.datums, "samples": result.samples, "dashboard": result.dashboard,
             "state": str(result.state_path)},
            output,
        )  # fmt: skip
        return
    for line in result.describe():
        say(console, line)


@commands.command("dashboard")
def dashboard_cmd(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN_DIR",
            help="Run folder(s); several (e.g. a sweep's cells published with --run-id) share one dashboard.",
        ),
    ],
    namespace: NamespaceOpt = None,
    region: RegionOpt = None,
    endpoint_url: EndpointUrlOpt = None,
    prefix: PrefixOpt = None,
    run_id: RunIdOpt = None,
    print_body: Annotated[
        bool, typer.Option("--print", help="Print the validated dashboard body (JSON) instead of calling CloudWatch.")
    ] = False,
) -> None:
    """Create or replace the run's CloudWatch comparison dashboard (also done by `spectrn publish`)."""
    from spectrn.publish import aws, dashboard, publisher

    console = err_console()
    runs = [_open(d, console) for d in run_dirs]
    cw = runs[0].meta.config.cloudwatch
    ns = namespace or cw.namespace
    pre = prefix or cw.dashboard_prefix
    reg = region or cw.region
    if print_body:
        views = [
            dashboard.dashboard_run(r, run_id=run_id, time_shift_s=publisher.recorded_time_shift(d, ns))
            for r, d in zip(runs, run_dirs, strict=True)
        ]
        body = dashboard.build_dashboard(views, namespace=ns, region=reg or "us-east-1")
        typer.echo(json.dumps(body, indent=2))
        return
    if endpoint_url is None:
        aws.require_aws(run_dirs[0], reg)
    sink = aws.Boto3Sink(region=reg, endpoint_url=endpoint_url)
    shifted = [(r, publisher.recorded_time_shift(d, ns, sink.target)) for r, d in zip(runs, run_dirs, strict=True)]
    name, messages = publisher.publish_dashboard(shifted, sink, namespace=ns, prefix=pre, run_id=run_id)
    typer.echo(f"dashboard {name} in {sink.region}")
    for m in messages:
        typer.echo(f"dashboard note: {m}")
