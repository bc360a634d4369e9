"""Self-consistency through real HTTP: the twin calibrated from a run, served by the simulator and benched the
same way, measures what the original run measured (TPOT and acceptance per prompt class)."""

from __future__ import annotations

import pytest

from spectrn.run.folder import RunFolder

from .conftest import CAL_LEVELS, CAL_REQUESTS, CAL_WINDOW, Hidden, bench, sim_pair

pytestmark = pytest.mark.slow


def test_the_twin_served_and_benched_reproduces_the_run(hidden: Hidden) -> None:
    with sim_pair(hidden.twin_file, CAL_WINDOW, hidden.root / "logs") as urls:
        again = bench(urls, hidden.root / "runs", "twin-served", window=CAL_WINDOW, levels=CAL_LEVELS,
                      requests=CAL_REQUESTS)  # fmt: skip
    original = RunFolder.open(hidden.calibration_run).require_summary()
    twin = RunFolder.open(again).require_summary()
    tpot: dict[tuple[str, str], list[float]] = {}
    steps: dict[str, list[float]] = {}
    print("twin / original:")
    for lo, lt in zip(original.levels, twin.levels, strict=True):
        assert lo.label == lt.label
        for cls, co in sorted(lo.by_prompt_class.items()):
            ct = lt.by_prompt_class[cls]
            for variant in ("baseline", "speculative"):
                a, b = co.variants[variant].tpot_s.p50, ct.variants[variant].tpot_s.p50
                assert a is not None and b is not None
                tpot.setdefault((cls, variant), []).append(b / a - 1)
                print(f"  {lo.label} {cls} {variant} TPOT p50 {a * 1e3:.2f} -> {b * 1e3:.2f} ms ({b / a - 1:+.2%})")
            ao, at = co.variants["speculative"].acceptance, ct.variants["speculative"].acceptance
            assert ao is not None and at is not None and ao.stream is not None and at.stream is not None
            assert ao.mean_accepted_length is not None and at.mean_accepted_length is not None
            s = steps.setdefault(cls, [0.0, 0.0, 0.0, 0.0])
            s[0] += ao.mean_accepted_length * ao.stream.steps
            s[1] += ao.stream.steps
            s[2] += at.mean_accepted_length * at.stream.steps
            s[3] += at.stream.steps
            print(f"  {lo.label} {cls} tokens per step {ao.mean_accepted_length:.3f} -> {at.mean_accepted_length:.3f}")
    # per prompt class, over the run's load levels: TPOT within 3% on average, and no level beyond 5%
    for key, errors in tpot.items():
        assert abs(sum(errors) / len(errors)) < 0.03, (key, errors)
        assert max(abs(e) for e in errors) < 0.05, (key, errors)
    # acceptance per class (tokens per decode step, all levels) within 3%
    for cls, (so, no, st, nt) in steps.items():
        ratio = (st / nt) / (so / no)
        print(f"  {cls} mean accepted length ratio {ratio - 1:+.2%}")
        assert abs(ratio - 1) < 0.03, (cls, ratio)
