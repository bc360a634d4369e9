"""``spectrn sim``: run the simulated Neuron vLLM server, list its presets, print its ground truth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from spectrn.cli.common import Output

# this module's commands; spectrn.cli.main adds them to the app
commands = typer.Typer()


sim_app = typer.Typer(
    name="sim",
    help="Simulated Neuron vLLM server: vLLM's OpenAI protocol with speculative-decoding timing.",
    no_args_is_help=True,
)
commands.add_typer(sim_app, name="sim")

PresetOpt = Annotated[
    str, typer.Option("--preset", metavar="PRESET", help="Calibration preset (see `spectrn sim presets`).")
]
SpecOpt = Annotated[bool, typer.Option("--speculative/--baseline", help="Serve with speculative decoding.")]
DraftOpt = Annotated[
    str | None, typer.Option("--draft", metavar="MODEL", help="Draft model key (default: the preset's, qwen3-1.7b).")
]
WindowOpt = Annotated[
    int | None, typer.Option("--window", metavar="K", help="num_speculative_tokens (default: the preset's, 7).")
]
TimeScaleOpt = Annotated[
    float, typer.Option("--time-scale", metavar="X", help="Multiply every simulated duration (0.1 = ten times faster).")
]
ConfigFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--config-file", metavar="FILE", help="YAML with any SimSettings keys (cost:, acceptance:, faults:, ...)."
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="GROUP.NAME=VALUE",
        help="Override one model parameter: --set cost.weights_read_s=0.04 (repeatable).",
    ),
]
ProfileOpt = Annotated[
    str | None,
    typer.Option(
        "--profile",
        metavar="PROFILE",
        help="Server imitated on the wire: neuron-fork (the 0.9.1 Neuron DLC), vllm-neuron (plugin 0.2.x), "
        "vllm-neuron-0.24 (the current plugin, eagle3), vllm-neuron-0.5 (plugin 0.5.x, NxDI) or upstream (vLLM V1). "
        "Default: the preset's (neuron-fork "
        "for the Neuron presets).",
    ),
]
PresetFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--preset-file",
        metavar="FILE",
        help="A whole preset in YAML (see `spectrn sim presets --yaml`); replaces --preset.",
    ),
]


def _param_overrides(items: list[str] | None) -> dict[str, dict[str, float]]:
    from pydantic import BaseModel

    from spectrn.errors import ConfigError
    from spectrn.sim.model import AcceptanceModel, CostModel

    out: dict[str, dict[str, float]] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        group, dot, name = key.strip().partition(".")
        valid: dict[str, type[BaseModel]] = {"cost": CostModel, "acceptance": AcceptanceModel}
        if not sep or not dot or group not in valid:
            raise ConfigError(
                f"--set {item!r} is not GROUP.NAME=VALUE with GROUP cost or acceptance",
                hint="write e.g. --set cost.weights_read_s=0.04 or --set acceptance.alpha_open=0.25",
            )
        if name not in valid[group].model_fields:
            raise ConfigError(
                f"--set {item!r}: {group} has no parameter {name!r}",
                hint=f"valid: {', '.join(valid[group].model_fields)}",
            )
        try:
            out.setdefault(group, {})[name] = float(raw)
        except ValueError:
            raise ConfigError(f"--set {item!r}: {raw!r} is not a number", hint="give a number, e.g. 0.04") from None
    return out


def _preset_from_file(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    from spectrn.sim.settings import load_preset_file

    return load_preset_file(path).model_dump()


@sim_app.command("serve")
def serve(
    ctx: typer.Context,
    port: Annotated[int, typer.Option("--port", metavar="PORT", min=1, max=65535, help="TCP port.")] = 8000,
    host: Annotated[
        str, typer.Option("--host", metavar="ADDRESS", help="Address to bind (0.0.0.0 inside a container).")
    ] = "127.0.0.1",
    preset: PresetOpt = "qwen3-32b-trn2",
    preset_file: PresetFileOpt = None,
    profile: ProfileOpt = None,
    speculative: SpecOpt = False,
    draft: DraftOpt = None,
    window: WindowOpt = None,
    max_num_seqs: Annotated[
        int | None, typer.Option("--max-num-seqs", metavar="N", help="Batch limit (default: preset).")
    ] = None,
    max_model_len: Annotated[
        int | None, typer.Option("--max-model-len", metavar="TOKENS", help="Context limit (default: preset).")
    ] = None,
    time_scale: TimeScaleOpt = 1.0,
    seed: Annotated[
        int, typer.Option("--seed", metavar="N", help="Seed of output text, acceptance draws and faults.")
    ] = 0,
    served_model_name: Annotated[
        str | None,
        typer.Option("--served-model-name", metavar="NAME", help="Model name clients send (default: target HF id)."),
    ] = None,
    startup_delay: Annotated[
        float,
        typer.Option(
            "--startup-delay", metavar="SECONDS", help="Seconds /health answers 503 ('compiling') after start."
        ),
    ] = 0.0,
    error_rate: Annotated[
        float, typer.Option("--error-rate", metavar="SHARE", help="Share of requests answered with an error.")
    ] = 0.0,
    error_status: Annotated[
        int, typer.Option("--error-status", metavar="500|503", help="Status of injected errors: 500 or 503.")
    ] = 500,
    disconnect_rate: Annotated[
        float, typer.Option("--disconnect-rate", metavar="SHARE", help="Share of streams cut mid-way.")
    ] = 0.0,
    stall_rate: Annotated[
        float, typer.Option("--stall-rate", metavar="P", help="Probability per engine step of an engine stall.")
    ] = 0.0,
    stall_s: Annotated[
        float, typer.Option("--stall-s", metavar="SECONDS", help="Length of a stall (seconds, before time scale).")
    ] = 1.0,
    malformed_sse_rate: Annotated[
        float, typer.Option("--malformed-sse-rate", metavar="SHARE", help="Share of streams with one malformed event.")
    ] = 0.0,
    write_workers: Annotated[
        int | None,
        typer.Option(
            "--write-workers",
            metavar="N",
            help="Processes that write streams' chunks in parallel with the engine (default: 2 from a batch "
            "limit of 192 on 2+ CPUs, else 0).",
        ),
    ] = None,
    no_identity: Annotated[
        bool,
        typer.Option(
            "--no-identity",
            help="Do not serve /sim/identity: the server then looks like a real vLLM server (a test switch: "
            "spectrn must identify it from /version and /metrics alone).",
        ),
    ] = False,
    config_file: ConfigFileOpt = None,
    sets: SetOpt = None,
) -> None:
    """Serve vLLM's OpenAI API with simulated Neuron timing (also the container entrypoint)."""
    from spectrn.sim import load_settings
    from spectrn.sim import serve as run

    def given(name: str, value: Any) -> Any:
        # Flags left at their defaults do not override the config file.
        source = ctx.get_parameter_source(name)
        return value if source is not None and source.name != "DEFAULT" else None

    faults = {
        k: v
        for k, v in {
            "error_rate": given("error_rate", error_rate),
            "error_status": given("error_status", error_status),
            "disconnect_rate": given("disconnect_rate", disconnect_rate),
            "stall_rate": given("stall_rate", stall_rate),
            "stall_s": given("stall_s", stall_s),
            "malformed_sse_rate": given("malformed_sse_rate", malformed_sse_rate),
        }.items()
        if v is not None
    }
    settings = load_settings(
        config_file,
        preset=given("preset", preset),
        custom_preset=_preset_from_file(preset_file),
        profile=profile,
        speculative=given("speculative", speculative),
        draft=draft,
        window=window,
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        time_scale=given("time_scale", time_scale),
        seed=given("seed", seed),
        served_model_name=served_model_name,
        startup_delay_s=given("startup_delay", startup_delay),
        write_workers=write_workers,
        identity_endpoint=False if no_identity else None,
        faults=faults or None,
        **_param_overrides(sets),
    )
    m = settings.resolved()
    mode = f"speculative (draft {m.draft}, window {m.window})" if m.speculative else "baseline"
    typer.echo(
        f"spectrn sim: {settings.model_name} [{settings.preset_name}, {mode}, profile "
        f"{settings.server_profile.name}, max_num_seqs {settings.batch_limit}, time scale {settings.time_scale:g}] "
        f"on http://{host}:{port}",
        err=True,
    )
    run(settings, host, port)


@sim_app.command("presets")
def presets(
    as_json: Annotated[bool, typer.Option("--json", help="Print the full presets as JSON.")] = False,
    as_yaml: Annotated[
        str | None,
        typer.Option("--yaml", metavar="PRESET", help="Print one preset as YAML, a starting point for --preset-file."),
    ] = None,
) -> None:
    """List the calibration presets."""
    from spectrn.sim.model import PRESETS, get_preset

    if as_yaml is not None:
        import yaml

        typer.echo(yaml.safe_dump(get_preset(as_yaml).model_dump(mode="json"), sort_keys=False), nl=False)
        return
    if as_json:
        typer.echo(json.dumps({k: p.model_dump(mode="json") for k, p in PRESETS.items()}, indent=2))
        return
    for key, p in PRESETS.items():
        drafts = ", ".join(p.drafts)
        typer.echo(f"{key}: {p.description}")
        typer.echo(
            f"  target {p.target}; drafts {drafts} (others by size rule); default window {p.default_window}; "
            f"profile {p.profile}"
        )


@sim_app.command("expect")
def expect(
    prompt: Annotated[str, typer.Option("--prompt", metavar="TEXT", help="Prompt text to evaluate.")],
    preset: PresetOpt = "qwen3-32b-trn2",
    draft: DraftOpt = None,
    window: WindowOpt = None,
    batch: Annotated[int, typer.Option("--batch", metavar="N", help="Concurrent requests decoding together.")] = 4,
    prompt_tokens: Annotated[
        int | None, typer.Option("--prompt-tokens", metavar="N", help="Prompt length (default: counted).")
    ] = None,
    output_tokens: Annotated[int, typer.Option("--output-tokens", metavar="N", help="Output length.")] = 600,
    time_scale: TimeScaleOpt = 1.0,
    profile: ProfileOpt = None,
    preset_file: PresetFileOpt = None,
    config_file: ConfigFileOpt = None,
    sets: SetOpt = None,
    output: Annotated[
        Output,
        typer.Option(
            "--output",
            "-o",
            metavar="table|json|yaml",
            case_sensitive=False,
            help="Output format (json: one document).",
        ),
    ] = Output.json,
) -> None:
    """Print the simulator's ground truth for a prompt: predictability, acceptance, expected TPOT, crossover."""
    from spectrn.cli.common import out_console, print_document
    from spectrn.cli.show import key_value_table, print_table
    from spectrn.sim import load_settings
    from spectrn.sim.model import predictability
    from spectrn.sim.tokens import encode

    common: dict[str, Any] = dict(
        preset=preset,
        draft=draft,
        window=window,
        time_scale=time_scale,
        profile=profile,
        custom_preset=_preset_from_file(preset_file),
    )
    base = load_settings(config_file, **common, speculative=False, **_param_overrides(sets))
    spec = load_settings(config_file, **common, speculative=True, **_param_overrides(sets))
    n_prompt = prompt_tokens or len(encode(prompt))
    mb, ms = base.resolved(), spec.resolved()
    tb = mb.expected_tpot_s(prompt, batch=batch, prompt_tokens=n_prompt, output_tokens=output_tokens)
    ts = ms.expected_tpot_s(prompt, batch=batch, prompt_tokens=n_prompt, output_tokens=output_tokens)
    out = {
        "prompt_tokens": n_prompt,
        "predictability": predictability(prompt),
        "profile": spec.server_profile.name,
        "window_semantics": ms.semantics,
        "draft": ms.draft,
        "window": ms.window,
        "max_tokens_per_step": ms.max_tokens_per_step,
        "position_accept_probs": [round(p, 4) for p in ms.position_probs(prompt)],
        "expected_acceptance_rate": round(ms.expected_acceptance_rate(prompt), 4),
        "expected_tokens_per_step": round(ms.expected_tokens_per_step(prompt), 4),
        "ttft_s": round(mb.prefill_s(n_prompt), 6),
        "baseline_tpot_s": round(tb, 6),
        "speculative_tpot_s": round(ts, 6),
        "speedup": round(tb / ts, 3),
        # Concurrency from which speculation stops paying for this prompt (1: never pays; null: beyond 4096).
        "crossover_concurrency": ms.crossover_batch(prompt, prompt_tokens=n_prompt, output_tokens=output_tokens),
    }
    if output != Output.table:
        print_document(out, output)
        return
    print_table(out_console(), key_value_table(f"simulator ground truth ({ms.draft} draft, window {ms.window})", out))
