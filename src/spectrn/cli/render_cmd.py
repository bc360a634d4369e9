"""``spectrn render``: the Kubernetes manifests for a configuration, or the IAM policies it needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from spectrn.cli.common import ConfigOpt, DraftOpt, SetOpt, WindowOpt, config_from_cli, err_console
from spectrn.errors import ConfigError

# this module's commands; spectrn.cli.main adds them to the app
commands = typer.Typer()


def default_run_id(draft: str, window: int) -> str:
    from spectrn.labels import run_id

    return run_id(draft, window)


@commands.command("render")
def render(
    config: ConfigOpt = None,
    draft: DraftOpt = None,
    window: WindowOpt = None,
    sets: SetOpt = None,
    only: Annotated[
        str | None,
        typer.Option("--only", metavar="baseline|speculative", help="Render one service only."),
    ] = None,
    job: Annotated[
        bool,
        typer.Option(
            "--job/--no-job",
            help="Also render the load Job and its config (`spectrn bench` starts it for you; default: services only).",
        ),
    ] = False,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine", metavar="spectrn|llmperf", help="Load Job engine with --job: spectrn loadgen or llmperf."
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id", metavar="ID", help="Run id of the load Job with --job (default: UTC time, draft and window)."
        ),
    ] = None,
    out_dir: Annotated[
        Path | None,
        typer.Option("--out-dir", metavar="DIR", help="Write one file per object into this folder instead of stdout."),
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", hidden=True)] = None,
    iam_policy: Annotated[
        bool, typer.Option("--iam-policy", help="Print the load pod's least-privilege IAM policy (JSON) and exit.")
    ] = False,
    s3_policy: Annotated[
        bool,
        typer.Option(
            "--s3-policy",
            help="Print the least-privilege IAM policy for the model bucket (for the role that mounts it) and exit.",
        ),
    ] = False,
) -> None:
    """Render the services' manifests: multi-document YAML on stdout (pipe to `kubectl apply -f -`) or files
    with --out-dir. The load Job only with --job (`spectrn bench` renders and starts it itself)."""
    from spectrn.cli.common import out_dir_of
    from spectrn.render.iam import iam_policy as iam_policy_of
    from spectrn.render.iam import s3_iam_policy
    from spectrn.render.load_job import ENGINES, check_run_id
    from spectrn.render.manifests import SHARED_COMPONENTS, render_objects
    from spectrn.render.output import to_yaml, write_objects
    from spectrn.render.server import VARIANTS

    folder = out_dir_of(out_dir, out, Path(), old_flag="-o/--out") if out_dir or out else None

    if only is not None and only not in VARIANTS:
        raise ConfigError(f"--only {only!r} is not a service", hint="use --only baseline or --only speculative")
    if engine is not None and engine not in ENGINES:
        raise ConfigError(f"--engine {engine!r} is not known", hint="use --engine spectrn or --engine llmperf")
    if run_id is not None:
        check_run_id(run_id)
    if not job and (engine is not None or run_id is not None):
        flag = "--engine" if engine is not None else "--run-id"
        raise ConfigError(f"{flag} applies to the load Job, which render leaves out by default", hint="add --job")
    engine = engine or "spectrn"
    policy_only = iam_policy or s3_policy
    cfg = config_from_cli(
        config,
        sets,
        cluster=not policy_only,
        load_job=job and engine == "spectrn",
        draft=draft,
        num_speculative_tokens=window,
    )
    if iam_policy:
        typer.echo(json.dumps(iam_policy_of(cfg), indent=2))
        return
    if s3_policy:
        typer.echo(json.dumps(s3_iam_policy(cfg), indent=2))
        return
    components: list[str] = [*SHARED_COMPONENTS, *([only] if only else VARIANTS)]
    rid = None
    if job:
        components.append("loadgen")
        rid = check_run_id(run_id or default_run_id(cfg.draft_label, cfg.num_speculative_tokens))
    objects = render_objects(cfg, components=components, run_id=rid, engine=engine)
    if folder is None:
        typer.echo(to_yaml(objects), nl=False)
        return
    paths = write_objects(objects, folder)
    err_console().print(f"wrote {len(paths)} files to {folder}", highlight=False, markup=False)
