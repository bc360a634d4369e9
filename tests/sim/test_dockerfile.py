"""The image recipe (no container engine here, so checked statically): non-root, spectrn entrypoint, valid CMD."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    return [
        (m.group(1).upper(), m.group(2).strip())
        for m in re.finditer(r"^([A-Za-z]+)\s+(.*)$", text, flags=re.M)
        if not m.group(0).lstrip().startswith("#")
    ]


def test_runtime_stage_is_small_non_root_and_runs_spectrn() -> None:
    ins = instructions()
    froms = [v for k, v in ins if k == "FROM"]
    assert froms[-1] == "python:3.11-slim"
    runtime = ins[max(i for i, (k, _) in enumerate(ins) if k == "FROM") :]
    user = [v for k, v in runtime if k == "USER"]
    assert user and user[-1].split(":")[0] == "10001"
    assert json.loads(dict(runtime)["ENTRYPOINT"]) == ["spectrn"]
    assert "[sim]" in dict(runtime)["RUN"]  # uvloop for the simulator's write path


def test_default_command_parses_with_the_cli() -> None:
    import typer.main

    from spectrn.cli.main import _register, app

    _register()
    cmd = json.loads(dict(instructions())["CMD"])
    assert cmd[:2] == ["sim", "serve"]
    group = typer.main.get_command(app)
    ctx = group.make_context("spectrn", list(cmd), resilient_parsing=True)
    sim = group.get_command(ctx, "sim")  # type: ignore[attr-defined]
    serve = sim.get_command(ctx, "serve")
    sctx = serve.make_context("serve", cmd[2:])
    assert sctx.params["host"] == "0.0.0.0" and sctx.params["port"] == 8000


def test_dockerignore_keeps_the_context_small() -> None:
    ignored = (ROOT / ".dockerignore").read_text().split()
    for entry in (".git", ".venv*", "tests", "results"):
        assert entry in ignored
