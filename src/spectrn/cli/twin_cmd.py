"""``spectrn twin``: fit a digital twin to measured runs, predict other windows and loads, report the fit."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from spectrn.cli.common import Output, OutputOpt, out_console, print_document
from spectrn.intervals import interval_text
from spectrn.labels import window_label

if TYPE_CHECKING:
    from rich.console import Console

    from spectrn.twin.predict import Estimate, Prediction

# this module's commands; spectrn.cli.main adds them to the app
commands = typer.Typer()

twin_app = typer.Typer(
    name="twin",
    help="Digital twin: fit the simulator to one measured run, predict other windows and loads offline.",
    no_args_is_help=True,
)
commands.add_typer(twin_app, name="twin")

TwinArg = Annotated[Path, typer.Argument(help="A twin written by `spectrn twin calibrate`.")]
WindowsOpt = Annotated[
    str, typer.Option("--windows", metavar="3,5,7", help="Comma-separated windows to predict, e.g. 3,5,7,9.")
]
LevelsOpt = Annotated[
    str, typer.Option("--concurrency", metavar="1,4,16", help="Comma-separated closed-loop levels, e.g. 1,4,16,64.")
]
MixOpt = Annotated[
    str | None,
    typer.Option(
        "--mix",
        metavar="CLASS=WEIGHT,...",
        help="Prompt-class weights, e.g. structured=0.7,open=0.3 (default: the runs' shares).",
    ),
]
MaxSeqsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-num-seqs",
        metavar="N",
        help="Batch limit to predict for (default: the twin's; on Neuron another value means another compile).",
    ),
]
SamplesOpt = Annotated[
    int, typer.Option("--samples", metavar="N", min=10, max=5000, help="Parameter draws for the intervals.")
]


def _ints(raw: str, flag: str) -> list[int]:
    from spectrn.sweep.grid import parse_list

    values = parse_list(raw, flag, int) or []
    if not values or any(v < 1 for v in values):
        from spectrn.errors import ConfigError

        raise ConfigError(f"{flag} {raw!r}: give positive integers", hint=f"e.g. {flag} 1,4,16")
    return values


def _mix(raw: str | None) -> dict[str, float] | None:
    if raw is None:
        return None
    from spectrn.sweep.recommend import parse_mix

    return parse_mix(raw)


@twin_app.command("calibrate")
def calibrate(
    run_dirs: Annotated[
        list[Path],
        typer.Argument(metavar="RUN_DIR", help="Run folders: a baseline + speculative A/B at 2-3 loads."),
    ],
    out: Annotated[Path, typer.Option("--out-file", metavar="FILE", help="The twin to write (YAML).")] = Path(
        "twin.yaml"
    ),
    prompts: Annotated[
        str | None,
        typer.Option("--prompts", metavar="NAME", help="The prompt set the runs sent, if their config's is not here."),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", metavar="NAME", help="Preset name (default: twin-RUN_ID of the first run).")
    ] = None,
) -> None:
    """Fit step costs, prefill cost, per-class acceptance and window semantics to measured runs; write a simulator
    preset (`spectrn sim serve --preset-file`) whose `calibration` says where every value comes from."""
    from spectrn.cli.common import err_console
    from spectrn.paths import atomic_write_text
    from spectrn.twin.calibrate import calibrate as fit
    from spectrn.twin.calibrate import summary_lines
    from spectrn.twin.model import dump_twin

    console = err_console()
    twin = fit(run_dirs, prompts=prompts, name=name)
    atomic_write_text(out, dump_twin(twin))
    for line in summary_lines(twin):
        console.print(line, markup=False, highlight=False)
    console.print(f"twin: {out}", markup=False, highlight=False)


@twin_app.command("predict")
def predict(
    twin: TwinArg,
    windows: WindowsOpt = "3,5,7,9,11,15",
    concurrency: LevelsOpt = "1,4,16,64",
    mix: MixOpt = None,
    max_num_seqs: MaxSeqsOpt = None,
    requests: Annotated[
        int | None, typer.Option("--requests", metavar="N", help="Requests per level (default: the runs').")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", metavar="N", help="Output tokens per request (default: the runs').")
    ] = None,
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale", metavar="X", help="Predict for a bench at this simulator time scale (its start ramp)."
        ),
    ] = 1.0,
    samples: SamplesOpt = 200,
    seed: Annotated[
        int, typer.Option("--seed", metavar="N", help="Seed of the engine's draws and the parameter draws.")
    ] = 0,
    output: OutputOpt = Output.table,
) -> None:
    """Predicted TPOT, e2e, throughput and cost per window and load level with 95% intervals; the best window per
    level; the load at which speculation stops paying."""
    from spectrn.twin.compare import bench_order, default_ramps
    from spectrn.twin.model import load_twin
    from spectrn.twin.predict import predict as run

    t = load_twin(twin)
    levels = _ints(concurrency, "--concurrency")
    weights = _mix(mix)
    w = t.calibration.workload
    order = None
    if weights is None:  # the runs' workload: their schedule, so the prediction stands for the same bench
        order = bench_order(w.prompts, requests or w.requests, w.warmup, w.seed)
    result = run(
        t,
        windows=_ints(windows, "--windows"),
        levels=levels,
        mix=weights,
        max_num_seqs=max_num_seqs,
        requests=requests,
        max_tokens=max_tokens,
        order=order,
        ramp_s=default_ramps(levels, time_scale),
        samples=samples,
        seed=seed,
    )
    if output != Output.table:
        print_document(result.model_dump(mode="json"), output)
        return
    _print_prediction(result, out_console())


def _ci(e: Estimate, scale: float = 1.0, digits: int = 1, suffix: str = "") -> str:
    if e.value != e.value:
        return "n/a"
    text = f"{e.value * scale:.{digits}f}{suffix}"
    if e.ci95 is not None:
        text += interval_text(e.ci95, digits, scale=scale)
    return text


def _print_prediction(p: Prediction, console: Console) -> None:
    from rich.table import Table

    if not p.performance:
        console.print("NOT A PERFORMANCE RESULT: the twin was fitted to runs whose timing means nothing: "
                      + "; ".join(p.reasons), style="bold red", markup=False, highlight=False)  # fmt: skip
    console.print(
        f"twin {p.twin}: draft {p.draft}, {p.semantics} windows, batch limit {p.max_num_seqs}, "
        f"requests of {p.max_tokens} tokens per level: "
        + ", ".join(f"c{c} {n}" for c, n in p.requests.items())
        + "; mix "
        + ", ".join(f"{c}={w:.2f}" for c, w in p.mix.items()),
        markup=False,
        highlight=False,
    )
    table = Table(title="predicted (95% intervals from the fit's uncertainty)", title_justify="left")
    for col in ("conc.", "window", "TPOT mix ms", "speedup mix", "e2e p50 s", "tokens/s", "$/M tokens", "extrap."):
        table.add_column(col, justify="left" if col in ("window", "extrap.") else "right")
    for c in p.cells:
        table.add_row(
            str(c.concurrency),
            "baseline" if c.window is None else str(c.window),
            _ci(c.tpot_s["mix"], 1000, 1),
            _ci(c.speedup_tpot["mix"], 1, 2, "x") if "mix" in c.speedup_tpot else "",
            _ci(c.e2e_s, 1, 2),
            _ci(c.throughput_tok_s, 1, 0),
            _ci(c.usd_per_million_tokens, 1, 2),
            ", ".join(c.extrapolated),
        )
    console.print(table)
    for b in p.best:
        if b.window is None:
            fastest = _ci(b.speedup, 1, 2, "x") if b.speedup else "n/a"
            console.print(f"c{b.concurrency}: no window pays (fastest: {fastest})", markup=False, highlight=False)
        else:
            share = f", fastest in {b.probability_best:.0%} of draws" if b.probability_best is not None else ""
            console.print(f"c{b.concurrency}: best window {b.window}: {_ci(b.speedup, 1, 2, 'x') if b.speedup else ''}"
                          f"{share}", markup=False, highlight=False)  # fmt: skip
    for title, rows in (("batch limit", p.crossover), ("without the batch limit", p.crossover_unlimited)):
        parts = []
        for x in rows:
            ci = interval_text(x.ci95, 0)
            parts.append(f"{window_label(x.window)}: {x.note}{ci}")
        console.print(f"crossover ({title}): " + "; ".join(parts), markup=False, highlight=False)
    for title, value in (("within the batch limit", p.no_window_pays_from),
                         ("without the batch limit", p.no_window_pays_from_unlimited)):  # fmt: skip
        where = f"from concurrency {value}" if value is not None else "nowhere in the scan: some window still pays"
        console.print(f"speculation stops paying ({title}): {where}", markup=False, highlight=False)
    console.print(f"method: {p.method}", style="dim", markup=False, highlight=False)
    for note in p.notes:
        console.print(f"note: {note}", style="dim", markup=False, highlight=False)


@twin_app.command("report")
def report(
    twin: TwinArg,
    out: Annotated[Path, typer.Option("--out-dir", metavar="DIR", help="Folder for index.html and its PNGs.")] = Path(
        "twin-report"
    ),
    measured: Annotated[
        list[Path] | None,
        typer.Option(
            "--measured",
            metavar="DIR",
            help="Run folders or sweep folders to compare with the prediction (repeatable).",
        ),
    ] = None,
    windows: WindowsOpt = "3,5,7,9,11,15",
    concurrency: LevelsOpt = "1,2,4,8,16,32,64",
    mix: MixOpt = None,
    max_num_seqs: MaxSeqsOpt = None,
    samples: SamplesOpt = 200,
) -> None:
    """An HTML page with PNG plots: fit residuals, acceptance per position and class, predicted vs measured
    points, and the load crossover."""
    from spectrn.cli.common import err_console
    from spectrn.report.twin import write_twin_report
    from spectrn.twin.compare import compare_runs, default_ramps
    from spectrn.twin.model import load_twin
    from spectrn.twin.predict import predict as run

    t = load_twin(twin)
    levels = _ints(concurrency, "--concurrency")
    prediction = run(
        t,
        windows=_ints(windows, "--windows"),
        levels=levels,
        mix=_mix(mix),
        max_num_seqs=max_num_seqs,
        ramp_s=default_ramps(levels),
        samples=samples,
    )
    runs = []
    for path in measured or []:
        found = sorted(p.parent for p in path.glob("cells/*/*/run.json")) if (path / "sweep.json").exists() else [path]
        runs += found
    skipped: list[str] = []
    points = compare_runs(t, runs, samples=min(samples, 100), skipped=skipped) if runs else []
    for note in skipped:
        err_console().print(f"warning: {note}", markup=False, highlight=False)
    page = write_twin_report(t, prediction, points, out, skipped=skipped)
    err_console().print(f"report: {page}", markup=False, highlight=False)
