"""Step costs fitted to step durations: the simulator's roofline by robust least squares (pure; numpy).

Each usable step (``spectrn.twin.steps``) gives one equation. With ``b`` sequences decoded, ``C`` their context
tokens, ``k`` draft passes and ``t`` positions verified per sequence (``spectrn.windows``; ``k = 0, t = 1``
without speculation), ``n`` prefills of ``P`` prompt tokens in the step:

    duration = decode * (k * (draft_run_s + draft_kv_read_per_token_s * C) + target)
             + prefill * (prefill_base_s + prefill_per_token_s * P)
    target   = weights_read_s + kv_read_per_seq_s * b + kv_read_per_token_s * C       memory bound
             | compute_per_token_s * b * t                                            compute bound

which is ``spectrn.sim.model``'s cost model (the draft taken as memory bound).

The client's clock sees each step end late by how long it took to read the event, so one step's duration
carries the difference of two such delays (a few milliseconds on a busy machine: tens of percent of a step).
Consecutive usable steps are therefore summed into segments (up to ``SEGMENT_STEPS``): a segment's duration
is the difference of two step ends, so the delays of the steps inside it cancel, and its equation is the sum
of its steps' equations. Given which steps are compute bound, the equations are linear in the eight
parameters. The compute slope is found by profiling: for each
candidate slope the regimes are assigned from the current fit and the rest is re-fitted (a few rounds); the
slope with the smallest residual wins (if it cuts the residual by ``MIN_GAIN`` at least, with at least
``MIN_COMPUTE_STEPS`` compute-bound steps and a positive weights term), and a last fit frees it. Fits are
Huber-weighted (iteratively reweighted least squares), so the rare step stretched by a stalled client or
server barely moves them; standard errors come from the weighted normal equations with the residual scale.
A term the fit wants negative is fixed at 0 (the data say it is absent) and the rest refitted.

A parameter the data cannot separate from the others (its column lies in the span of the rest: e.g. one
prompt length for the prefill slope, no speculative step for the draft terms) keeps its prior value and
says so. A compute slope without a single compute-bound step is not identified either: all steps being
memory bound only bounds it from above, and the prior (or that bound, whichever is smaller) is used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from spectrn.twin.steps import Step

PARAMS = (
    "weights_read_s",
    "kv_read_per_seq_s",
    "kv_read_per_token_s",
    "compute_per_token_s",
    "draft_run_s",
    "draft_kv_read_per_token_s",
    "prefill_base_s",
    "prefill_per_token_s",
)
# When a column is not separable from the others, the first of these that is still free goes back to its prior.
DROP_ORDER = (
    "prefill_per_token_s",
    "draft_kv_read_per_token_s",
    "kv_read_per_token_s",
    "kv_read_per_seq_s",
    "draft_run_s",
    "prefill_base_s",
    "weights_read_s",
)
SEGMENT_STEPS = 32  # consecutive decode steps of one batch size summed into one equation
MIN_COMPUTE_STEPS = 10  # fewer compute-bound steps than this do not identify the compute slope
MIN_GAIN = 0.05  # a compute regime must cut the residual sum of squares by this share to be believed
HUBER_K = 1.345


@dataclass(frozen=True)
class StepSet:
    """Steps of one server (one run, one variant) with the window the server ran."""

    run: str
    variant: str
    draft_runs: int  # draft passes per step (0: no speculation)
    verified: int  # positions the target verifies per sequence (1: no speculation)
    steps: Sequence[Step]


@dataclass
class ParamResult:
    value: float
    se: float | None
    status: Literal["fitted", "prior", "bound", "zero"]
    note: str | None = None
    points: int = 0


@dataclass
class CostFit:
    params: dict[str, ParamResult]
    covariance: list[list[float]]  # over ``free`` in that order
    free: list[str]
    residual_scale_s: float  # of a segment's duration
    observations: int  # steps
    segments: int
    compute_bound_steps: int
    fitted: Any  # numpy arrays per step: fitted and observed duration
    observed: Any
    segment_fitted: Any  # per segment
    segment_observed: Any
    rows: list[tuple[str, str, str, int, int, int, int]] = field(
        default_factory=list
    )  # run, variant, level, b, C, k, P


def _arrays(sets: Sequence[StepSet]) -> dict[str, Any]:
    """Per step columns, plus ``seg``: the segment each step belongs to (see the module docstring)."""
    import numpy as np

    cols: dict[str, list[float]] = {k: [] for k in ("b", "C", "k", "t", "dec", "pre", "P", "y")}
    rows: list[tuple[str, str, str, int, int, int, int]] = []
    seg: list[int] = []
    n_seg = -1
    for s in sets:
        prev: Step | None = None
        length = 0
        for st in s.steps:
            joins = prev is not None and st.index == prev.index + 1 and length < SEGMENT_STEPS
            if joins:
                length += 1
            else:
                n_seg += 1
                length = 1
            seg.append(n_seg)
            prev = st
            cols["b"].append(st.decode)
            cols["C"].append(st.context)
            cols["k"].append(s.draft_runs)
            cols["t"].append(s.verified)
            cols["dec"].append(1.0 if st.decode else 0.0)
            cols["pre"].append(1.0 if st.prefills else 0.0)
            cols["P"].append(st.prefill_tokens)
            cols["y"].append(st.duration)
            rows.append((s.run, s.variant, st.level, st.decode, st.context, s.draft_runs, st.prefill_tokens))
    out: dict[str, Any] = {k: np.asarray(v, dtype=float) for k, v in cols.items()}
    out["seg"] = np.asarray(seg, dtype=np.int64)
    out["rows"] = rows
    return out


def _design(a: Mapping[str, Any], compute: Any) -> Any:
    """Per-step design rows for the given compute-bound mask."""
    import numpy as np

    mem = a["dec"] * (1.0 - compute)
    return np.column_stack(
        [
            mem,
            mem * a["b"],
            mem * a["C"],
            a["dec"] * compute * a["b"] * a["t"],
            a["dec"] * a["k"],
            a["dec"] * a["k"] * a["C"],
            a["pre"],
            a["pre"] * a["P"],
        ]
    )


def _sum_segments(v: Any, starts: Any) -> Any:
    import numpy as np

    return np.add.reduceat(v, starts, axis=0)


def _wls(x: Any, y: Any, w: Any) -> Any:
    import numpy as np

    sw = np.sqrt(w)
    theta, *_ = np.linalg.lstsq(x * sw[:, None], y * sw, rcond=None)
    return theta


def _robust(x: Any, y: Any, rounds: int = 8) -> tuple[Any, Any]:
    """Huber IRLS: (theta, weights)."""
    import numpy as np

    w = np.ones_like(y)
    theta = _wls(x, y, w)
    for _ in range(rounds):
        r = y - x @ theta
        scale = 1.4826 * float(np.median(np.abs(r - np.median(r)))) or float(np.std(r)) or 1.0
        u = np.abs(r) / (HUBER_K * scale)
        w = 1.0 / np.maximum(u, 1.0)  # Huber: 1 within the threshold, 1 / u beyond
        theta = _wls(x, y, w)
    return theta, w


def _separable(x: Any, j: int, others: list[int]) -> bool:
    """Column ``j`` is not (numerically) a combination of ``others``."""
    import numpy as np

    col = x[:, j]
    if not np.any(col):
        return False
    if not others:
        return True
    base = x[:, others]
    coef, *_ = np.linalg.lstsq(base, col, rcond=None)
    resid = col - base @ coef
    return float(np.linalg.norm(resid)) > 1e-6 * float(np.linalg.norm(col))


def fit_costs(sets: Sequence[StepSet], prior: Mapping[str, float]) -> CostFit:
    """The eight step-cost parameters from the steps of every server (see the module docstring)."""
    import numpy as np

    from spectrn.errors import AnalysisError

    a = _arrays(sets)
    y_step = a["y"]
    n = y_step.size
    if n < 20:
        raise AnalysisError(
            f"only {n} usable engine steps in the runs: too few to fit step costs",
            hint="bench more requests (or longer outputs), or at a larger --time-scale so the client keeps up",
        )
    starts = np.flatnonzero(np.diff(a["seg"], prepend=-1))
    y = _sum_segments(y_step, starts)
    theta = np.asarray([float(prior[p]) for p in PARAMS])
    c_index = PARAMS.index("compute_per_token_s")
    notes: dict[str, str] = {}
    zeroed: set[int] = set()  # fixed at 0: the fit wanted them negative

    # Which parameters the data can separate (judged on the memory-bound design: compute is profiled apart).
    x0 = _sum_segments(_design(a, np.zeros(n)), starts)
    free = [i for i in range(len(PARAMS)) if i != c_index]
    for name in DROP_ORDER:
        j = PARAMS.index(name)
        if j in free and not _separable(x0, j, [i for i in free if i != j]):
            free.remove(j)
            notes[name] = "not separable in these runs (e.g. one prompt length, or no speculative step): prior kept"

    def fit(compute: Any, base: Any, unknown: list[int]) -> tuple[Any, Any, float]:
        x = _sum_segments(_design(a, compute), starts)
        fixed = [i for i in range(len(PARAMS)) if i not in unknown]
        out = base.copy()
        est, w = _robust(x[:, unknown], y - x[:, fixed] @ base[fixed])
        out[unknown] = est
        r = y - x @ out
        return out, w, float(np.sum(w * r * r))

    def nonnegative(compute: Any, base: Any, unknown: list[int]) -> tuple[Any, Any, float, list[int]]:
        """``fit``, with every term the fit wants negative fixed at 0 (a term the data say is absent)."""
        unknown = list(unknown)
        while True:
            out, w, ssr = fit(compute, base, unknown)
            negative = [j for j in unknown if out[j] < 0]
            if not negative:
                return out, w, ssr, unknown
            for j in negative:
                unknown.remove(j)
                zeroed.add(j)
                out[j] = 0.0
                notes[PARAMS[j]] = "the fit wanted a negative value: fixed at 0"
            base = out

    def memory(th: Any) -> Any:
        return th[0] + th[1] * a["b"] + th[2] * a["C"]

    dec = a["dec"] > 0
    none = np.zeros(n)
    theta0, w0, ssr0, free0 = nonnegative(none, theta, free)  # the compute column is 0 here
    ridge = memory(theta0)[dec] / (a["b"][dec] * a["t"][dec])
    best = (ssr0, none, theta0)
    for c in np.unique(np.quantile(ridge, np.linspace(0.0, 1.0, 121)) * 1.0001) if ridge.size else []:
        th = theta0.copy()
        th[c_index] = float(c)
        compute = (dec & (c * a["b"] * a["t"] > memory(th))).astype(float)
        for _ in range(4):
            th, _, ssr = fit(compute, th, free0)
            again = (dec & (c * a["b"] * a["t"] > memory(th))).astype(float)
            if (again == compute).all():
                break
            compute = again
        # a compute regime must explain the steps better by a clear margin, with a positive weights term
        if ssr < best[0] and ssr < (1 - MIN_GAIN) * ssr0 and th[0] > 0 and compute.sum() >= MIN_COMPUTE_STEPS:
            best = (ssr, compute, th)
    _, compute, theta_c = best
    n_compute = int(compute.sum())
    why = "no compute-bound step observed"
    if n_compute:
        theta, w, _, free = nonnegative(compute, theta_c, sorted([*free, c_index]))
        if c_index not in free:  # the compute slope came out negative: no compute regime after all
            n_compute = 0
            why = "a compute regime fitted a negative slope: discarded"
    if not n_compute:
        compute, theta, w, free = none, theta0.copy(), w0, free0
        bound = max(0.0, float(np.min(ridge))) if ridge.size else float("inf")
        c_prior = float(prior["compute_per_token_s"])
        theta[c_index] = min(c_prior, bound)
        notes["compute_per_token_s"] = f"{why}: the steps bound it at <= {bound:.3g} s; " + (
            "the prior is used (within the bound)" if c_prior <= bound else "the bound is used (the prior exceeds it)"
        )

    x_step = _design(a, compute)
    x = _sum_segments(x_step, starts)
    fitted = x @ theta
    r = y - fitted
    dof = max(1, y.size - len(free))
    sigma2 = float(np.sum(w * r * r)) / dof
    xf = x[:, free] * np.sqrt(w)[:, None]
    cov = sigma2 * np.linalg.pinv(xf.T @ xf)

    params: dict[str, ParamResult] = {}
    for j, name in enumerate(PARAMS):
        points = int(np.count_nonzero(x_step[:, j]))
        if j in free:
            k = free.index(j)
            params[name] = ParamResult(float(theta[j]), float(np.sqrt(max(cov[k, k], 0.0))), "fitted", None, points)
        elif name == "compute_per_token_s":  # not fitted: every step is taken as memory bound
            status: Literal["prior", "bound"] = "prior" if theta[j] == float(prior[name]) else "bound"
            params[name] = ParamResult(float(theta[j]), None, status, notes[name])
        elif j in zeroed:
            params[name] = ParamResult(0.0, None, "zero", notes[name], points)
        else:
            params[name] = ParamResult(float(theta[j]), None, "prior", notes[name], points)
    return CostFit(
        params=params,
        covariance=[[float(v) for v in row] for row in cov],
        free=[PARAMS[j] for j in free],
        residual_scale_s=float(np.sqrt(sigma2)),
        observations=n,
        segments=int(y.size),
        compute_bound_steps=n_compute,
        fitted=x_step @ theta,
        observed=y_step,
        segment_fitted=fitted,
        segment_observed=y,
        rows=a["rows"],
    )
