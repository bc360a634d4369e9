"""The simulated Neuron vLLM server (``spectrn sim serve``): vLLM's OpenAI protocol, speculative timing.

Public API: ``SimSettings``, ``make_app``, ``run_in_thread`` (a server in a background thread with
``.base_url`` and ``.stop()``), ``serve`` (foreground, the container entrypoint) and the ground-truth
helpers ``expected_tpot``, ``acceptance_prob``, ``expected_tokens_per_step``, ``step_time`` and
``predictability``. The engine model is documented in ``spectrn.sim.model`` and ``spectrn.sim.engine``; which
real server it imitates on the wire (``neuron-fork``, ``vllm-neuron``, ``upstream``) in ``spectrn.sim.profiles``;
what a window means in ``spectrn.windows``; the overview with sources in docs/simulator.md.

aiohttp is imported only by ``make_app`` / ``run_in_thread`` / ``serve``, so importing this package is cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spectrn.sim.faults import FaultSettings
from spectrn.sim.model import PRESETS, Resolved, predictability
from spectrn.sim.profiles import profiles
from spectrn.sim.settings import SimSettings, load_settings

if TYPE_CHECKING:
    from aiohttp import web

    from spectrn.sim.server import SimHandle

__all__ = [
    "PRESETS",
    "profiles",
    "FaultSettings",
    "Resolved",
    "SimSettings",
    "acceptance_prob",
    "expected_tokens_per_step",
    "expected_tpot",
    "load_settings",
    "make_app",
    "predictability",
    "run_in_thread",
    "serve",
    "step_time",
]


def make_app(settings: SimSettings) -> web.Application:
    from spectrn.sim.server import make_app as _make_app

    return _make_app(settings)


def run_in_thread(settings: SimSettings, host: str = "127.0.0.1", port: int = 0) -> SimHandle:
    from spectrn.sim.server import run_in_thread as _run

    return _run(settings, host, port)


def serve(settings: SimSettings, host: str = "0.0.0.0", port: int = 8000, **kwargs: Any) -> None:
    from spectrn.sim.server import serve as _serve

    _serve(settings, host, port, **kwargs)


def acceptance_prob(settings: SimSettings, prompt: str) -> float:
    """First-position acceptance probability of ``prompt`` on this server (0 without speculation)."""
    probs = settings.resolved().position_probs(prompt)
    return probs[0] if probs else 0.0


def expected_tokens_per_step(settings: SimSettings, prompt: str) -> float:
    """Mean tokens per decode step (mean acceptance length incl. the bonus token; 1 without speculation)."""
    return settings.resolved().expected_tokens_per_step(prompt)


def step_time(settings: SimSettings, batch: int, context_tokens: int) -> float:
    """Scheduled duration of one decode step (seconds, time scale applied)."""
    return settings.resolved().step_s(batch, context_tokens)


def expected_tpot(
    settings: SimSettings, prompt: str, *, batch: int = 1, prompt_tokens: int = 64, output_tokens: int = 600
) -> float:
    """Steady-state time per output token (seconds, time scale applied); see ``Resolved.expected_tpot_s``."""
    return settings.resolved().expected_tpot_s(
        prompt, batch=batch, prompt_tokens=prompt_tokens, output_tokens=output_tokens
    )
