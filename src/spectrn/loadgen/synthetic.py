"""Synthetic workloads: seeded prompts whose input and output lengths follow the distributions a user names.

``bench.prompts: synthetic`` makes ``bench.workload.synthetic.prompts`` distinct prompts of words drawn from the
vocabulary of spectrn's packaged prompt sets (English words, so a tokenizer sees ordinary text), with word counts
from ``input_words`` and per-prompt output lengths from ``output_tokens``. Everything is drawn from one
``random.Random(seed)``: the same seed gives the same workload on every machine and in the load pod.

Synthetic text is what speculation likes least: random word order leaves the draft little to predict, so its
acceptance is below that of real prompts (and of repetitive synthetic data, above it). It is for load and
length studies; a finding says so in every run that uses it (docs/workloads.md).
"""

from __future__ import annotations

import math
import random
import re

from spectrn.configuration.bench import LengthDistribution, SyntheticWorkload
from spectrn.loadgen.prompts import BUILTIN_SETS, Prompt, PromptSet, load_prompt_set

SYNTHETIC = "synthetic"
SYNTHETIC_NOTE = (
    "bench.prompts synthetic: random word sequences, not your prompts; speculative acceptance on synthetic data "
    "misleads either way (SPEED-Bench found synthetic inputs overstate speculative throughput by about 23%; random "
    "tokens defeat the drafter, vLLM issue 33497): use them for load and length studies, your own prompts for the "
    "speculation decision (docs/workloads.md)"
)


def vocabulary() -> list[str]:
    """The distinct lower-case words of the packaged prompt sets, sorted (a stable vocabulary)."""
    words: set[str] = set()
    for name in BUILTIN_SETS:
        for p in load_prompt_set(name).prompts:
            words.update(w.lower() for w in re.findall(r"[A-Za-z]{2,}", p.text))
    return sorted(words)


def draw(dist: LengthDistribution, rng: random.Random) -> int:
    """One length from ``dist``, rounded and clipped to [min, max]."""
    if dist.dist == "fixed":
        value = dist.mean
    elif dist.dist == "uniform":
        value = rng.uniform(dist.mean - dist.spread, dist.mean + dist.spread)
    elif dist.dist == "normal":
        value = rng.gauss(dist.mean, dist.spread)
    else:
        value = math.exp(rng.gauss(math.log(dist.mean), dist.spread))
    return int(min(max(round(value), dist.min), dist.max))


def synthetic_prompts(spec: SyntheticWorkload, seed: int) -> PromptSet:
    """``spec.prompts`` prompts: a length from ``input_words``, words drawn uniformly from ``vocabulary()``, and
    an output length from ``output_tokens`` when set. A numbered opening makes every prompt distinct."""
    rng = random.Random(seed)
    words = vocabulary()
    prompts = []
    for i in range(spec.prompts):
        n = draw(spec.input_words, rng)
        body = " ".join(rng.choice(words) for _ in range(max(n - 1, 0)))
        out = draw(spec.output_tokens, rng) if spec.output_tokens is not None else None
        text = f"{i}: {body}".strip()
        prompts.append(Prompt(id=f"s{i}", prompt_class=spec.prompt_class, text=text, output_tokens=out))
    described = f"{spec.prompts} synthetic prompts, input words {spec.input_words.dist} {spec.input_words.mean:g}"
    return PromptSet(name=SYNTHETIC, description=described, prompts=prompts)
