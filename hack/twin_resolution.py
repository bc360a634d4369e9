"""Measure what the twin fits' last mutmut survivors change in the published values (docs/mutation.md).

Each mutant (its key in mutmut's numbering of ``fit_decay`` or ``fit_costs`` at the time of writing, and its
change: a line, or two for ``total = 0.0``, which occurs twice; ``pN`` for ``x__polish__mutmut_N``, applied to the
``_polish`` that ``fit_decay`` calls) is applied to a copy of the module's source, and the mutated fit runs next to
the real one on a wide set of seeded designs:

- ``acceptance``: counts drawn binomially from random decay curves (1 to 3 classes, 2 to 12 positions, tau and
  gamma log-uniform over the whole grid), counts exactly on a curve, curves at each edge of ``TAU_RANGE`` and
  ``GAMMA_RANGE``, a class whose first positions are accepted above the cap, an empty class, and 30 sharp
  cutoffs (gamma 3 to 19) exactly on their curve;
- ``costs``: exact roofline steps from random costs (compute regimes included), the same with relative noise and
  stalled steps, terms whose true value is 0, servers without speculation, and a quarter of the designs
  without a prefill step.

It prints, per mutant, the largest change of every published value: alphas (absolute), log tau and log gamma
(absolute), as a share of the fit's own standard error, of the log-likelihood the fit reaches (nats), how many
printed values (``alpha {:.3f}``, ``tau {:.3g}``, ``gamma {:.3g}``) differ, and how many ``identified`` / notes
differ; for the costs, the largest relative change of a value or standard error and how many statuses, notes,
compute-bound counts differ.

    PYTHONPATH=src python hack/twin_resolution.py acceptance|costs|rooflines [--designs N] [--keys 27,64]

``rooflines`` checks the cost fit itself: exact roofline steps from random costs (the tests' ``random_roofline``),
with the compute-bound steps counted from the true costs, and whether every cost comes back.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import math
import random
import sys
from typing import Any

import numpy as np

DECAY: list[tuple[Any, ...]] = [  # (key, line, mutated line[, function]) in x_fit_decay (or that function)
    (24, "alphas_grid = np.linspace(0.001, 1.0, 400)", "alphas_grid = np.linspace(0.001, 1.0, )"),
    (27, "alphas_grid = np.linspace(0.001, 1.0, 400)", "alphas_grid = np.linspace(0.001, 1.0, 401)"),
    (29, "total = 0.0\n        chosen = []", "total = 1.0\n        chosen = []"),
    (47, "ll = _nll(p, n[None, :], k[None, :])", "ll = None"),
    (56, "i = int(np.argmin(ll))", "i = int(np.argmin(None))"),
    (62, "alphas_grid[max(0, i - 1)]", "alphas_grid[max(1, i - 1)]"),
    (64, "lo, hi = alphas_grid[max(0, i - 1)],", "lo, hi = alphas_grid[max(0, i - 2)],"),
    (70, "alphas_grid[min(alphas_grid.size - 1, i + 1)]", "alphas_grid[min(alphas_grid.size - 2, i + 1)]"),
    (72, "alphas_grid[min(alphas_grid.size - 1, i + 1)]", "alphas_grid[min(alphas_grid.size - 1, i + 2)]"),
    (79, "fine = np.linspace(lo, hi, 81)", "fine = np.linspace(lo, hi, )"),
    (80, "fine = np.linspace(lo, hi, 81)", "fine = np.linspace(lo, hi, 82)"),
    (108, "np.log(TAU_RANGE[1]), 48)", "np.log(TAU_RANGE[1]), )"),
    (113, "np.log(TAU_RANGE[1]), 48)", "np.log(TAU_RANGE[1]), 49)"),
    (120, "np.log(GAMMA_RANGE[1]), 36)", "np.log(GAMMA_RANGE[1]), )"),
    (125, "np.log(GAMMA_RANGE[1]), 36)", "np.log(GAMMA_RANGE[1]), 37)"),
    (
        146,
        "& (grid <= padded[1:-1, :-2])\n        & (grid <= padded[1:-1, 2:])",
        "& (grid <= padded[1:-1, :-2]) | (grid <= padded[1:-1, 2:])",
    ),
    (
        147,
        "& (grid <= padded[2:, 1:-1])\n        & (grid <= padded[1:-1, :-2])",
        "& (grid <= padded[2:, 1:-1]) | (grid <= padded[1:-1, :-2])",
    ),
    (
        148,
        "(grid <= padded[:-2, 1:-1])\n        & (grid <= padded[2:, 1:-1])",
        "(grid <= padded[:-2, 1:-1]) | (grid <= padded[2:, 1:-1])",
    ),
    (149, "(grid <= padded[:-2, 1:-1])", "(grid < padded[:-2, 1:-1])"),
    (155, "(grid <= padded[2:, 1:-1])", "(grid < padded[2:, 1:-1])"),
    (160, "(grid <= padded[1:-1, :-2])", "(grid < padded[1:-1, :-2])"),
    (166, "(grid <= padded[1:-1, 2:])", "(grid < padded[1:-1, 2:])"),
    (180, "if len(minima) < POLISH_STARTS and", "if len(minima) < POLISH_STARTS or"),
    (181, "if len(minima) < POLISH_STARTS and", "if len(minima) <= POLISH_STARTS and"),
    (187, "value != minima[-1][0]", "value != minima[-1][1]"),
    (234, "total = 0.0\n        for (_, pos", "total = 1.0\n        for (_, pos"),
    # in _polish (x__polish__mutmut_N), which fit_decay calls
    ("p12", "np.where(x + POLISH_STEP <= upper", "np.where(x - POLISH_STEP <= upper", "_polish"),
    ("p13", "np.where(x + POLISH_STEP <= upper", "np.where(x + POLISH_STEP < upper", "_polish"),
    ("p14", "POLISH_STEP, -POLISH_STEP)", "POLISH_STEP, +POLISH_STEP)", "_polish"),
    ("p15", "simplex = np.vstack([x, x + np.diag(step)])", "simplex = None", "_polish"),
    ("p17", "simplex = np.vstack([x, x + np.diag(step)])", "simplex = np.vstack([x, x - np.diag(step)])", "_polish"),
    ("p20", "tol = POLISH_FTOL * max(1.0, abs(fx))", "tol = POLISH_FTOL / max(1.0, abs(fx))", "_polish"),
    ("p25", "tol = POLISH_FTOL * max(1.0, abs(fx))", "tol = POLISH_FTOL * max(2.0, abs(fx))", "_polish"),
    ("p57", '"maxfev": 4000 * x.size', '"maxfev": 4000 / x.size', "_polish"),
    ("p58", '"maxfev": 4000 * x.size', '"maxfev": 4001 * x.size', "_polish"),
    ("p60", "if not res.fun < fx:", "if not res.fun <= fx:", "_polish"),
    ("p62", "improved = fx - res.fun > tol", "improved = None", "_polish"),
    ("p63", "improved = fx - res.fun > tol", "improved = fx + res.fun > tol", "_polish"),
    ("p64", "improved = fx - res.fun > tol", "improved = fx - res.fun >= tol", "_polish"),
    ("p67", "if not improved:", "if improved:", "_polish"),
]
COSTS = [  # (key, line, mutated line) in x_fit_costs
    (175, "(comp - mem >= -near)", "(comp - mem >= +near)"),
    (177, "(compute > 0)))", "(compute > 1)))"),
    (245, "if abs(ssr - best[0]) > tie:", "if abs(ssr + best[0]) > tie:"),
    (304, "compute[decoding[ridge <= edge]] = 1.0", "compute[decoding[ridge < edge]] = 1.0"),
    (313, "np.linspace(0.0, 1.0, 121)) * 1.0001)", "np.linspace(0.0, 1.0, 121)) / 1.0001)"),
    (323, "np.linspace(0.0, 1.0, 121)) * 1.0001)", "np.linspace(0.0, 1.0, )) * 1.0001)"),
    (326, "np.linspace(0.0, 1.0, 121)) * 1.0001)", "np.linspace(0.0, 1.0, 122)) * 1.0001)"),
    (351, "edges[max(0, at - REFINE) : at + REFINE]", "edges[max(1, at - REFINE) : at + REFINE]"),
    (360, "        if best[0] == ssr_b:", "        if best[0] != ssr_b:"),
]


def mutated(module: str, function: str, old: str, new: str, inner: str = "") -> Any:
    """The module's function with ``old`` (found exactly once in it) replaced by ``new``; with ``inner``, the
    change is made in that function, which ``function`` (unchanged) then calls."""
    mod = importlib.import_module(module)
    target = inner or function
    src = inspect.getsource(getattr(mod, target))
    if src.count(old) != 1:
        raise SystemExit(f"{target}: {old!r} found {src.count(old)} times")
    ns: dict[str, Any] = dict(vars(mod))
    exec(compile(src.replace(old, new), f"<{target} mutated>", "exec"), ns)  # noqa: S102
    if inner:
        exec(compile(inspect.getsource(getattr(mod, function)), f"<{function}>", "exec"), ns)  # noqa: S102
    return ns[function]


# ---- acceptance ----------------------------------------------------------------------------------------------

CAP = 0.98


def drawn(rng: np.random.Generator, name: str, alpha: float, tau: float, gamma: float, positions: int) -> Any:
    from spectrn.twin.acceptance import ClassCounts

    n = float(rng.integers(200, 20000))
    reached, accepted = [], []
    for i in range(positions):
        p = min(CAP, alpha * math.exp(-((i / tau) ** gamma)))
        k = float(rng.binomial(int(n), p))
        reached.append(n)
        accepted.append(k)
        if k < 1:
            break
        n = k
    return ClassCounts(name, reached=reached, accepted=accepted)


def exact(name: str, alpha: float, tau: float, gamma: float, positions: int) -> Any:
    from spectrn.twin.acceptance import ClassCounts

    a = [min(CAP, alpha * math.exp(-((i / tau) ** gamma))) for i in range(positions)]
    return ClassCounts(name, reached=[1e5] * positions, accepted=[1e5 * v for v in a])


def decay_designs(count: int, sharp: int = 30) -> list[list[Any]]:
    from spectrn.twin.acceptance import GAMMA_RANGE, TAU_RANGE, ClassCounts

    designs: list[list[Any]] = [
        [exact("a", 0.8, 5.0, 2.0, 8), exact("b", 0.6, 5.0, 2.0, 8)],
        [exact("a", 0.7, 4.5, 12.0, 8)],  # a sharp cutoff between coarse grid points
        [exact("a", 0.9, TAU_RANGE[0] * 1.02, 1.0, 4)],  # each edge of the grid
        [exact("a", 0.9, TAU_RANGE[1] * 0.98, 1.0, 10)],
        [exact("a", 0.9, 3.0, GAMMA_RANGE[0] * 1.02, 10)],
        [exact("a", 0.9, 3.0, GAMMA_RANGE[1] * 0.98, 8)],
        [exact("top", 0.999, 6.0, 3.0, 8)],  # alpha above the cap
        [ClassCounts("cap", reached=[5000.0, 4990.0, 4950.0, 4700.0], accepted=[4990.0, 4950.0, 4700.0, 3600.0])],
        [exact("a", 0.8, 5.0, 2.0, 8), ClassCounts("empty")],
        [ClassCounts("one", reached=[300.0], accepted=[200.0])],  # position 0 alone: not identified
    ]
    rng = np.random.default_rng(20261202)
    while len(designs) < count:
        lt = rng.uniform(math.log(0.5), math.log(150.0))
        lg = rng.uniform(math.log(0.4), math.log(15.0))
        classes = [
            drawn(rng, f"c{j}", float(rng.uniform(0.4, 0.97)), math.exp(lt), math.exp(lg), int(rng.integers(2, 13)))
            for j in range(int(rng.integers(1, 4)))
        ]
        if rng.random() < 0.2:
            classes.append(ClassCounts("empty"))
        designs.append(classes)
    rng = np.random.default_rng(7)
    for _ in range(sharp):  # sharp cutoffs: narrow valleys in (log tau, log gamma)
        tau, gamma = (
            math.exp(rng.uniform(math.log(0.5), math.log(60.0))),
            math.exp(rng.uniform(math.log(3), math.log(19))),
        )
        designs.append([exact("a", float(rng.uniform(0.5, 0.97)), tau, gamma, int(rng.integers(4, 12)))])
    return designs


def loglik(classes: list[Any], fit: Any) -> float:
    """The binomial log-likelihood of the counts under a fit's curve (alphas, tau, gamma), as the fit defines it."""
    total = 0.0
    for c in classes:
        n, k = np.asarray(c.reached, dtype=float), np.asarray(c.accepted, dtype=float)
        keep = n >= 1
        pos = np.flatnonzero(keep).astype(float)
        if pos.size:
            p = np.minimum(CAP, fit.alphas[c.name] * np.exp(-((pos / fit.tau) ** fit.gamma)))
            p = np.clip(p, 1e-9, 1 - 1e-9)
            total += float((k[keep] * np.log(p) + (n[keep] - k[keep]) * np.log1p(-p)).sum())
    return total


def run_decay(count: int, keys: set[str]) -> None:
    from spectrn.twin import acceptance

    designs = decay_designs(count)
    kw = {"cap": CAP, "prior_tau": 7.0, "prior_gamma": 4.0}
    base = [acceptance.fit_decay(d, **kw) for d in designs]
    print(f"{len(designs)} designs; identified by the real fit: {sum(f.identified for f in base)}")
    print("key  max|d alpha|  max|d log tau|  max|d log gamma|  max d/se  max|d ll|  printed  identified/note")
    for key, old, new, *inner in DECAY:
        if keys and str(key) not in keys:
            continue
        fit = mutated("spectrn.twin.acceptance", "fit_decay", old, new, *inner)
        da = dt = dg = rel = dll = 0.0
        printed = flags = 0
        for d, b in zip(designs, base, strict=True):
            m = fit(d, **kw)
            flags += (m.identified, m.note) != (b.identified, b.note)
            dt = max(dt, abs(math.log(m.tau / b.tau)))
            dg = max(dg, abs(math.log(m.gamma / b.gamma)))
            printed += f"{m.tau:.3g} {m.gamma:.3g}" != f"{b.tau:.3g} {b.gamma:.3g}"
            cov = np.asarray(b.covariance)
            for j, name in enumerate(b.alphas):
                diff = abs(m.alphas[name] - b.alphas[name])
                da = max(da, diff)
                printed += f"{m.alphas[name]:.3f}" != f"{b.alphas[name]:.3f}"
                if b.identified and cov[j, j] > 0:
                    rel = max(rel, diff / math.sqrt(cov[j, j]))
            dll = max(dll, abs(loglik(d, m) - loglik(d, b)))
            if b.identified and m.identified:
                rel = max(rel, abs(math.log(m.tau / b.tau)) / math.sqrt(cov[-2, -2]))
                rel = max(rel, abs(math.log(m.gamma / b.gamma)) / math.sqrt(cov[-1, -1]))
        print(
            f"{key!s:>3}  {da:11.2e}  {dt:13.2e}  {dg:15.2e}  {rel:8.2e}  {dll:9.2e}  {printed:7d}  {flags:d}",
            flush=True,
        )


# ---- costs ---------------------------------------------------------------------------------------------------


def cost_designs(count: int) -> list[tuple[list[Any], dict[str, float]]]:
    from spectrn.twin.costs import StepSet
    from spectrn.twin.steps import Step

    prior = {"weights_read_s": 0.05, "kv_read_per_seq_s": 2e-4, "kv_read_per_token_s": 1e-6,
             "compute_per_token_s": 1e-3, "draft_run_s": 0.002, "draft_kv_read_per_token_s": 1e-6,
             "prefill_base_s": 0.01, "prefill_per_token_s": 1e-4}  # fmt: skip
    out = []
    for seed in range(count):
        rng = random.Random(seed)
        zero = rng.random() < 0.3  # some true costs exactly 0
        w = 0.0 if zero and rng.random() < 0.5 else rng.uniform(0.001, 0.04)
        s = 0.0 if zero and rng.random() < 0.5 else rng.uniform(1e-5, 1e-3)
        kt = 0.0 if zero and rng.random() < 0.5 else rng.uniform(1e-7, 1e-5)
        c = rng.uniform(1e-4, 3e-3)
        noise = rng.choice([0.0, 0.0, 0.001, 0.05, 0.3])
        stall = rng.choice([0.0, 0.05])
        prefills = rng.random() < 0.75  # else no prefill step among the usable ones
        sets = []
        for k in rng.choice([(0,), (0, 5), (0, 3), (0, 2), (5,)]):
            steps = []
            idx = 0
            for j in range(rng.randint(25, 120)):
                idx += rng.choice([1, 1, 1, 2])
                b = rng.choice([1, 2, 4, 8, 16, 32])
                ctx = b * rng.randint(40, 300)
                if prefills and j % 8 == 0:
                    p = rng.randint(20, 300)
                    steps.append(Step("x", "c", 0, 0, 1, p, (0.04 + 0.001 * p) * (1 + rng.gauss(0, noise)), 0.0, idx))
                    continue
                d = k * (0.005 + 1e-7 * ctx) + max(w + s * b + kt * ctx, c * b * (k or 1))
                if rng.random() < stall:
                    d *= rng.uniform(1, 5)
                steps.append(Step("x", "c", b, ctx, 0, 0, d * (1 + rng.gauss(0, noise)), 0.0, idx))
            sets.append(StepSet("r", "v", k, k or 1, steps))
        out.append((sets, prior))
    return out


def run_costs(count: int) -> None:
    from spectrn.twin import costs

    designs = cost_designs(count)
    base = [costs.fit_costs(s, p) for s, p in designs]
    fitted = [r.value for f in base for r in f.params.values() if r.status == "fitted"]
    print(
        f"{len(designs)} designs; with a compute regime: {sum(f.compute_bound_steps > 0 for f in base)}; "
        f"fitted values exactly 0.0: {sum(v == 0.0 for v in fitted)} of {len(fitted)}, "
        f"smallest |value|: {min(abs(v) for v in fitted):.2e}"
    )
    print("key  max rel d value  max rel d se  status/note  compute steps  designs differing")
    for key, old, new in COSTS:
        fit = mutated("spectrn.twin.costs", "fit_costs", old, new)
        dv = dse = 0.0
        flags = regimes = differing = 0
        for (s, p), b in zip(designs, base, strict=True):
            m = fit(s, p)
            differs = m.compute_bound_steps != b.compute_bound_steps
            regimes += m.compute_bound_steps != b.compute_bound_steps
            for name, pb in b.params.items():
                pm = m.params[name]
                scale = max(abs(pb.value), 1e-300)
                dv = max(dv, abs(pm.value - pb.value) / scale)
                if (pm.se is None) != (pb.se is None):
                    flags += 1
                elif pm.se is not None and pb.se is not None:
                    dse = max(dse, abs(pm.se - pb.se) / max(pb.se, 1e-300))
                flags += (pm.status, pm.note, pm.points) != (pb.status, pb.note, pb.points)
                differs = differs or pm != pb
            differing += differs
        print(f"{key:>3}  {dv:15.2e}  {dse:12.2e}  {flags:11d}  {regimes:13d}  {differing:d}", flush=True)


def run_rooflines(count: int) -> None:
    """Exact roofline steps (``random_roofline`` of tests/twin/test_costs_mutants.py): do they come back?"""
    from spectrn.twin.costs import PARAMS, StepSet, fit_costs
    from spectrn.twin.steps import Step

    prior = {"weights_read_s": 0.05, "kv_read_per_seq_s": 2e-4, "kv_read_per_token_s": 1e-6,
             "compute_per_token_s": 1e-3, "draft_run_s": 0.002, "draft_kv_read_per_token_s": 1e-6,
             "prefill_base_s": 0.01, "prefill_per_token_s": 1e-4}  # fmt: skip
    tally = {"enough": 0, "enough back": 0, "few": 0, "few back": 0}
    for seed in range(count):
        rng = random.Random(seed)
        c = {"weights_read_s": rng.uniform(0.001, 0.04), "kv_read_per_seq_s": rng.uniform(1e-5, 1e-3),
             "kv_read_per_token_s": rng.uniform(1e-7, 1e-5), "compute_per_token_s": rng.uniform(1e-4, 3e-3),
             "draft_run_s": 0.005, "draft_kv_read_per_token_s": 1e-7, "prefill_base_s": 0.04,
             "prefill_per_token_s": 0.001}  # fmt: skip
        sets, bound = [], 0
        for k in rng.choice([(0, 5), (0, 3), (0, 2)]):
            steps = []
            for j in range(rng.randint(15, 50)):
                b = rng.choice([1, 2, 4, 8, 16, 32])
                ctx = b * rng.randint(40, 300)
                if j % 8 == 0:
                    p = rng.randint(20, 300)
                    steps.append(Step("v", "c4", 0, 0, 1, p, 0.04 + 0.001 * p, 0.0, 2 * j + 2))
                    continue
                mem = c["weights_read_s"] + c["kv_read_per_seq_s"] * b + c["kv_read_per_token_s"] * ctx
                comp = c["compute_per_token_s"] * b * (k or 1)
                bound += comp > mem
                d = k * (c["draft_run_s"] + c["draft_kv_read_per_token_s"] * ctx) + max(mem, comp)
                steps.append(Step("v", "c4", b, ctx, 0, 0, d, 0.0, 2 * j + 2))
            sets.append(StepSet("r", "v", k, k or 1, steps))
        fit = fit_costs(sets, prior)
        if bound >= 10:  # MIN_COMPUTE_STEPS: the fit should find them and every cost
            ok = fit.compute_bound_steps == bound and all(
                abs(fit.params[n].value - c[n]) <= 1e-7 * c[n] for n in PARAMS
            )
            tally["enough"] += 1
            tally["enough back"] += ok
        else:  # fewer compute-bound steps than MIN_COMPUTE_STEPS: no compute regime should be taken
            tally["few"] += 1
            tally["few back"] += fit.compute_bound_steps == 0
    print(
        f"{count} exact rooflines: {tally['enough']} with 10 or more compute-bound steps, "
        f"{tally['enough back']} of them fitted exactly; {tally['few']} with fewer, "
        f"{tally['few'] - tally['few back']} of them fitted with a compute regime all the same"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["acceptance", "costs", "rooflines"])
    parser.add_argument("--designs", type=int, default=0, help="how many wide designs (default 30 or 400)")
    parser.add_argument("--keys", default="", help="only these mutants (comma-separated keys)")
    args = parser.parse_args()
    if args.part == "acceptance":
        run_decay(args.designs or 30, {k for k in args.keys.split(",") if k})
    elif args.part == "costs":
        run_costs(args.designs or 400)
    else:
        run_rooflines(args.designs or 100)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
