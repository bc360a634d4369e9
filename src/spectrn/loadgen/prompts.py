"""Prompt sets and the request schedule.

A prompt set is a YAML file ``{name, description, prompts: [{id, class, text}]}``. The packaged sets live
in ``prompts/`` (``structured``, ``open``, ``sample``); ``all`` is structured + open; a user passes a path to
their own file. The schedule is the ordered list of requests sent to EVERY endpoint: same prompts, same
order, same lengths, so the A/B comparison is paired by schedule index.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from spectrn.errors import ConfigError
from spectrn.names import check_name
from spectrn.paths import data_dir
from spectrn.spec.config import format_validation_error, load_yaml

BUILTIN_SETS = ("structured", "open", "sample")
COMBINED_SETS = {"all": ("structured", "open")}
MAX_PROMPT_FILE_BYTES = 5_000_000


class Prompt(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str = Field(min_length=1, max_length=200)
    prompt_class: str = Field(alias="class", min_length=1, max_length=100)
    text: str = Field(min_length=1, max_length=1_000_000)

    @field_validator("id", "prompt_class")
    @classmethod
    def _plain(cls, v: str) -> str:
        if any(c in v for c in "\n\r\t\x00"):
            raise ValueError("must be a single line without control characters")
        return v


class PromptSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    prompts: list[Prompt] = Field(min_length=1)

    @field_validator("prompts")
    @classmethod
    def _unique_ids(cls, v: list[Prompt]) -> list[Prompt]:
        seen: set[str] = set()
        for p in v:
            if p.id in seen:
                raise ValueError(f"duplicate prompt id {p.id!r}")
            seen.add(p.id)
        return v


def _load_file(path: Path) -> PromptSet:
    data = load_yaml(path, what="prompt file", max_bytes=MAX_PROMPT_FILE_BYTES)
    if not isinstance(data, dict):
        raise ConfigError(
            f"prompt file {path}: top level must be a mapping with a 'prompts' list",
            hint="see prompts/structured.yaml for the format",
        )
    try:
        prompt_set = PromptSet.model_validate(data)
    except ValidationError as e:
        raise ConfigError(
            f"prompt file {path}: {format_validation_error(e)}", hint="see prompts/structured.yaml"
        ) from None
    for i, p in enumerate(prompt_set.prompts):  # classes become CloudWatch dimensions and report labels
        check_name(p.prompt_class, what=f"prompts[{i}].class", source=f"prompt file {path}", example="structured")
    return prompt_set


def load_prompt_set(name_or_path: str, *, what: str = "bench.prompts") -> PromptSet:
    """A packaged set by name (structured, open, sample, all) or a YAML file by path; ``what`` names where the
    name came from in an error (``--prompts``)."""
    if name_or_path in COMBINED_SETS:
        parts = [load_prompt_set(n) for n in COMBINED_SETS[name_or_path]]
        return PromptSet(
            name=name_or_path,
            description=" + ".join(p.name for p in parts),
            prompts=[pr for p in parts for pr in p.prompts],
        )
    if name_or_path in BUILTIN_SETS:
        return _load_file(data_dir("prompts") / f"{name_or_path}.yaml")
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml", ".json") or path.exists():
        return _load_file(path)
    names = ", ".join((*BUILTIN_SETS, *COMBINED_SETS))
    raise ConfigError(f"{what}: unknown prompt set {name_or_path!r}", hint=f"use one of {names} or a YAML file path")


@dataclass(frozen=True)
class ScheduledRequest:
    index: int
    prompt_id: str
    prompt_class: str
    text: str
    warmup: bool


def build_schedule(
    prompt_set: PromptSet, *, requests: int, warmup: int, seed: int, nonce: str | None = None
) -> list[ScheduledRequest]:
    """``warmup`` + ``requests`` requests cycling through the prompts in a seeded order.

    Every prompt appears as evenly as the count allows (whole passes over a shuffled list), so per-class
    statistics are balanced. With ``nonce`` each request text starts with a unique tag (identical for
    both endpoints at the same index), which defeats prefix caching without breaking the pairing.
    """
    rng = random.Random(seed)
    order: list[Prompt] = []
    total = warmup + requests
    while len(order) < total:
        batch = list(prompt_set.prompts)
        rng.shuffle(batch)
        order.extend(batch)
    out = []
    for i, p in enumerate(order[:total]):
        text = f"[{nonce}-{i}] {p.text}" if nonce else p.text
        out.append(ScheduledRequest(i, p.id, p.prompt_class, text, warmup=i < warmup))
    return out
