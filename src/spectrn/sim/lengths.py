"""Where the simulator's greedy output ends with EOS when a request does not ask for ``ignore_eos``.

A real model stops when it samples its end-of-sequence token, so a workload without ``ignore_eos`` has output
lengths that vary from request to request. The simulator draws that length from the request itself: a hash of
the prompt text and the server's seed picks a quantile of a log-normal distribution whose median and spread
depend on the kind of continuation the prompt gets (``tokens.output_kind``):

| kind | median tokens | sigma (of the log) | what it imitates |
| --- | --- | --- | --- |
| count | 48 | 0.5 | a counted list that stops at its end |
| repeat | 64 | 0.5 | a repeated phrase |
| json | 96 | 0.6 | a few JSON records |
| code | 160 | 0.6 | a function skeleton |
| prose | 192 | 0.7 | an open-ended answer |

clipped to ``MIN_LENGTH..MAX_LENGTH``. The length depends on nothing else (not on speculation, timing,
sampling or the request counter), so a baseline and a speculative server with the same seed end the same
prompt at the same token and greedy outputs stay byte-identical. ``max_tokens`` caps it (finish reason
``length``); ``min_tokens`` raises it; otherwise the request ends with finish reason ``stop``, as vLLM's
does at EOS.
"""

from __future__ import annotations

import hashlib
import math
from statistics import NormalDist

from spectrn.sim.tokens import output_kind

# output kind -> (median length in tokens, sigma of the log length)
DISTRIBUTIONS: dict[str, tuple[float, float]] = {
    "count": (48.0, 0.5),
    "repeat": (64.0, 0.5),
    "json": (96.0, 0.6),
    "code": (160.0, 0.6),
    "prose": (192.0, 0.7),
}
MIN_LENGTH = 4
MAX_LENGTH = 4096
_NORMAL = NormalDist()


def _quantile(prompt: str, seed: int) -> float:
    """A uniform draw in (0, 1) fixed by the prompt and the seed (its own hash domain: independent of the
    output text's stream seed)."""
    digest = hashlib.blake2b(f"eos\x00{seed}\x00{prompt}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "little") + 0.5) / 2.0**64


def natural_length(prompt: str, seed: int) -> int:
    """Tokens the greedy output of ``prompt`` has when it ends with EOS (before max_tokens / min_tokens)."""
    median, sigma = DISTRIBUTIONS[output_kind(prompt)]
    length = median * math.exp(sigma * _NORMAL.inv_cdf(_quantile(prompt, seed)))
    return min(MAX_LENGTH, max(MIN_LENGTH, round(length)))
