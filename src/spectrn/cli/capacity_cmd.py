"""``spectrn capacity``: the highest load each variant carries within the SLOs, its throughput and $/M there."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Any

import typer

from spectrn.cli.common import (
    ConfigOpt,
    DraftOpt,
    Output,
    OutputOpt,
    SetOpt,
    SloOpt,
    WindowOpt,
    config_from_cli,
    err_console,
    slo_flag,
)
from spectrn.errors import ConfigError
from spectrn.labels import stamped_id

# this module's commands; spectrn.cli.main adds them to the app
commands = typer.Typer()

DEFAULT_MAX = {"concurrency": 512.0, "rate": 256.0}


def _options(
    rate_search: bool, start: float | None, maximum: float | None, precision: float | None, requests: int | None
) -> tuple[str, float, float, float]:
    """Checked search bounds: (kind, start, maximum, precision), each error naming its flag and the fix."""
    from spectrn.capacity.search import DEFAULT_RATE_PRECISION

    kind = "rate" if rate_search else "concurrency"
    unit = "req/s" if rate_search else "concurrent requests"
    lo = 1.0 if start is None else float(start)
    hi = DEFAULT_MAX[kind] if maximum is None else float(maximum)
    for flag, value in (("--start", lo), ("--max", hi)):
        if not math.isfinite(value) or value <= 0:
            raise ConfigError(f"{flag} {value:g} is not a positive number of {unit}", hint=f"give e.g. {flag} 4")
        if kind == "concurrency" and value != int(value):
            raise ConfigError(
                f"{flag} {value:g} is not a whole number of concurrent requests",
                hint=f"give an integer, e.g. {flag} 4 (or --rate-search to search request rates)",
            )
    if hi < lo:
        raise ConfigError(f"--max {hi:g} is below --start {lo:g}", hint="give --max at least --start")
    prec = (1.0 if kind == "concurrency" else DEFAULT_RATE_PRECISION) if precision is None else float(precision)
    if not math.isfinite(prec) or prec <= 0:
        raise ConfigError(
            f"--precision {prec:g} is not above 0", hint="e.g. --precision 2 (concurrency) or 0.1 (rates)"
        )
    if kind == "concurrency" and prec != int(prec):
        raise ConfigError(
            f"--precision {prec:g}: a concurrency search stops at an integer width",
            hint="give a whole number of concurrent requests, e.g. --precision 1 (adjacent concurrencies)",
        )
    if kind == "rate" and prec >= 1:
        raise ConfigError(
            f"--precision {prec:g}: a rate search's precision is relative (0.1 = within 10 %)",
            hint="give a fraction below 1, e.g. --precision 0.1",
        )
    if requests is not None and requests < 1:
        raise ConfigError(f"--requests {requests} is below 1", hint="give e.g. --requests 200 (or leave it out)")
    return kind, lo, hi, prec


def _percentiles(cfg: Any, source: str) -> tuple[tuple[float, ...], tuple[str, ...]]:
    from spectrn.analyze.slo import slos_of

    slos = slos_of(cfg.bench.slo, cfg.bench.slo_ttft_s, cfg.bench.slo_tpot_s)
    pct = tuple(s.percentile for s in slos if s.percentile is not None)
    if not pct:
        given = ", ".join(s.text for s in slos) or "none"
        raise ConfigError(
            f"{source}: capacity needs at least one percentile SLO (given: {given})",
            hint="add e.g. --slo 'p90:tpot<=50ms' --slo 'p90:ttft<=2s' (a per-request SLO alone defines goodput, "
            "not a pass or fail of a load)",
        )
    return pct, tuple(s.text for s in slos)


@commands.command("capacity")
def capacity(
    config: ConfigOpt = None,
    sets: SetOpt = None,
    draft: DraftOpt = None,
    window: WindowOpt = None,
    slo: SloOpt = None,
    endpoint: Annotated[
        list[str] | None,
        typer.Option(
            "--endpoint", "-e", metavar="NAME=URL", help="A server to search: baseline=URL and/or speculative=URL."
        ),
    ] = None,  # fmt: skip
    local: Annotated[bool, typer.Option("--local", help="Search a local simulator pair (as `bench --local`).")] = False,
    rate_search: Annotated[
        bool, typer.Option("--rate-search", help="Search open-loop request rates (req/s) instead of concurrency.")
    ] = False,
    start: Annotated[float | None, typer.Option("--start", metavar="X", help="First load probed (default 1).")] = None,
    maximum: Annotated[
        float | None,
        typer.Option("--max", metavar="X", help="Highest load probed (default 512 concurrent requests, 256 req/s)."),
    ] = None,
    precision: Annotated[
        float | None,
        typer.Option(
            "--precision",
            metavar="X",
            help="Stop bisecting when last pass and first fail are this close: concurrency, an integer width "
            "(default 1: adjacent values); rates, relative (default 0.1: within 10 %).",
        ),
    ] = None,
    requests: Annotated[
        int | None,
        typer.Option(
            "--requests",
            metavar="N",
            help="Raise the requests per probe (default: ceil(10 / (1 - p/100)) for the highest percentile SLO p, "
            "100 for p90; at least 2 x the concurrency).",
        ),
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", metavar="N", help="Output tokens per request.")
    ] = None,
    prompts: Annotated[
        str | None, typer.Option("--prompts", metavar="SET|FILE", help="Prompt set or file (as `spectrn bench`).")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", metavar="NAME", help="Model name to request (default: /v1/models).")
    ] = None,
    time_scale: Annotated[
        float | None, typer.Option("--time-scale", metavar="X", help="Simulator time scale (--local).")
    ] = None,
    twin: Annotated[
        Path | None,
        typer.Option(
            "--twin",
            metavar="FILE",
            help="A calibrated twin: its predicted capacity per window, shown "
            "next to the measurement (concurrency searches).",
        ),
    ] = None,  # fmt: skip
    windows: Annotated[
        str | None,
        typer.Option("--twin-windows", metavar="3,5,7", help="Windows the twin predicts (default: --window)."),
    ] = None,
    capacity_id: Annotated[
        str | None, typer.Option("--id", metavar="ID", help="Folder name under --out-dir (default: capacity-<time>).")
    ] = None,
    out_dir: Annotated[
        Path, typer.Option("--out-dir", metavar="DIR", help="Results root; the search goes to OUT_DIR/ID.")
    ] = Path("results"),
    output: OutputOpt = Output.table,
) -> None:
    """Find, for baseline and speculative each, the highest load that meets the percentile SLOs (doubling,
    then bisection; every probe a real bench level), with output tokens/s per instance and $/M output tokens
    at that load, their speculative / baseline ratios, and the load from which speculation stops paying."""

    from spectrn.cli.bench_cmd import parse_endpoints
    from spectrn.cli.progress import EventView
    from spectrn.cli.show import show_capacity
    from spectrn.names import check_run_id

    console = err_console()
    kind, lo, hi, prec = _options(rate_search, start, maximum, precision, requests)
    endpoints = parse_endpoints(endpoint)
    unknown = sorted(set(endpoints) - {"baseline", "speculative"})
    if unknown:
        raise ConfigError(f"--endpoint {unknown[0]}: capacity searches baseline and speculative only",
                          hint="name the servers baseline=URL and speculative=URL")  # fmt: skip
    if not endpoints and not local:
        raise ConfigError("no server to search: give --local or --endpoint baseline=URL --endpoint speculative=URL",
                          hint="e.g. spectrn capacity --local --slo 'p90:tpot<=50ms'")  # fmt: skip
    if twin is not None and kind != "concurrency":
        raise ConfigError("--twin predicts closed-loop levels only: it has no capacity for --rate-search",
                          hint="drop --twin, or search concurrency (without --rate-search)")  # fmt: skip
    flags: dict[str, Any] = {"bench__slo": slo_flag(slo), "bench__max_tokens": max_tokens, "bench__prompts": prompts}
    cfg = config_from_cli(config, sets, cluster=False, console=console, draft=draft, num_speculative_tokens=window,
                          **flags)  # fmt: skip
    percentiles, slo_texts = _percentiles(cfg, "--slo" if slo else "bench.slo")
    cid = check_run_id(capacity_id, source="--id") if capacity_id else stamped_id(prefix="capacity-")
    folder = _fresh_folder(out_dir, cid)
    twin_model = _load_twin(twin) if twin is not None else None
    from spectrn.capacity.run import CapacityOptions, run_capacity
    from spectrn.report.capacity import write_capacity_report

    opts = CapacityOptions(kind=kind, start=lo, maximum=hi, precision=prec, requests=requests,  # type: ignore[arg-type]
                           percentiles=percentiles, slos=slo_texts)  # fmt: skip
    with (
        EventView(console) as view,
        _target(cfg, endpoints, folder, time_scale, model, declared=bool(draft or window)) as target,
    ):  # noqa: E501
        known = target.runtime == "sim" or draft is not None or window is not None
        result = run_capacity(
            cfg, target, opts, folder, cid, view, window=cfg.num_speculative_tokens if known else None
        )
    if twin_model is not None:
        from spectrn.capacity.twin import twin_capacity
        from spectrn.paths import atomic_write_text

        result.twin = twin_capacity(twin_model, cfg, result, _windows(windows, cfg), twin.name if twin else "")
        atomic_write_text(folder / "capacity.json", result.model_dump_json(indent=2) + "\n")
    written = write_capacity_report(folder, result)
    show_capacity(result, folder, written, output)


def _fresh_folder(out_dir: Path, cid: str) -> Path:
    from spectrn.paths import safe_output_dir

    folder = safe_output_dir(out_dir, what="--out-dir") / cid
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ConfigError(f"--id {cid}: {folder} already exists and is not empty",
                          hint="choose another --id, or move that folder away")  # fmt: skip
    return folder


def _windows(text: str | None, cfg: Any) -> list[int]:
    if text is None:
        return [int(cfg.num_speculative_tokens)]
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(
            f"--twin-windows {text!r} is not a list of integers", hint="e.g. --twin-windows 3,5,7"
        ) from None
    if not out or any(w < 1 for w in out):
        raise ConfigError(f"--twin-windows {text!r}: every window must be at least 1", hint="e.g. --twin-windows 3,5,7")
    return out


def _load_twin(path: Path) -> Any:
    from spectrn.twin.model import load_twin

    return load_twin(path)


class _target:  # noqa: N801 - a context manager used like a function
    """The servers: a local simulator pair (started here, always stopped) or the given endpoints."""

    def __init__(self, cfg: Any, endpoints: dict[str, str], folder: Path, time_scale: float | None,
                 model: str | None, *, declared: bool) -> None:  # fmt: skip
        self.cfg, self.endpoints, self.folder = cfg, endpoints, folder
        self.time_scale, self.model, self.declared = time_scale, model, declared
        self.pair: Any = None

    def __enter__(self) -> Any:
        from spectrn.bench.local import endpoint_provenance, local_runtime
        from spectrn.capacity.probe import Target

        if self.endpoints:
            declared = self.declared
            return Target(dict(self.endpoints), self.model,
                          lambda cfg, eps: endpoint_provenance(cfg, eps, declared=declared), "endpoints")  # fmt: skip
        self.folder.mkdir(parents=True, exist_ok=True)
        self.pair = local_runtime(self.cfg, "sim", self.folder / "servers", self.time_scale)
        pair = self.pair.__enter__()

        def prov(cfg: Any, eps: dict[str, str]) -> Any:
            return endpoint_provenance(cfg, eps, runtime="sim", started=True, profile=pair.profile,
                                       time_scale=pair.time_scale)  # fmt: skip

        return Target(dict(pair.endpoints), self.model or pair.model, prov, "sim")

    def __exit__(self, *exc: object) -> None:
        if self.pair is not None:
            self.pair.__exit__(None, None, None)
