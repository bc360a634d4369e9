"""Acceptance per prompt class and per position, from the stream, with a decay curve to go beyond it (pure).

The summary of a run gives, per prompt class, the share ``P_i`` of decode steps that accepted more than ``i``
proposals (``StreamAcceptance.per_position``) over ``steps`` steps. Position ``i`` is reached in
``steps * P_(i-1)`` steps and accepted in ``steps * P_i`` of them, so counts pool across load levels and runs
(of any window) into the conditional acceptance ``a_i = accepted_i / reached_i``, with its binomial standard
error. That table is what a twin replays (``spectrn.sim.model.AcceptanceClass``): it reproduces the class's
mean accepted length at every window up to the measured one. Rarely reached positions are shrunk toward the
fitted curve below, ``(accepted + m * curve) / (reached + m)`` with ``m = SHRINK_TRIALS``: a position reached
in 3 steps says little, one reached in 3000 speaks for itself.

Beyond the measured positions, the simulator's curve ``a_i = min(cap, alpha_c * exp(-(i / tau) ** gamma))`` takes
over, with one ``alpha_c`` per class and a shared ``tau`` and ``gamma``, fitted by maximum likelihood (binomial)
over every class and position: a grid over (log tau, log gamma) with the best ``alpha_c`` per class at each point,
then polished from each of the grid's ``POLISH_STARTS`` lowest local minima (one per value: a flat area counts
once) to the likelihood's local maximum near it within the ranges (bounded Nelder-Mead, restarted until it stops
improving: no derivative, so the curve's kink at the cap does not mislead it), the best taken, so the grid's
resolution does not show in the answer, a sharp cutoff's narrow valley between grid points included, nor does a
plateau where the curve has decayed below the likelihood's floor and one polish stops short (docs/twin.md). Its
covariance
comes from the numerical Hessian of the negative log-likelihood in (alpha_c..., log tau, log gamma) at the polished
point; a class without a measured position keeps alpha 0, fixed (zero variance), so it leaves the others' decay
identified. When the polished fit lies within 0.05 of a range's end (in log) or its standard errors are wide (no
decay resolved in the measured positions), tau and gamma are not identified: the prior ones are kept, with each
class's alpha polished under them, and predictions beyond the measured window say that they extrapolate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TAU_RANGE = (0.3, 200.0)
MAX_SE_LOG_TAU = 0.3
MAX_SE_LOG_GAMMA = 0.5
SHRINK_TRIALS = 20.0  # a measured position counts against this many pseudo-steps of the fitted curve
GAMMA_RANGE = (0.3, 20.0)
POLISH_XTOL = 1e-9  # the polish's simplex ends smaller than this in every parameter (alpha, log tau, log gamma)
POLISH_FTOL = 1e-13  # ... and its vertices' negative log-likelihoods within this share of the value of each other
POLISH_STEP = 0.01  # each (re)start's simplex: this far from its point along every parameter
POLISH_RESTARTS = 50  # fresh simplices from the last result, while one still improves the likelihood
POLISH_STARTS = 4  # the grid's lowest local minima polished, the best result taken


@dataclass
class ClassCounts:
    """Pooled counts of one prompt class: reached and accepted per position, and where they come from."""

    name: str
    reached: list[float] = field(default_factory=list)
    accepted: list[float] = field(default_factory=list)
    steps: int = 0
    sources: list[str] = field(default_factory=list)

    def add(self, per_position: Sequence[float], steps: int, source: str) -> None:
        if steps <= 0 or not per_position:
            return
        extra = len(per_position) - len(self.reached)  # none (an empty list) when already long enough
        self.reached += [0.0] * extra
        self.accepted += [0.0] * extra
        before = 1.0
        for i, p in enumerate(per_position):
            self.reached[i] += steps * before
            self.accepted[i] += steps * p
            before = p
        self.steps += steps
        self.sources.append(f"{source} ({steps} steps)")

    def conditional(self) -> tuple[list[float], list[float]]:
        """(a_i, standard error) per position; positions never reached are left out."""
        probs: list[float] = []
        ses: list[float] = []
        for n, k in zip(self.reached, self.accepted, strict=True):
            if n < 1:
                break
            a = min(1.0, max(0.0, k / n))
            probs.append(a)
            ses.append((max(a * (1 - a), 0.25 / n) / n) ** 0.5)
        return probs, ses


@dataclass
class DecayFit:
    alphas: dict[str, float]
    tau: float
    gamma: float
    identified: bool
    covariance: list[list[float]]  # over [alpha_<class>..., log tau, log gamma]
    names: list[str]
    note: str | None = None


def _curve(alpha: Any, tau: Any, gamma: Any, positions: Any, cap: float) -> Any:
    import numpy as np

    return np.minimum(cap, alpha * np.exp(-((positions / tau) ** gamma)))


def _nll(p: Any, n: Any, k: Any) -> Any:
    import numpy as np

    p = np.clip(p, 1e-9, 1 - 1e-9)
    return -(k * np.log(p) + (n - k) * np.log1p(-p)).sum(axis=-1)


def fit_decay(classes: Sequence[ClassCounts], *, cap: float, prior_tau: float, prior_gamma: float) -> DecayFit:
    """Per-class alpha and the shared decay (tau, gamma) by maximum likelihood (see the module docstring)."""
    import numpy as np

    data = []
    for c in classes:
        n = np.asarray(c.reached, dtype=float)
        k = np.asarray(c.accepted, dtype=float)
        keep = n >= 1
        data.append((c.name, np.flatnonzero(keep).astype(float), n[keep], k[keep]))
    alphas_grid = np.linspace(0.001, 1.0, 400)

    def best_alphas(tau: float, gamma: float) -> tuple[float, list[float]]:
        total = 0.0
        chosen = []
        for _, pos, n, k in data:
            if pos.size == 0:
                chosen.append(0.0)
                continue
            f = np.exp(-((pos / tau) ** gamma))
            p = np.minimum(cap, alphas_grid[:, None] * f[None, :])
            ll = _nll(p, n[None, :], k[None, :])
            i = int(np.argmin(ll))
            lo, hi = alphas_grid[max(0, i - 1)], alphas_grid[min(alphas_grid.size - 1, i + 1)]
            fine = np.linspace(lo, hi, 81)
            pf = np.minimum(cap, fine[:, None] * f[None, :])
            llf = _nll(pf, n[None, :], k[None, :])
            j = int(np.argmin(llf))
            total += float(llf[j])
            chosen.append(float(fine[j]))
        return total, chosen

    log_tau = np.linspace(np.log(TAU_RANGE[0]), np.log(TAU_RANGE[1]), 48)
    log_gamma = np.linspace(np.log(GAMMA_RANGE[0]), np.log(GAMMA_RANGE[1]), 36)
    grid = np.asarray([[best_alphas(float(np.exp(lt)), float(np.exp(lg)))[0] for lg in log_gamma] for lt in log_tau])
    # the grid's local minima (none of its four neighbours lower), best first, one per value (the cells of a flat
    # area, where the curve is at the likelihood's floor or at the cap, share theirs): the polish's starting points
    padded = np.pad(grid, 1, constant_values=np.inf)
    lowest = (
        (grid <= padded[:-2, 1:-1])
        & (grid <= padded[2:, 1:-1])
        & (grid <= padded[1:-1, :-2])
        & (grid <= padded[1:-1, 2:])
    )
    minima: list[tuple[float, int, int]] = []
    for value, i, j in sorted(zip(grid[lowest], *np.nonzero(lowest), strict=True)):
        if len(minima) < POLISH_STARTS and (not minima or value != minima[-1][0]):
            minima.append((value, i, j))
    bounds_t = (float(np.log(TAU_RANGE[0])), float(np.log(TAU_RANGE[1])))
    bounds_g = (float(np.log(GAMMA_RANGE[0])), float(np.log(GAMMA_RANGE[1])))
    names = [f"alpha_{name}" for name, *_ in data] + ["log_tau", "log_gamma"]

    def grid_point(i: int, j: int) -> Any:
        """Grid point (i, j) with each class's best alpha there."""
        tau, gamma = float(np.exp(log_tau[i])), float(np.exp(log_gamma[j]))
        return np.asarray([*best_alphas(tau, gamma)[1], log_tau[i], log_gamma[j]])

    x0 = np.zeros(len(data) + 2)  # the fit: a class without measured positions keeps alpha 0

    def nll(x: Any) -> float:
        tau, gamma = float(np.exp(x[-2])), float(np.exp(x[-1]))
        total = 0.0
        for (_, pos, n, k), a in zip(data, x[:-2], strict=True):
            if pos.size:
                total += float(_nll(_curve(a, tau, gamma, pos, cap), n, k))
        return total

    # a class without measured positions has no likelihood: its alpha (0) is fixed, not estimated
    free = [i for i, (_, pos, *_) in enumerate(data) if pos.size] + [len(data), len(data) + 1]

    def nll_free(y: Any) -> float:
        x = x0.copy()
        x[free] = y
        return nll(x)

    # the grid's best local minima, each polished to the likelihood's maximum near it, the best taken: the grid's
    # resolution does not show, nor does a plateau where one polish stops short
    a_lo, a_hi = float(alphas_grid[0]), float(alphas_grid[-1])
    lower = np.asarray([a_lo] * (len(free) - 2) + [bounds_t[0], bounds_g[0]])
    upper = np.asarray([a_hi] * (len(free) - 2) + [bounds_t[1], bounds_g[1]])
    polished: list[tuple[float, int, Any]] = []
    for _, i, j in minima:
        y = _polish(nll_free, grid_point(i, j)[free], lower, upper)
        polished.append((nll_free(y), len(polished), y))
    x0[free] = min(polished, key=lambda r: r[:2])[2]
    alphas = [float(a) for a in x0[:-2]]
    lt, lg = float(x0[-2]), float(x0[-1])
    edge = (
        lt <= np.log(TAU_RANGE[0]) + 0.05
        or lt >= np.log(TAU_RANGE[1]) - 0.05
        or lg <= np.log(GAMMA_RANGE[0]) + 0.05
        or lg >= np.log(GAMMA_RANGE[1]) - 0.05
    )

    cov = np.zeros((x0.size, x0.size))
    cov[np.ix_(free, free)] = _inverse_hessian(nll_free, x0[free])
    covariance = [[float(v) for v in row] for row in cov]
    fit = DecayFit(
        alphas={name: float(a) for (name, *_), a in zip(data, alphas, strict=True)},
        tau=float(np.exp(lt)),
        gamma=float(np.exp(lg)),
        identified=not edge and _resolved(cov),
        covariance=covariance,
        names=names,
    )
    if not fit.identified:
        fit.note = (
            "no decay of acceptance with position is resolved in the measured positions: the prior decay "
            f"(tau {prior_tau:g}, gamma {prior_gamma:g}) is used beyond them"
        )
        fit.tau, fit.gamma = prior_tau, prior_gamma
        refit = []
        # alpha under the prior decay, for positions beyond the table, polished from the fine grid's best: a start
        # on a bound of alpha's range keeps the bounded simplex there (its reflections are clipped onto the bound)
        _, starts = best_alphas(prior_tau, prior_gamma)
        for (_, pos, n, k), start in zip(data, starts, strict=True):
            if pos.size == 0:
                refit.append(0.0)
                continue
            f = np.exp(-((pos / prior_tau) ** prior_gamma))

            def nll_alpha(a: Any, f: Any = f, n: Any = n, k: Any = k) -> float:
                return float(_nll(np.minimum(cap, a[0] * f), n, k))

            refit.append(float(_polish(nll_alpha, np.asarray([start]), np.asarray([a_lo]), np.asarray([a_hi]))[0]))
        fit.alphas = {name: a for (name, *_), a in zip(data, refit, strict=True)}
    return fit


def _polish(f: Any, x0: Any, lower: Any, upper: Any) -> Any:
    """A local minimum of ``f`` from ``x0`` within the box [lower, upper].

    Nelder-Mead (scipy's, bounded) needs no derivative, so the curve's kink at the cap does not mislead it; as a
    simplex can collapse before a minimum (or stop at a bound), each run is restarted from its result with a fresh
    simplex, until a restart no longer lowers ``f`` by more than the tolerance.
    """
    import numpy as np
    from scipy.optimize import minimize

    x = x0  # a float array within the box: the grid's best point, or an alpha of the fine alpha grid
    fx = f(x)
    for _ in range(POLISH_RESTARTS):
        step = np.where(x + POLISH_STEP <= upper, POLISH_STEP, -POLISH_STEP)  # into the box
        simplex = np.vstack([x, x + np.diag(step)])
        tol = POLISH_FTOL * max(1.0, abs(fx))
        res = minimize(
            f,
            x,
            method="Nelder-Mead",
            bounds=list(zip(lower, upper, strict=True)),
            options={"initial_simplex": simplex, "xatol": POLISH_XTOL, "fatol": tol, "maxfev": 4000 * x.size},
        )
        if not res.fun < fx:
            break
        improved = fx - res.fun > tol
        x, fx = res.x, float(res.fun)
        if not improved:
            break
    return x


def _resolved(cov: Any) -> bool:
    """The decay is resolved when tau and gamma are known to within about 35% and 65% (one standard error)."""
    import numpy as np

    if not np.all(np.isfinite(cov)):
        return False
    return bool(np.sqrt(cov[-2, -2]) < MAX_SE_LOG_TAU and np.sqrt(cov[-1, -1]) < MAX_SE_LOG_GAMMA)


def _inverse_hessian(f: Any, x0: Any) -> Any:
    """Inverse of the numerical Hessian of ``f`` at its minimum ``x0`` (the covariance of the estimates)."""
    import numpy as np

    m = x0.size
    h = np.maximum(1e-4, 1e-3 * np.abs(x0))
    hess = np.zeros((m, m))
    f0 = f(x0)
    for i in range(m):
        for j in range(i, m):
            ei = np.zeros(m)
            ej = np.zeros(m)
            ei[i] = h[i]
            ej[j] = h[j]
            if i == j:
                v = (f(x0 + ei) - 2 * f0 + f(x0 - ei)) / (h[i] ** 2)
            else:
                v = (f(x0 + ei + ej) - f(x0 + ei - ej) - f(x0 - ei + ej) + f(x0 - ei - ej)) / (4 * h[i] * h[j])
            hess[i, j] = hess[j, i] = v
    eig = np.linalg.eigvalsh(hess)
    if not np.all(np.isfinite(eig)) or eig.min() <= 1e-9 * max(eig.max(), 1e-300):
        return np.full((m, m), np.nan)  # a flat direction: some parameter is not determined by the counts
    return np.linalg.inv(hess)


def fallback_alphas(
    alphas: Mapping[str, float], predictability: Mapping[str, float], weights: Mapping[str, float]
) -> tuple[float, float] | None:
    """``alpha_open`` and ``alpha_structured`` of the predictability rule (``alpha = open + (structured - open) * p``)
    that best match the classes' alphas at their mean predictability; None without two distinct predictabilities."""
    import numpy as np

    names = [c for c in alphas if c in predictability]
    p = np.asarray([predictability[c] for c in names])
    if len(names) < 2 or float(np.ptp(p)) < 0.05:
        return None
    y = np.asarray([alphas[c] for c in names])
    w = np.sqrt(np.asarray([max(weights.get(c, 1.0), 1e-6) for c in names]))
    x = np.column_stack([1.0 - p, p])
    coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
    a_open, a_struct = (float(min(1.0, max(0.0, v))) for v in coef)
    return a_open, a_struct


def shrunk(counts: ClassCounts, alpha: float, tau: float, gamma: float, cap: float) -> list[float]:
    """The class's table to replay: measured counts shrunk toward the fitted curve (see the module docstring)."""
    import numpy as np

    probs, _ = counts.conditional()
    out = []
    for i in range(len(probs)):
        curve = float(_curve(alpha, tau, gamma, np.asarray(float(i)), cap))
        out.append((counts.accepted[i] + SHRINK_TRIALS * curve) / (counts.reached[i] + SHRINK_TRIALS))
    return out
