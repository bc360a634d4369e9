"""Mutation testing of the modules whose numbers users read (``make mutation``; docs/mutation.md).

Each target is one module (or a few functions of it) and the focused tests that own it. Per target, mutmut
(PyPI) works in its own scratch folder ``build/mutation/<target>/`` (symlinks to src/, tests/, manifests/,
prompts/, docs/ and a generated ``setup.cfg``), so every module runs against its own tests only, one module at a time.

mutmut does not mutate decorated functions (properties, ``@contextmanager``) nor test helpers, and its
operators never drop an operand (``c - prev`` becomes ``c + prev``, never ``c``). The ``MANUAL`` mutants
cover those: each is one textual change to one file, applied to a scratch copy, run against the target's
tests; a kill names the tests that failed.

A run fails (exit 1) when a mutant survives that docs/mutation.md does not list as equivalent, or a listed
equivalent is killed by a test or gone (the list is stale), or a manual mutant survives. A listed equivalent
that times out is accepted (slower is not wrong).

    python hack/mutation.py                 # every target
    python hack/mutation.py metrics stats   # some targets
    python hack/mutation.py --list          # the targets and their tests
    python hack/mutation.py --fresh ...     # forget mutmut's cached results first
    python hack/mutation.py manual --manual-id 'deploy-*'   # only these hand-made mutants
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mutation_wide import WIDE_MANUAL, WIDE_TARGETS  # hack/ is on sys.path when this file runs as a script

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "mutation"
DOC = ROOT / "docs" / "mutation.md"
PY = sys.executable
SEP = "ǁ"  # mutmut's separator in the keys of methods: module.xǁClassǁmethod__mutmut_N

TIMEOUTS = {36, -24, 24, 152, 255}  # mutmut.stats: its CPU budget exceeded (SIGXCPU)
KILLED = {1, 3} | TIMEOUTS  # test failure, pytest internal error, timeouts


@dataclass(frozen=True)
class Target:
    name: str
    module: str  # dotted, under src/
    functions: tuple[str, ...]  # mutmut key patterns after the module ("x_name", "xǁClassǁmethod"); () = all
    tests: tuple[str, ...]

    @property
    def file(self) -> str:
        return "src/" + self.module.replace(".", "/") + ".py"

    def patterns(self) -> list[str]:
        if not self.functions:
            return [f"{self.module}.*__mutmut_*"]
        return [f"{self.module}.{f}__mutmut_*" for f in self.functions]


def _m(cls: str, name: str) -> str:
    return f"x{SEP}{cls}{SEP}{name}"


TARGETS: tuple[Target, ...] = (
    Target(
        "metrics",
        "spectrn.analyze.metrics",
        (),
        ("tests/analyze/test_summary.py", "tests/analyze/test_metrics_oracle.py"),
    ),
    Target("stats", "spectrn.analyze.stats", (), ("tests/analyze/test_summary.py", "tests/analyze/test_stats.py")),
    Target(
        "acceptance",
        "spectrn.analyze.acceptance",
        (),
        ("tests/analyze/test_acceptance.py",),
    ),
    # what analyze/summary.py once held, one target per module it was split into
    Target(
        "speedups",
        "spectrn.analyze.speedups",
        ("x_speedups", "x__aggregate_speedup", "x__itl_speedup"),
        (
            "tests/analyze/test_summary.py",
            "tests/analyze/test_findings.py",
            "tests/analyze/test_throughput_intervals.py",
        ),
    ),
    Target(
        "headline",
        "spectrn.analyze.headline",
        ("x_mix_speedup", "x__headline"),
        ("tests/analyze/test_summary.py", "tests/analyze/test_findings.py"),
    ),
    Target(
        "findings",
        "spectrn.analyze.findings",
        ("x__level_findings", "x__verdict"),
        ("tests/analyze/test_summary.py", "tests/analyze/test_findings.py"),
    ),
    Target(
        "cost",
        "spectrn.analyze.variant",
        ("x_usd_per_million",),
        ("tests/analyze/test_summary.py", "tests/analyze/test_findings.py"),
    ),
    Target(
        "client",
        "spectrn.loadgen.stream",
        (_m("StreamParser", "chunk_tokens"), "x__apportion"),
        ("tests/loadgen/test_client.py", "tests/loadgen/test_token_counting.py"),
    ),
    Target(
        "counters",
        "spectrn.loadgen.metrics",
        ("x_acceptance_delta", "x__bad", _m("MetricsSnapshot", "total"), _m("MetricsSnapshot", "by_label")),
        ("tests/loadgen/test_metrics.py",),
    ),
    Target("predict", "spectrn.sweep.predict", (), ("tests/sweep/test_sweep_predict.py",)),
    Target(
        "datums",
        "spectrn.publish.datums",
        ("x_batch_datums", "x_round_sig", "xǁRoundedCountsǁadd", "xǁRoundedCountsǁ_fold", "xǁRoundedCountsǁseries"),
        ("tests/publish/test_datums.py",),
    ),
    Target("limits", "spectrn.publish.limits", (), ("tests/publish/test_datums.py", "tests/publish/test_limits.py")),
    Target("errors", "spectrn.errors", ("x_redact", "x_redact_url"), ("tests/loadgen/test_names_redaction.py",)),
)

# the modules beyond the numeric core (deploy, kube client, publish, report, sweep, twin, collect, simulator,
# load generator, llmperf files, run folder): hack/mutation_wide.py
TARGETS += tuple(Target(*row) for row in WIDE_TARGETS)

PYTEST_ARGS = ("-p", "no:cacheprovider", "-q", "-m", "not slow and not vllm and not kind")
PYTEST_ARGS_SLOW = ("-p", "no:cacheprovider", "-q", "-m", "not vllm and not kind")


@dataclass(frozen=True)
class Manual:
    """One hand-made mutant: ``old`` (exactly once in ``file``) becomes ``new``."""

    id: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str
    slow: bool = False  # its tests are marked slow (a fixture with servers, many fits): run them anyway


MANUAL: tuple[Manual, ...] = (
    # the three bugs that once survived the whole suite
    Manual(
        "usage-cumulative-not-difference",
        "src/spectrn/loadgen/stream.py",
        "counts.append(c - prev)",
        "counts.append(c)",
        ("tests/loadgen/test_client.py", "tests/loadgen/test_token_counting.py"),
        "tokens per chunk from cumulative usage: the cumulative value instead of its per-chunk difference",
    ),
    Manual(
        "per-position-before-not-subtracted",
        "src/spectrn/loadgen/metrics.py",
        "(per_pos_after[p] - per_pos_before.get(p, 0.0)) / drafts",
        "per_pos_after[p] / drafts",
        ("tests/loadgen/test_metrics.py",),
        "per-position acceptance: the 'before' snapshot is not subtracted",
    ),
    Manual(
        "tpot-divided-by-n",
        "src/spectrn/analyze/metrics.py",
        "tpot=(e2e - ttft) / (n - 1) if n > 1 else None",
        "tpot=(e2e - ttft) / n if n > 1 else None",
        ("tests/analyze/test_summary.py", "tests/analyze/test_metrics_oracle.py", "tests/loadgen/test_client.py"),
        "TPOT divided by n instead of n - 1",
    ),
    # decorated functions mutmut skips
    Manual(
        "itls-one-sample-per-event",
        "src/spectrn/analyze/metrics.py",
        "out.extend([g / k] * k)",
        "out.append(g / k)",
        ("tests/analyze/test_summary.py", "tests/analyze/test_metrics_oracle.py"),
        "per-token ITL: one sample per event instead of one per token",
    ),
    Manual(
        "itls-gap-not-divided",
        "src/spectrn/analyze/metrics.py",
        "out.extend([g / k] * k)",
        "out.extend([g] * k)",
        ("tests/analyze/test_summary.py", "tests/analyze/test_metrics_oracle.py"),
        "per-token ITL: the event gap not divided by its tokens",
    ),
    Manual(
        "itl-values-unweighted",
        "src/spectrn/analyze/metrics.py",
        "pairs = [(g / k, k) for g, k",
        "pairs = [(g / k, 1) for g, k",
        ("tests/analyze/test_summary.py", "tests/analyze/test_metrics_oracle.py"),
        "per-token ITL weights: every event weighted 1 instead of by its tokens",
    ),
    Manual(
        "itl-values-keep-empty-events",
        "src/spectrn/analyze/metrics.py",
        "pairs = [(g / k, k) for g, k in zip(self.gaps, self.gap_tokens, strict=True) if k > 0]",
        "pairs = [(g / max(k, 1), k) for g, k in zip(self.gaps, self.gap_tokens, strict=True)]",
        ("tests/analyze/test_metrics_oracle.py",),
        "per-token ITL: an event without tokens kept as a sample",
    ),
    Manual(
        "tokens-per-chunk-inverted",
        "src/spectrn/analyze/metrics.py",
        "return self.decode_tokens / self.decode_chunks if self.decode_chunks else None",
        "return self.decode_chunks / self.decode_tokens if self.decode_chunks else None",
        ("tests/analyze/test_summary.py", "tests/analyze/test_metrics_oracle.py"),
        "tokens per decode chunk inverted",
    ),
    Manual(
        "chunk-latencies-dropped",
        "src/spectrn/analyze/metrics.py",
        "return list(self.gaps)",
        "return list(self.gaps[1:])",
        ("tests/analyze/test_summary.py",),
        "chunk latencies lose the first gap",
    ),
    Manual(
        "parser-fatal-malformed",
        "src/spectrn/loadgen/stream.py",
        'return self.error is not None and self.error != "malformed_sse"',
        "return self.error is not None",
        ("tests/loadgen/test_client.py", "tests/loadgen/test_hostile.py"),
        "a malformed event ends the request at once (it must only be recorded)",
    ),
    Manual(
        "wall-clock-invented-nanosecond",
        "src/spectrn/analyze/accumulator.py",
        "return max(self.last_end - self.first_send, 0.0) if self.completed else 0.0",
        "return max(self.last_end - self.first_send, 1e-9) if self.completed else 0.0",
        ("tests/analyze/test_summary.py", "tests/analyze/test_findings.py"),
        "a variant without measurable wall time divides its tokens by 1 ns (a bug this suite once missed)",
    ),
    Manual(
        "step-cost-from-tpot",
        "src/spectrn/sweep/predict.py",
        "return self.tpot_s * self.length",
        "return self.tpot_s",
        ("tests/sweep/test_sweep_predict.py",),
        "a step's cost is TPOT x tokens per step, not TPOT",
    ),
    Manual(
        "draft-to-target-ignores-baseline",
        "src/spectrn/sweep/predict.py",
        "base = self.target_s if self.target_s else self.intercept_s",
        "base = self.intercept_s",
        ("tests/sweep/test_sweep_predict.py",),
        "draft/target cost ratio ignores the measured baseline step",
    ),
    Manual(
        "max-residual-on-exact-fit",
        "src/spectrn/sweep/predict.py",
        "return max(rel) if rel and not self.exact else None",
        "return max(rel) if rel else None",
        ("tests/sweep/test_sweep_predict.py",),
        "an exact two-point fit reports a residual",
    ),
    # the run-folder lock (a @contextmanager)
    Manual(
        "lock-shared",
        "src/spectrn/paths.py",
        "fcntl.LOCK_EX | fcntl.LOCK_NB",
        "fcntl.LOCK_SH | fcntl.LOCK_NB",
        ("tests/run/test_folder_lock.py",),
        "the run-folder lock is shared, not exclusive",
    ),
    Manual(
        "lock-blocking",
        "src/spectrn/paths.py",
        "fcntl.LOCK_EX | fcntl.LOCK_NB",
        "fcntl.LOCK_EX",
        ("tests/run/test_folder_lock.py",),
        "the run-folder lock waits instead of failing at once (the test bounds the wait)",
    ),
    Manual(
        "lock-busy-swallowed",
        "src/spectrn/paths.py",
        "raise busy() from None",
        "pass",
        ("tests/run/test_folder_lock.py",),
        "a busy folder is entered anyway",
    ),
    Manual(
        "lock-never-released",
        "src/spectrn/paths.py",
        "os.close(fd)  # closing releases the lock",
        "pass",
        ("tests/run/test_folder_lock.py",),
        "the lock (and its descriptor) outlives the block",
    ),
    # the render invariant: the structural diff of the two Deployments (tests/render)
    Manual(
        "diff-prefix-hole",
        "tests/render/test_render_objects.py",
        'p == a or p.startswith((f"{a}.", f"{a}["))',
        "p.startswith(a)",
        ("tests/render/test_render_objects.py::test_structural_diff_catches_another_namespace",),
        "an allowed path lets every path with the same prefix through (metadata.name -> metadata.namespace)",
    ),
    Manual(
        "diff-missing-key-ignored",
        "tests/render/test_render_objects.py",
        "            if key not in a or key not in b:\n                out.append(sub)",
        "            if key not in a or key not in b:\n                pass",
        ("tests/render/test_render_objects.py::test_structural_diff_catches_another_namespace",),
        "a key present on one side only is not a difference",
    ),
    Manual(
        "diff-lists-unequal-length",
        "tests/render/test_render_objects.py",
        "return [] if a == b else [path]",
        "return []",
        ("tests/render/test_render_objects.py::test_structural_diff_catches_a_resource_difference",),
        "leaves never differ",
    ),
)
MANUAL += tuple(Manual(*row) for row in WIDE_MANUAL)  # the templates (hack/mutation_wide.py)


# ---- mutmut targets -------------------------------------------------------------------------------


def _setup(target: Target, fresh: bool) -> Path:
    work = WORK / target.name
    if fresh and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    # docs/: tests that check what the docs list; security/: checkov's allowlist, read by the security tests
    for name in ("src", "tests", "manifests", "prompts", "docs", "security"):
        link = work / name
        if not link.exists():
            link.symlink_to(ROOT / name)
    shutil.copy2(ROOT / "pyproject.toml", work / "pyproject.toml")
    shutil.copy2(ROOT / "README.md", work / "README.md")  # the config tests render the README's quickstart
    lines = [
        "[mutmut]",
        "source_paths=src/spectrn",
        f"only_mutate=*{target.file.removeprefix('src/')}",
        "also_copy=\n    manifests\n    prompts\n    docs\n    security\n    README.md",
        "pytest_add_cli_args_test_selection=\n" + "".join(f"    {t}\n" for t in target.tests),
        "pytest_add_cli_args=\n" + "".join(f"    {a}\n" for a in PYTEST_ARGS),
        "timeout_multiplier=5.0",
    ]
    (work / "setup.cfg").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return work


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # mutmut puts its mutated copy of src/ first on sys.path
    return env


def run_target(target: Target, fresh: bool, log: Path) -> dict[str, int]:
    """mutmut over ``target``; returns {mutant key: exit code} of the selected functions."""
    work = _setup(target, fresh)
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.run(
            [PY, "-m", "mutmut", "run", "--max-children", "2", *target.patterns()],
            cwd=work,
            env=_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    meta = work / "mutants" / (target.file + ".meta")
    if proc.returncode != 0 or not meta.exists():
        raise SystemExit(f"mutmut failed on {target.name} (exit {proc.returncode}); see {log}")
    codes: dict[str, int] = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
    codes = {k: v for k, v in codes.items() if any(fnmatch.fnmatch(k, p) for p in target.patterns())}
    # a test process that died of a signal (SIGSEGV: -11) neither passed nor failed: mutmut forks a worker per
    # mutant, and a fork of a process holding threads can crash whatever the mutant; run those once more, alone
    crashed = sorted(k for k, v in codes.items() if v < 0 and v not in TIMEOUTS)
    if crashed:
        with log.open("a", encoding="utf-8") as out:
            subprocess.run(
                [PY, "-m", "mutmut", "run", "--max-children", "1", *crashed],
                cwd=work, env=_env(), stdout=out, stderr=subprocess.STDOUT, check=False,
            )  # fmt: skip
        again: dict[str, int] = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        codes.update({k: again[k] for k in crashed if k in again})
    return codes


def show(target: Target, key: str) -> str:
    proc = subprocess.run(
        [PY, "-m", "mutmut", "show", key],
        cwd=WORK / target.name,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    return "\n".join(
        line for line in proc.stdout.splitlines() if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    )


def documented_equivalents() -> set[str]:
    """Mutant keys docs/mutation.md lists as equivalent (a backticked key on a line of its equivalents table)."""
    if not DOC.exists():
        return set()
    return set(re.findall(r"`(spectrn\.[\w.ǁ]+__mutmut_\d+)`", DOC.read_text(encoding="utf-8")))


# ---- manual mutants ---------------------------------------------------------------------------------


def run_manual(m: Manual) -> tuple[bool, list[str]]:
    """Apply one manual mutant to a scratch copy of src/ and tests/; (killed, the tests that failed)."""
    work = WORK / "manual"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    # manifests/ is copied, not linked: a template mutant must never write through to the checkout's templates
    for name in ("src", "tests", "manifests"):
        shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__", "fixtures"))
    (work / "tests" / "loadgen" / "fixtures").symlink_to(ROOT / "tests" / "loadgen" / "fixtures")
    (work / "tests" / "fixtures").symlink_to(ROOT / "tests" / "fixtures")
    for name in ("prompts", "pyproject.toml"):
        (work / name).symlink_to(ROOT / name)
    path = work / m.file
    text = path.read_text(encoding="utf-8")
    if text.count(m.old) != 1:
        raise SystemExit(f"manual mutant {m.id}: {m.old!r} occurs {text.count(m.old)} times in {m.file}")
    path.write_text(text.replace(m.old, m.new), encoding="utf-8")
    env = {**_env(), "PYTHONPATH": str(work / "src")}
    proc = subprocess.run(
        [PY, "-m", "pytest", *(PYTEST_ARGS_SLOW if m.slow else PYTEST_ARGS), "-rf", "--no-header", *m.tests],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    # a parametrized id may hold spaces: the name runs to pytest's " - " before the message, or the line's end
    failed = sorted(set(re.findall(r"^FAILED (.+?)(?: - |$)", proc.stdout, re.M)))
    return proc.returncode == 1 and bool(failed), failed


# ---- main -------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("targets", nargs="*", help="target names (default: all), or 'manual'")
    ap.add_argument("--fresh", action="store_true", help="forget mutmut's cached results")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--no-manual", action="store_true", help="skip the manual mutants")
    ap.add_argument("--manual-id", metavar="GLOB", help="run only the manual mutants whose id matches (fnmatch)")
    a = ap.parse_args(argv)
    if a.list:
        for t in TARGETS:
            print(f"{t.name:15} {t.module:28} {', '.join(t.functions) or '(all)'}\n{'':15} {' '.join(t.tests)}")
        print(f"{'manual':15} {len(MANUAL)} hand-made mutants")
        return 0
    known = {t.name for t in TARGETS} | {"manual"}
    unknown = set(a.targets) - known
    if unknown:
        print(f"unknown target(s) {sorted(unknown)}; known: {sorted(known)}", file=sys.stderr)
        return 2
    chosen = [t for t in TARGETS if not a.targets or t.name in a.targets]
    WORK.mkdir(parents=True, exist_ok=True)
    equivalents = documented_equivalents()
    problems: list[str] = []
    rows: list[str] = []
    report: list[str] = []
    t_all = time.monotonic()
    for t in chosen:
        t0 = time.monotonic()
        codes = run_target(t, a.fresh, WORK / f"{t.name}.log")
        killed = sorted(k for k, v in codes.items() if v in KILLED)
        survived = sorted(k for k, v in codes.items() if v not in KILLED)
        mine = {k for k in equivalents if any(fnmatch.fnmatch(k, p) for p in t.patterns())}
        unexplained = [k for k in survived if k not in mine]
        # a listed equivalent that only ran out of CPU is not stale: a mutant equal in value but slower (the
        # bootstrap without its vectorized flag) exceeds mutmut's budget on one run and not on the next
        stale = sorted(k for k in mine - set(survived) if codes.get(k) not in TIMEOUTS)
        took = time.monotonic() - t0
        rows.append(
            f"| {t.name} | `{t.module}` | {len(killed)} / {len(codes)} | {len(survived) - len(unexplained)} "
            f"| {len(unexplained)} | {took:.0f} s |"
        )
        print(rows[-1], flush=True)
        for k in unexplained:
            problems.append(f"{t.name}: {k} survived and is not listed as equivalent")
            report.append(f"### {k} (survived, exit {codes[k]})\n```diff\n{show(t, k)}\n```")
        for k in stale:
            problems.append(
                f"{t.name}: {k} is listed as equivalent but was {'killed' if k in codes else 'not generated'}"
            )
    manual_rows: list[str] = []
    if not a.no_manual and (not a.targets or "manual" in a.targets):
        for m in MANUAL:
            if a.manual_id is not None and not fnmatch.fnmatch(m.id, a.manual_id):
                continue
            killed_m, failed = run_manual(m)
            shown = ", ".join(f"`{f}`" for f in failed[:6]) + (f" (+{len(failed) - 6})" if len(failed) > 6 else "")
            manual_rows.append(f"| `{m.id}` | {m.why} | {'killed' if killed_m else '**SURVIVED**'} | {shown} |")
            print(manual_rows[-1], flush=True)
            if not killed_m:
                problems.append(f"manual mutant {m.id} survived")
        shutil.rmtree(WORK / "manual", ignore_errors=True)
    out = WORK / "report.md"
    text = [
        "| target | module | killed / total | equivalent | unexplained | time |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    text += rows
    if manual_rows:
        text += ["", "| manual mutant | change | result | killed by |", "| --- | --- | --- | --- |", *manual_rows]
    text += ["", *report]
    out.write_text("\n".join(text) + "\n", encoding="utf-8")
    print(f"\nreport: {out.relative_to(ROOT)}; {time.monotonic() - t_all:.0f} s in all")
    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
