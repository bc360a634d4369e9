"""The in-cluster simulator runs what a local launch runs for the same config: the rendered container args carry
the config's values (``sim.profile`` among them), and equal, but for the address, the command line of the
simulators ``bench --local`` really starts (read back from /proc)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from doubles.render_support import FIXED_PROMPTS, k8s_expand
from spectrn.configuration.config import SpectrnConfig
from spectrn.render import manifests as render
from spectrn.runtimes.sim_pair import SimPair

# Every value differs from its default, so a launch path that drops or hard-codes one shows.
CFG: dict[str, Any] = {
    "runtime": "sim",
    "draft": "qwen3-0.6b",
    "num_speculative_tokens": 5,
    "max_num_seqs": 8,
    "max_model_len": 2048,
    "sim": {"profile": "upstream", "time_scale": 0.05},
}


def rendered_args(cfg: SpectrnConfig) -> dict[str, list[str]]:
    """Each simulator Deployment's container args, as the container receives them (Kubernetes expansion)."""
    out = {}
    for obj in render.render_objects(cfg, run_id="args", prompts=FIXED_PROMPTS):
        if obj["kind"] == "Deployment":
            (container,) = obj["spec"]["template"]["spec"]["containers"]
            out[obj["metadata"]["labels"]["spectrn.io/variant"]] = [k8s_expand(a, {}) for a in container["args"]]
    return out


def flags(args: list[str]) -> dict[str, str | bool]:
    """``--name value`` pairs and bare ``--switch`` flags of a command line."""
    out: dict[str, str | bool] = {}
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            nxt = args[i + 1] if i + 1 < len(args) else None
            out[arg] = nxt if nxt is not None and not nxt.startswith("--") else True
    return out


def with_address(args: list[str], host: str, port: str) -> list[str]:
    out = list(args)
    out[out.index("--host") + 1] = host
    out[out.index("--port") + 1] = port
    return out


def running_sim_args(url: str) -> list[str]:
    """The arguments after ``-m spectrn`` of this process's child serving on ``url``'s port, from /proc."""
    port = url.rsplit(":", 1)[1]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().decode().split("\0")[:-1]
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
        if ppid == os.getpid() and "--port" in argv and argv[argv.index("--port") + 1] == port:
            found.append(argv)
    (argv,) = found
    return argv[argv.index("spectrn") + 1 :]


def test_rendered_simulator_args_carry_the_config(make_cfg: Callable[..., SpectrnConfig]) -> None:
    cfg = make_cfg(CFG)
    args = rendered_args(cfg)
    assert set(args) == {"baseline", "speculative"}
    for variant, argv in args.items():
        f = flags(argv)
        assert argv[:2] == ["sim", "serve"]
        assert f["--profile"] == "upstream"
        assert float(str(f["--time-scale"])) == 0.05
        assert f["--max-num-seqs"] == "8" and f["--max-model-len"] == "2048"
        assert f["--preset"] == "qwen3-32b-trn2" and f["--served-model-name"] == "Qwen/Qwen3-32B"
        assert f["--host"] == "0.0.0.0" and f["--port"] == str(cfg.port)
        if variant == "speculative":
            assert f["--speculative"] is True and f["--draft"] == "qwen3-0.6b" and f["--window"] == "5"
        else:
            assert not {"--speculative", "--draft", "--window"} & set(f)


@pytest.mark.parametrize("time_scale", [0.05, 0.0123456789])
def test_local_servers_run_the_rendered_command_line(
    make_cfg: Callable[..., SpectrnConfig], tmp_path: Path, time_scale: float
) -> None:
    cfg = make_cfg({**CFG, "sim": {**CFG["sim"], "time_scale": time_scale}})
    rendered = rendered_args(cfg)
    with SimPair(cfg, tmp_path / "servers") as pair:
        local = {variant: running_sim_args(url) for variant, url in pair.endpoints.items()}
    for variant in ("baseline", "speculative"):
        f = flags(local[variant])
        assert f["--host"] == "127.0.0.1"
        assert float(str(f["--time-scale"])) == time_scale  # exactly: no digits lost on either path
        assert with_address(local[variant], "H", "P") == with_address(rendered[variant], "H", "P"), variant
