"""Prompt sets and the request schedule.

A prompt set is a YAML file ``{name, description, prompts: [{id, class, text}]}``. The packaged sets live
in ``prompts/`` (``structured``, ``open``, ``sample``); ``all`` is structured + open; a user passes a path to
their own file. The schedule is the ordered list of requests sent to EVERY endpoint: same prompts, same
order, same lengths, so the A/B comparison is paired by schedule index.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from spectrn.configuration.bench import positive_weights
from spectrn.configuration.origins import format_validation_error
from spectrn.configuration.sources import load_yaml
from spectrn.errors import ConfigError
from spectrn.names import check_name, is_safe_name
from spectrn.paths import data_dir

BUILTIN_SETS = ("structured", "open", "sample")
COMBINED_SETS = {"all": ("structured", "open")}
MAX_PROMPT_FILE_BYTES = 5_000_000


class Prompt(BaseModel):
    """One prompt. ``text`` is what a request sends; ``turns`` (multi-turn workloads) holds every user message,
    the first being ``text``, replayed as a conversation; ``output_tokens`` is the workload's output length
    for it (the request's max_tokens, capped at bench.max_tokens)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    id: str = Field(min_length=1, max_length=200)
    prompt_class: str = Field(alias="class", min_length=1, max_length=100)
    text: str = Field(min_length=1, max_length=1_000_000)
    turns: list[str] | None = Field(default=None, min_length=1, max_length=1000)
    output_tokens: int | None = Field(default=None, ge=1, le=1_000_000)

    @field_validator("id", "prompt_class")
    @classmethod
    def _plain(cls, v: str) -> str:
        if any(c in v for c in "\n\r\t\x00"):
            raise ValueError("must be a single line without control characters")
        return v

    @model_validator(mode="after")
    def _first_turn_is_text(self) -> Prompt:
        # the single-turn view (text) and the conversation (turns) must never disagree on what is sent first
        if self.turns is not None and self.turns[0] != self.text:
            raise ValueError("turns[0] must be the prompt's text")
        # later turns are reported as <class>-t<N>, which becomes a file name and a label like the class itself
        if self.turns is not None and len(self.turns) > 1:
            last = turn_class(self.prompt_class, len(self.turns))
            if not is_safe_name(last):
                raise ValueError(
                    f"class {self.prompt_class!r} leaves no room for the turn suffix: its turn {len(self.turns)} "
                    f"would be reported as {last!r}, over the name limit; map it to a shorter class (class_map)"
                )
        return self


class PromptSet(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    prompts: list[Prompt] = Field(min_length=1)
    class_weights: dict[str, float] = Field(
        default_factory=dict, description="class -> relative share of the schedule (unlisted classes: 1)"
    )
    system_prompt: str = Field(
        default="",
        max_length=100_000,
        description="Sent before every request's conversation: a system message (chat API), or the transcript's "
        "first paragraph (completions API).",
    )

    @field_validator("class_weights")
    @classmethod
    def _weights(cls, v: dict[str, float]) -> dict[str, float]:
        return positive_weights(v)

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
    classes = sorted({p.prompt_class for p in prompt_set.prompts})
    unknown = sorted(set(prompt_set.class_weights) - set(classes))
    if unknown:
        raise ConfigError(
            f"prompt file {path}: class_weights names class(es) {', '.join(unknown)} that no prompt has",
            hint=f"use the file's classes: {', '.join(classes)}",
        )
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


def turn_class(prompt_class: str, turn: int) -> str:
    """The class a later turn of a conversation is reported under: ``coding`` turn 2 -> ``coding-t2``."""
    return f"{prompt_class}-t{turn}"


@dataclass(frozen=True)
class ScheduledRequest:
    index: int
    prompt_id: str
    prompt_class: str
    text: str
    warmup: bool
    # a conversation (multi-turn workloads): every user message, the first being ``text``; None: one turn
    turns: tuple[str, ...] | None = None
    # the workload's output length for this prompt: the request's max_tokens (capped at bench.max_tokens)
    output_tokens: int | None = None
    # the workload's shared system prompt ("": none), sent before the conversation
    system: str = ""

    @property
    def turn_count(self) -> int:
        return len(self.turns) if self.turns else 1


class Schedule(Sequence[ScheduledRequest]):
    """The schedule, each request made when it is read: one prompt position per request (4 bytes), so a
    million-request open-loop level holds megabytes, not a million request objects with their texts.

    A ``Schedule`` is a view over global request indices (a ``range``): slicing and ``part`` return views."""

    def __init__(
        self,
        prompts: Sequence[Prompt],
        order: array[int],
        warmup: int,
        nonce: str | None,
        view: range | None = None,
        *,
        system: str = "",
    ) -> None:
        self._prompts = prompts
        self._order = order
        self._warmup = warmup
        self._nonce = nonce
        self._view = view if view is not None else range(len(order))
        self.system = system  # the workload's shared system prompt, sent before every request

    def _make(self, i: int) -> ScheduledRequest:
        p = self._prompts[self._order[i]]
        text = f"[{self._nonce}-{i}] {p.text}" if self._nonce else p.text
        turns = (text, *p.turns[1:]) if p.turns and len(p.turns) > 1 else None
        return ScheduledRequest(
            i,
            p.id,
            p.prompt_class,
            text,
            warmup=i < self._warmup,
            turns=turns,
            output_tokens=p.output_tokens,
            system=self.system,
        )

    def turn_total(self) -> int:
        """Requests this view sends: one per turn of each scheduled prompt (a plain prompt has one)."""
        counts = [len(p.turns) if p.turns else 1 for p in self._prompts]
        if all(c == 1 for c in counts):
            return len(self._view)
        return sum(counts[self._order[i]] for i in self._view)

    def __len__(self) -> int:
        return len(self._view)

    @overload
    def __getitem__(self, i: int) -> ScheduledRequest: ...
    @overload
    def __getitem__(self, i: slice) -> Schedule: ...
    def __getitem__(self, i: int | slice) -> ScheduledRequest | Schedule:
        if isinstance(i, slice):
            return Schedule(self._prompts, self._order, self._warmup, self._nonce, self._view[i], system=self.system)
        return self._make(self._view[i])

    def __iter__(self) -> Iterator[ScheduledRequest]:
        return (self._make(i) for i in self._view)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Schedule({len(self)} requests, {self._warmup} warm-up)"

    def part(self, shard: int, shards: int, *, warmup: bool) -> Schedule:
        """This shard's warm-up or measured requests (index % shards == shard), in order, as a view."""
        mine = self._view[shard::shards] if self._view.step == 1 and self._view.start == 0 else None
        if mine is None:
            raise ValueError("part() is for a whole schedule")
        n_warm = len(range(shard, min(self._warmup, len(self._view)), shards))
        return Schedule(
            self._prompts,
            self._order,
            self._warmup,
            self._nonce,
            mine[:n_warm] if warmup else mine[n_warm:],
            system=self.system,
        )


def split_schedule(
    schedule: Sequence[ScheduledRequest], shard: int = 0, shards: int = 1
) -> tuple[Sequence[ScheduledRequest], Sequence[ScheduledRequest]]:
    """(warm-up, measured) requests of one shard (index % shards == shard), in schedule order."""
    if isinstance(schedule, Schedule):
        return schedule.part(shard, shards, warmup=True), schedule.part(shard, shards, warmup=False)
    mine = [r for r in schedule if r.index % shards == shard]
    return [r for r in mine if r.warmup], [r for r in mine if not r.warmup]


def build_schedule(
    prompt_set: PromptSet, *, requests: int, warmup: int, seed: int, nonce: str | None = None
) -> Schedule:
    """``warmup`` + ``requests`` requests cycling through the prompts in a seeded order.

    Every prompt appears as evenly as the count allows (whole passes over a shuffled list), so per-class
    statistics are balanced. With ``nonce`` each request text starts with a unique tag (identical for
    both endpoints at the same index), which defeats prefix caching without breaking the pairing.
    """
    rng = random.Random(seed)
    total = warmup + requests
    if prompt_set.class_weights:
        return Schedule(
            prompt_set.prompts, _weighted_order(prompt_set, total, rng), warmup, nonce, system=prompt_set.system_prompt
        )
    order = array("I")
    positions = list(range(len(prompt_set.prompts)))
    while len(order) < total:
        batch = list(positions)
        rng.shuffle(batch)
        order.extend(batch[: total - len(order)])
    return Schedule(prompt_set.prompts, order, warmup, nonce, system=prompt_set.system_prompt)


def _weighted_order(prompt_set: PromptSet, total: int, rng: random.Random) -> array[int]:
    """Class shares follow ``class_weights`` exactly (smooth weighted round robin: after n requests each class
    is within one request of its share), so a class's share does not depend on how many prompts it has or on
    luck; within a class the prompts cycle in seeded shuffled passes, as in the unweighted schedule."""
    by_class: dict[str, list[int]] = {}
    for i, p in enumerate(prompt_set.prompts):
        by_class.setdefault(p.prompt_class, []).append(i)
    classes = sorted(by_class)
    weights = [prompt_set.class_weights.get(c, 1.0) for c in classes]
    whole = sum(weights)
    credit = [0.0] * len(classes)
    passes: dict[str, list[int]] = {c: [] for c in classes}
    order = array("I")
    while len(order) < total:
        for k, w in enumerate(weights):
            credit[k] += w
        k = max(range(len(classes)), key=lambda j: credit[j])  # ties: the first class in name order
        credit[k] -= whole
        cls = classes[k]
        if not passes[cls]:
            passes[cls] = list(by_class[cls])
            rng.shuffle(passes[cls])
        order.append(passes[cls].pop())
    return order
