"""``spectrn deploy``, ``status``, ``teardown``, ``collect`` and ``kind fake-neuron``: the cluster commands.

Thin wrappers: build the config, connect (``spectrn.kube.client.connect``), call one function of
``spectrn.deploy`` / ``spectrn.bench.incluster``, and show its progress on the console.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from spectrn.cli.common import (
    ConfigOpt,
    ContextOpt,
    DraftOpt,
    KubeconfigOpt,
    KubeNamespaceOpt,
    OldOutOpt,
    Output,
    OutputOpt,
    SetOpt,
    WindowOpt,
    config_from_cli,
    connect_cluster,
    err_console,
    out_console,
    out_dir_of,
    print_document,
)
from spectrn.cli.show import print_table
from spectrn.errors import printable

# this module's commands; spectrn.cli.main adds them to the app
commands = typer.Typer()

if TYPE_CHECKING:
    from rich.console import Console

    from spectrn.deploy.plan import Plan
    from spectrn.deploy.preflight import Finding
    from spectrn.deploy.wait import ServiceState


kind_app = typer.Typer(help="Helpers for kind test clusters.", no_args_is_help=True)
commands.add_typer(kind_app, name="kind")


_PHASE_STYLE = {"Ready": "green", "Failed": "red", "Absent": "dim"}


def _states_table(states: list[ServiceState], *, elapsed: float | None = None) -> Any:
    from rich.table import Table
    from rich.text import Text

    title = f"spectrn services ({elapsed:.0f} s)" if elapsed is not None else "spectrn services"
    table = Table(title=title, title_justify="left")
    for col in ("service", "deployment", "phase", "ready", "window", "age", "image", "detail"):
        table.add_column(col, overflow="fold")
    for s in states:
        style = _PHASE_STYLE.get(s.phase, "yellow")
        cells = [s.variant, s.name, s.phase, f"{s.ready}/{s.desired}", s.window, s.age, s.image, s.detail[:160]]
        table.add_row(*(Text(printable(c), style=style if i == 2 else "") for i, c in enumerate(cells)))
    return table


def _wait_line(states: list[ServiceState], elapsed: float, budget_s: float) -> str:
    """Readiness progress with the time left of the startup budget (the expected time to ready)."""
    from spectrn.events import fmt_duration

    ready = sum(1 for s in states if s.done)
    if ready == len(states):
        left = "done"
    elif elapsed < budget_s:
        left = f"about {fmt_duration(budget_s - elapsed)} left of the {fmt_duration(budget_s)} startup budget"
    else:
        left = f"{fmt_duration(elapsed - budget_s)} over the {fmt_duration(budget_s)} startup budget"
    return f"ready: {ready}/{len(states)} services, elapsed {fmt_duration(elapsed)}, {left}"


class LiveView:
    """A live table with a progress line on a terminal; one line per change elsewhere (CI logs)."""

    def __init__(self, console: Console, budget_s: float = 0.0) -> None:
        self.console = console
        self.start = time.monotonic()
        self.live: Any = None
        self.last: dict[str, tuple[str, str]] = {}
        self.budget_s = budget_s
        self.ready = -1

    def __enter__(self) -> LiveView:
        if self.console.is_terminal:
            from rich.live import Live

            self.live = Live(console=self.console, refresh_per_second=2, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)

    def update(self, states: list[ServiceState]) -> None:
        from rich.console import Group
        from rich.text import Text

        elapsed = time.monotonic() - self.start
        line = _wait_line(states, elapsed, self.budget_s)
        if self.live is not None:
            self.live.update(Group(_states_table(states, elapsed=elapsed), Text(line, style="cyan")))
            return
        ready = sum(1 for s in states if s.done)
        for s in states:
            key = (s.phase, s.detail)
            if self.last.get(s.name) != key:
                self.last[s.name] = key
                self.console.print(
                    f"[{elapsed:6.0f}s] {s.variant:<11} {s.name}: {s.phase} {s.ready}/{s.desired} {s.detail}".rstrip(),
                    highlight=False,
                    markup=False,
                )
        if ready != self.ready:
            self.ready = ready
            self.console.print(line, style="dim", highlight=False, markup=False, soft_wrap=True)


def print_plan(console: Console, plan: Plan, findings: list[Finding]) -> None:
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"plan: {plan.summary()}", title_justify="left")
    for col in ("action", "object", "note"):
        table.add_column(col, overflow="fold")
    colors = {"create": "green", "update": "yellow", "replace": "red", "unchanged": "dim", "keep": "dim"}
    for item in plan.items:
        table.add_row(f"[{colors[item.action]}]{item.action}[/]", Text(item.name), Text(item.reason))
    print_table(console, table)
    marks = {"ok": "[green]ok[/]   ", "warn": "[yellow]warn[/] ", "error": "[red]error[/]"}
    console.print("pre-flight:")
    for f in findings:
        text = escape(f"[{f.check}] {f.message}" + (f" -> {f.hint}" if f.hint else ""))
        console.print(f"  {marks[f.severity]} {text}", highlight=False)


@commands.command("deploy")
def deploy_cmd(
    config: ConfigOpt = None,
    draft: DraftOpt = None,
    window: WindowOpt = None,
    sets: SetOpt = None,
    only: Annotated[
        str | None,
        typer.Option("--only", metavar="baseline|speculative", help="Deploy one service: baseline or speculative."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the plan, the pre-flight findings and the objects; apply nothing.")
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            min=1,
            max=7 * 86400,
            help="Seconds to wait for readiness (default: startup budget + 30 min).",
        ),
    ] = None,
    context: ContextOpt = None,
    kubeconfig: KubeconfigOpt = None,
    namespace: KubeNamespaceOpt = None,
) -> None:
    """Render, pre-flight, apply (idempotent) and wait for both services, with a diagnosis on failure."""
    from spectrn.deploy.objects import order_objects, stamp
    from spectrn.deploy.plan import Plan, PlanItem
    from spectrn.deploy.preflight import Finding, config_findings
    from spectrn.deploy.service import deploy, render_for_deploy
    from spectrn.errors import DeployError
    from spectrn.kube.api import KubeApiError
    from spectrn.render.output import to_yaml

    console = err_console()
    cfg = config_from_cli(
        config, sets, cluster=True, console=console, draft=draft, num_speculative_tokens=window, namespace=namespace
    )
    objects = render_for_deploy(cfg, only)
    if dry_run:
        try:
            kube = connect_cluster(context, kubeconfig)
            report = deploy(kube, cfg, objects, dry_run=True)
            plan, findings = report.plan, report.findings
        except KubeApiError as e:
            plan = Plan([PlanItem(stamp(o), "create", "cluster not reachable") for o in order_objects(objects)])
            findings = config_findings(cfg, objects) + [Finding("cluster", "error", e.message, e.hint or "")]
        print_plan(console, plan, findings)
        changes = [i.obj for i in plan.changes]
        typer.echo(to_yaml(changes) if changes else "# nothing to apply: the cluster matches the configuration")
        errors = [f for f in findings if f.severity == "error"]
        if errors:
            # The objects are still printed (to read or render from), but a script must not read "would deploy".
            raise DeployError(
                f"pre-flight found {len(errors)} error(s), so `spectrn deploy` would apply nothing: "
                + "; ".join(f"[{f.check}] {f.message}" for f in errors),
                hint="; ".join(f.hint for f in errors if f.hint) or None,
            )
        return
    kube = connect_cluster(context, kubeconfig)
    with LiveView(console, budget_s=cfg.probes.startup_budget_s) as view:
        report = deploy(
            kube,
            cfg,
            objects,
            timeout_s=timeout,
            on_plan=lambda p, f: print_plan(console, p, f),
            on_update=view.update,
            on_note=lambda text: console.print(text, highlight=False, markup=False),
        )
    applied = report.applied
    if applied is not None:
        console.print(
            f"created {len(applied.created)}, updated {len(applied.updated)}, replaced {len(applied.replaced)}, "
            f"unchanged {len(applied.unchanged)}",
            highlight=False,
        )
    print_table(console, _states_table(report.states))
    console.print("[green]both services are ready[/]" if only is None else f"[green]{only} service is ready[/]")


@commands.command("status")
def status_cmd(
    config: ConfigOpt = None,
    sets: SetOpt = None,
    context: ContextOpt = None,
    kubeconfig: KubeconfigOpt = None,
    namespace: KubeNamespaceOpt = None,
    output: OutputOpt = Output.table,
) -> None:
    """Show both services: phase, ready replicas, window, image and what is wrong if anything."""
    from spectrn.deploy.service import status

    cfg = config_from_cli(config, sets, cluster=False, console=err_console(), namespace=namespace)
    kube = connect_cluster(context, kubeconfig)
    states = status(kube, cfg)
    if output == Output.table:
        print_table(out_console(), _states_table(states))
    else:
        print_document({"namespace": cfg.namespace, "services": [_state_dict(s) for s in states]}, output)


def _state_dict(s: ServiceState) -> dict[str, Any]:
    d = s.diagnosis
    return {
        "variant": s.variant,
        "deployment": s.name,
        "phase": s.phase,
        "ready": s.ready,
        "desired": s.desired,
        "window": s.window,
        "age": s.age,
        "image": s.image,
        "detail": s.detail,
        "diagnosis": (
            {"cause": d.cause, "detail": d.detail, "next_step": d.next_step, "fatal": d.fatal, "pod": d.pod}
            if d is not None
            else None
        ),
    }


@commands.command("teardown")
def teardown_cmd(
    config: ConfigOpt = None,
    sets: SetOpt = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be deleted; delete nothing.")] = False,
    keep_namespace: Annotated[bool, typer.Option("--keep-namespace", help="Never delete the namespace.")] = False,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait/--no-wait", help="Wait until a deleted namespace is really gone (it is Terminating first)."
        ),
    ] = True,
    timeout: Annotated[
        float,
        typer.Option("--timeout", metavar="SECONDS", min=1, max=86400, help="Seconds to wait for the namespace to go."),
    ] = 600,
    context: ContextOpt = None,
    kubeconfig: KubeconfigOpt = None,
    namespace: KubeNamespaceOpt = None,
) -> None:
    """Delete every object spectrn created (label app.kubernetes.io/managed-by=spectrn), nothing else."""
    from spectrn.deploy.teardown import teardown, wait_namespace_gone
    from spectrn.errors import Interrupted

    console = err_console()
    cfg = config_from_cli(config, sets, cluster=False, console=console, namespace=namespace)
    kube = connect_cluster(context, kubeconfig)
    preview = teardown(kube, cfg, dry_run=True, keep_namespace=keep_namespace)
    for name in preview.deleted:
        typer.echo(f"{'would delete' if dry_run else 'delete'}: {name}")
    for name in preview.kept:
        typer.echo(f"keep: {name}")
    if dry_run or not preview.deleted:
        if not preview.deleted:
            typer.echo(f"nothing of spectrn's in namespace {cfg.namespace!r} (context {kube.context!r})")
        if preview.terminating and wait and not dry_run:
            typer.echo(f"waiting for namespace {preview.terminating} to be gone")
            wait_namespace_gone(kube, preview.terminating, timeout_s=timeout)
        return
    if not yes and not typer.confirm(f"delete these {len(preview.deleted)} object(s) in context {kube.context!r}?"):
        raise Interrupted("teardown cancelled; nothing was deleted")
    done = teardown(kube, cfg, keep_namespace=keep_namespace, wait_s=timeout if wait else None)
    typer.echo(f"deleted {len(done.deleted)} object(s)")
    if done.terminating:
        typer.echo(f"namespace {done.terminating} is Terminating; it goes once its content is gone (--no-wait)")


@commands.command("collect")
def collect_cmd(
    run_id: Annotated[
        str, typer.Argument(metavar="RUN_ID", help="Run id of a load Job whose results were not collected.")
    ],
    config: ConfigOpt = None,
    sets: SetOpt = None,
    out_dir: Annotated[
        Path | None, typer.Option("--out-dir", metavar="DIR", help="Results root; the run goes to OUT_DIR/RUN_ID.")
    ] = None,
    out: OldOutOpt = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", metavar="SECONDS", min=0, max=7 * 86400, help="Seconds to wait for the pods to finish."
        ),
    ] = 600,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Write the HTML/PNG report.")] = True,
    output: OutputOpt = Output.table,
    context: ContextOpt = None,
    kubeconfig: KubeconfigOpt = None,
    namespace: KubeNamespaceOpt = None,
) -> None:
    """Fetch the results of an in-cluster bench (e.g. after the CLI died), analyze them, delete the Job."""
    from spectrn.bench.incluster import collect
    from spectrn.cli.progress import EventView
    from spectrn.cli.show import finish_and_show

    console = err_console()
    root = out_dir_of(out_dir, out, Path("results"))
    cfg = config_from_cli(config, sets, cluster=False, console=console, namespace=namespace)
    kube = connect_cluster(context, kubeconfig)
    with EventView(console) as view:
        collected = collect(kube, cfg.namespace, run_id, out_root=root, on_event=view, timeout_s=timeout)
    finish_and_show(collected.run_dir, console, report=report, output=output)
    if output == Output.table:
        typer.echo(str(collected.run_dir))


@kind_app.command("fake-neuron")
def fake_neuron_cmd(
    node: Annotated[
        list[str] | None, typer.Option("--node", metavar="NODE", help="Node to patch (repeatable; default: all).")
    ] = None,
    neuron: Annotated[
        int, typer.Option("--neuron", metavar="N", min=1, max=1024, help="aws.amazon.com/neuron devices per node.")
    ] = 16,
    neuroncore: Annotated[
        int, typer.Option("--neuroncore", metavar="N", min=1, max=8192, help="aws.amazon.com/neuroncore per node.")
    ] = 128,
    context: ContextOpt = None,
    kubeconfig: KubeconfigOpt = None,
) -> None:
    """Advertise fake Neuron capacity on a kind cluster's nodes (node status patch; test clusters only)."""
    from spectrn.deploy.kind import advertise_fake_neuron
    from spectrn.errors import ConfigError

    kube = connect_cluster(context, kubeconfig)
    if not kube.context.startswith("kind-") and not node:
        raise ConfigError(
            f"context {kube.context!r} is not a kind cluster; refusing to fake Neuron capacity on every node",
            hint="use a kind context (kind-NAME), or name the nodes with --node if you really mean it",
        )
    names = advertise_fake_neuron(kube, nodes=node, neuron=neuron, neuroncore=neuroncore)
    typer.echo(
        f"advertised {neuron} aws.amazon.com/neuron and {neuroncore} aws.amazon.com/neuroncore on: {', '.join(names)}"
    )
