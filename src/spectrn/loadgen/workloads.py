"""Turn a user's prompt file (JSONL, ShareGPT, CSV, Spec-Bench, a saved Hugging Face dataset, YAML) into a PromptSet.

``load_workload`` reads the file named by ``bench.prompts`` in the format ``bench.workload.format`` says (or
the extension suggests), maps categories to prompt classes, filters, samples and adds the shared system
prompt / prefix; ``workload_warnings`` says which classes are too uniform to measure speculative decoding on.
Everything happens before any server is contacted: one bad row is one ``ConfigError`` naming the file, the
line (or record / row index) and the field, and nothing is sent. Data is only parsed (json, csv, pyarrow
through ``datasets``), never executed. Formats and options: docs/workloads.md.
"""

from __future__ import annotations

import csv
import json
import random
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from spectrn.configuration.bench import WorkloadConfig
from spectrn.errors import ConfigError
from spectrn.loadgen.prompts import BUILTIN_SETS, COMBINED_SETS, Prompt, PromptSet, load_prompt_set
from spectrn.names import is_safe_name

# Streamed formats (JSONL, CSV) are read a line at a time, but every prompt is held in memory afterwards, so
# the cap bounds memory (a few times the file size) rather than parsing; ShareGPT JSON is parsed whole.
MAX_WORKLOAD_FILE_BYTES = 200_000_000
MAX_ROWS = 2_000_000
# low-diversity finding (docs/workloads.md): fewer distinct prompts than this, or a lower share of distinct
# word 5-grams than this, in one class
MIN_DISTINCT_PROMPTS = 3
MIN_DISTINCT_5GRAM_SHARE = 0.5
CHARS_PER_TOKEN = 4  # the usual rule of thumb, for ShareGPT's answer-length hint (no tokenizer here)

PROMPT_FIELDS = ("prompt", "text", "messages", "conversations", "turns")
CLASS_FIELDS = ("class", "category")
OUTPUT_FIELDS = ("output_tokens", "max_tokens")
EXTENSIONS = {".yaml": "yaml", ".yml": "yaml", ".jsonl": "jsonl", ".csv": "csv"}
HINTS = {
    "jsonl": 'one JSON object a line: {"prompt": "...", "class": "..."} or {"messages": [{"role": "user", '
    '"content": "..."}]} (docs/workloads.md)',
    "sharegpt": 'a JSON list of {"id": "...", "conversations": [{"from": "human", "value": "..."}, ...]} '
    "(docs/workloads.md)",
    "csv": "a header row with a prompt (or text) column; optional class/category, id, output_tokens "
    "(docs/workloads.md)",
    "spec-bench": 'one JSON object a line: {"question_id": 1, "category": "...", "turns": ["..."]} (docs/workloads.md)',
    "hf-disk": "name the columns with bench.workload.prompt_field / class_field / output_tokens_field "
    "(docs/workloads.md)",
}


class RowError(ValueError):
    """A bad value in one row: the field it is in and what is wrong (the reader adds file and line)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


def class_for(category: object, opts: WorkloadConfig) -> str:
    """The prompt class of a row's category: ``class_map`` first, a safe name as it is, else sanitized.

    Sanitizing: every run of characters other than letters, digits, '.', '_' and '-' becomes one '-', '..'
    becomes '.', then leading/trailing non-alphanumerics are dropped and the name is cut to 63 characters
    ("math reasoning" -> "math-reasoning", "Q&A / RAG" -> "Q-A-RAG"). Case is kept. Nothing left (or no
    category): ``default_class``."""
    if category is None or category == "":
        return opts.default_class
    if not isinstance(category, str | int) or isinstance(category, bool):
        raise RowError("class", f"must be a string, not {type(category).__name__}")
    raw = str(category)
    if raw in opts.class_map:
        return opts.class_map[raw]
    if is_safe_name(raw):
        return raw
    name = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9._-]+", "-", raw))
    name = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", name)
    name = re.sub(r"[^A-Za-z0-9]+$", "", name[:63])
    return name or opts.default_class


def detect_format(path: Path, fmt: str = "auto") -> str:
    """The reader for ``path``: ``fmt`` unless it is auto, else by extension and a peek at the content."""
    if fmt != "auto":
        return fmt
    if path.is_dir():
        return "hf-disk"
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "sharegpt" if _first_char(path) == "[" else "yaml"
    if suffix == ".jsonl":
        return "spec-bench" if _looks_like_spec_bench(path) else "jsonl"
    return EXTENSIONS.get(suffix, "yaml")  # the historical default: any other file is a YAML prompt set


def load_workload(
    name_or_path: str, opts: WorkloadConfig | None = None, *, seed: int = 0, what: str = "bench.prompts"
) -> tuple[PromptSet, list[str]]:
    """The prompt set ``bench.prompts`` names, shaped by ``bench.workload``, and the warnings to show.

    Packaged sets (structured, open, ...) and YAML files are read as before; every other format by its
    reader. Warnings: the reader's notes (skipped records) and, for files, ``workload_warnings``."""
    from spectrn.loadgen.synthetic import SYNTHETIC, SYNTHETIC_NOTE, synthetic_prompts

    opts = opts or WorkloadConfig()
    notes: list[str] = []
    if name_or_path == SYNTHETIC:  # made, not read: the generator's lengths are the workload
        made = shape(synthetic_prompts(opts.synthetic, seed), opts, seed=seed, source=SYNTHETIC, notes=notes)
        return made, [*notes, SYNTHETIC_NOTE]
    packaged = name_or_path in BUILTIN_SETS or name_or_path in COMBINED_SETS
    path_like = "/" in name_or_path or bool(Path(name_or_path).suffix)  # else a set name: the loader names the sets
    if not packaged and path_like and not Path(name_or_path).exists():
        raise ConfigError(f"{what} {name_or_path} does not exist", hint="check the path")
    fmt = "yaml" if packaged else detect_format(Path(name_or_path), opts.format)
    if fmt == "yaml":
        base = load_prompt_set(name_or_path, what=what)
        if opts.class_map:
            base = base.model_copy(
                update={"prompts": [_with(p, prompt_class=opts.class_map.get(p.prompt_class, p.prompt_class))
                                    for p in base.prompts]}
            )  # fmt: skip
    else:
        path = Path(name_or_path)
        readers: dict[str, Callable[[Path, WorkloadConfig, list[str]], list[Prompt]]] = {
            "jsonl": _read_jsonl,
            "spec-bench": _read_spec_bench,
            "csv": _read_csv,
            "sharegpt": _read_sharegpt,
            "hf-disk": _read_hf_disk,
        }
        prompts = readers[fmt](path, opts, notes)
        if not prompts:
            raise ConfigError(f"prompt file {path} ({fmt}) holds no prompt", hint=HINTS[fmt])
        base = PromptSet(name=path.name, description=f"{fmt} file {path}", prompts=prompts)
    shaped = shape(base, opts, seed=seed, source=name_or_path, notes=notes)
    return shaped, notes + ([] if packaged else workload_warnings(shaped, shared_prefix=opts.prefix))


def shape(
    prompt_set: PromptSet, opts: WorkloadConfig, *, seed: int, source: str, notes: list[str] | None = None
) -> PromptSet:
    """Length filters, then seeded sampling (file order kept), class weights, then system prompt / prefix."""
    prompts = prompt_set.prompts
    if opts.min_chars is not None or opts.max_chars is not None:
        lo, hi = opts.min_chars or 0, opts.max_chars if opts.max_chars is not None else float("inf")
        prompts = [p for p in prompts if lo <= len(p.text) <= hi]
        if not prompts:
            raise ConfigError(
                f"bench.workload: no prompt of {source} has {lo} to {hi} characters",
                hint="widen bench.workload.min_chars / max_chars",
            )
    if opts.sample is not None:
        if opts.sample < len(prompts):
            keep = sorted(random.Random(seed).sample(range(len(prompts)), opts.sample))
            prompts = [prompts[i] for i in keep]
        elif notes is not None:
            notes.append(f"bench.workload.sample: {opts.sample} is not below the {len(prompts)} prompts; all are used")
    classes = {p.prompt_class for p in prompts}
    unknown = sorted(set(opts.class_weights) - classes)
    if unknown:
        raise ConfigError(
            f"bench.workload.class_weights names class(es) {', '.join(unknown)} that {source} does not have",
            hint=f"use the workload's classes: {', '.join(sorted(classes))}",
        )
    lead = opts.prefix
    if lead:
        try:
            prompts = [
                _with(p, text=lead + p.text, turns=[lead + p.turns[0], *p.turns[1:]] if p.turns else None)
                for p in prompts
            ]
        except ValidationError as e:
            raise ConfigError(
                f"bench.workload: with the prefix a prompt of {source} is too long ({e.errors()[0]['msg']})",
                hint="shorten bench.workload.prefix, or filter with bench.workload.max_chars",
            ) from None
    weights = {**prompt_set.class_weights, **opts.class_weights}
    system = opts.system_prompt or prompt_set.system_prompt
    return PromptSet(name=prompt_set.name, description=prompt_set.description, prompts=prompts, class_weights=weights,
                     system_prompt=system)  # fmt: skip


def workload_warnings(prompt_set: PromptSet, *, shared_prefix: str = "") -> list[str]:
    """Classes too uniform for a meaningful acceptance rate: fewer than 3 distinct prompts, or prompts that are
    near-identical, i.e. under half of their word 5-grams distinct (distinct 5-grams / all 5-grams over the
    class's prompts, repeats included; a prompt under 5 words counts as one gram). ``shared_prefix`` (the
    workload's system prompt and prefix, the same on every request by design) is left out of the measure."""
    by_class: dict[str, list[str]] = {}
    for p in prompt_set.prompts:
        by_class.setdefault(p.prompt_class, []).append(p.text.removeprefix(shared_prefix))
    out = []
    for cls in sorted(by_class):
        texts = by_class[cls]
        distinct = len(set(texts))
        if distinct < MIN_DISTINCT_PROMPTS:
            out.append(
                f"prompt class {cls} has {distinct} distinct prompt(s): its acceptance rate says little about "
                f"real traffic; add at least {MIN_DISTINCT_PROMPTS} different prompts"
            )
            continue
        share = distinct_5gram_share(texts)
        if share < MIN_DISTINCT_5GRAM_SHARE:
            out.append(
                f"prompt class {cls}: its prompts are near-identical (only {share:.0%} of their word 5-grams are "
                "distinct), so the drafter sees the same text over and over; add more varied prompts"
            )
    return out


def distinct_5gram_share(texts: list[str]) -> float:
    """Distinct word 5-grams / all word 5-grams over ``texts``."""
    seen: set[tuple[str, ...]] = set()
    total = 0
    for text in texts:
        words = text.split()
        grams = [tuple(words[i : i + 5]) for i in range(len(words) - 4)] or [tuple(words)]
        total += len(grams)
        seen.update(grams)
    return len(seen) / total if total else 1.0


# ---- readers ----


def _with(p: Prompt, **changes: Any) -> Prompt:
    return Prompt.model_validate({**p.model_dump(by_alias=True), **changes})


def _bad(path: Path, where: str, field: str, problem: str, fmt: str) -> ConfigError:
    return ConfigError(f"prompt file {path}, {where}, field {field!r}: {problem}", hint=HINTS[fmt])


def _check_file(path: Path) -> None:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ConfigError(f"prompt file {path} does not exist", hint="check the path") from None
    except OSError as e:
        raise ConfigError(f"prompt file {path} cannot be read: {e.strerror}", hint="check the path") from None
    if not path.is_file():
        raise ConfigError(f"prompt file {path} is not a file", hint="name a file, or a dataset folder with hf-disk")
    if size > MAX_WORKLOAD_FILE_BYTES:
        raise ConfigError(
            f"prompt file {path} is {size} bytes, over the {MAX_WORKLOAD_FILE_BYTES}-byte limit",
            hint="cut it down first (e.g. `head -n 100000 big.jsonl > part.jsonl`), or bench.workload.sample it "
            "after cutting",
        )


def _first_char(path: Path) -> str:
    try:
        with path.open("rb") as f:
            head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        return ""  # the reader reports a missing or unreadable file with its own message
    return head[:1].decode("ascii", "replace")


def _looks_like_spec_bench(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            for raw in f:
                if raw.strip():
                    row = json.loads(raw)
                    return isinstance(row, dict) and "question_id" in row and "turns" in row
    except (OSError, ValueError, RecursionError):
        pass  # not readable as JSON: the JSONL reader reports the line
    return False


def _lines(path: Path, fmt: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed JSON value) for every non-blank line, streamed."""
    _check_file(path)
    with path.open("rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise ConfigError(
                    f"prompt file {path}, line {n} is not UTF-8 (byte {e.start} of the line)", hint="save it as UTF-8"
                ) from None
            if not line.strip():
                continue
            if n > MAX_ROWS:
                raise ConfigError(f"prompt file {path} has over {MAX_ROWS} lines", hint="cut it down first")
            try:
                yield n, json.loads(line)
            except RecursionError:
                raise _bad(path, f"line {n}", "(line)", "JSON nested too deeply", fmt) from None
            except ValueError as e:
                raise _bad(path, f"line {n}", "(line)", f"not valid JSON ({e})", fmt) from None


def _read_jsonl(path: Path, opts: WorkloadConfig, notes: list[str]) -> list[Prompt]:
    return _rows_to_prompts(((f"line {n}", n, row) for n, row in _lines(path, "jsonl")), path, opts, "jsonl")


def _read_spec_bench(path: Path, opts: WorkloadConfig, notes: list[str]) -> list[Prompt]:
    out: list[Prompt] = []
    seen: set[str] = set()
    for n, row in _lines(path, "spec-bench"):
        where = f"line {n}"
        if not isinstance(row, dict):
            raise _bad(path, where, "(line)", f"must be a JSON object, not {type(row).__name__}", "spec-bench")
        try:
            turns = _turn_list(row.get("turns"), "turns")
            qid = row.get("question_id", n)
            if not isinstance(qid, str | int) or isinstance(qid, bool):
                raise RowError("question_id", f"must be a number or string, not {type(qid).__name__}")
            prompt = _make(str(qid), class_for(row.get("category"), opts), turns, None, seen, id_field="question_id")
        except RowError as e:
            raise _bad(path, where, e.field, e.problem, "spec-bench") from None
        out.append(prompt)
    return out


def _read_csv(path: Path, opts: WorkloadConfig, notes: list[str]) -> list[Prompt]:
    _check_file(path)
    # a prompt can be longer than csv's default 128 KiB field limit; Prompt caps the text at 1M characters
    csv.field_size_limit(max(csv.field_size_limit(), 2_000_000))
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:  # -sig: spreadsheets write a byte-order mark
            reader = csv.DictReader(f)
            if not reader.fieldnames:
                raise ConfigError(f"prompt file {path} has no header row", hint=HINTS["csv"])

            def rows() -> Iterator[tuple[str, int, dict[str, Any]]]:
                for i, row in enumerate(reader, 1):
                    where = f"line {reader.line_num}"
                    if i > MAX_ROWS:
                        raise ConfigError(f"prompt file {path} has over {MAX_ROWS} rows", hint="cut it down first")
                    if None in row:
                        raise _bad(path, where, "(row)", "has more values than the header has columns", "csv")
                    yield where, i, {k: (v if v != "" else None) for k, v in row.items()}

            return _rows_to_prompts(rows(), path, opts, "csv")
    except UnicodeDecodeError:
        raise ConfigError(f"prompt file {path} is not UTF-8", hint="save it as UTF-8") from None
    except csv.Error as e:
        raise ConfigError(f"prompt file {path}: malformed CSV ({e})", hint=HINTS["csv"]) from None


def _read_sharegpt(path: Path, opts: WorkloadConfig, notes: list[str]) -> list[Prompt]:
    _check_file(path)
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"prompt file {path} is not UTF-8 (byte {e.start})", hint="save it as UTF-8") from None
    except RecursionError:
        raise ConfigError(f"prompt file {path}: JSON nested too deeply", hint=HINTS["sharegpt"]) from None
    except ValueError as e:
        raise ConfigError(f"prompt file {path}: not valid JSON ({e})", hint=HINTS["sharegpt"]) from None
    if not isinstance(data, list):
        raise ConfigError(f"prompt file {path}: top level must be a list of conversations", hint=HINTS["sharegpt"])
    if len(data) > MAX_ROWS:
        raise ConfigError(f"prompt file {path} has over {MAX_ROWS} records", hint="cut it down first")
    records = ((f"record [{i}]", i, r) for i, r in enumerate(data))
    return _rows_to_prompts(records, path, opts, "sharegpt", notes, fields=("conversations",))


def _read_hf_disk(path: Path, opts: WorkloadConfig, notes: list[str]) -> list[Prompt]:
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            f"prompt folder {path}: reading a saved Hugging Face dataset needs the datasets library",
            hint="pip install 'spectrn[datasets]'",
        ) from None
    if not path.is_dir():
        raise ConfigError(f"prompt folder {path} does not exist or is not a folder", hint="check the path")
    try:
        ds = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError, OSError) as e:
        raise ConfigError(
            f"prompt folder {path} is not a dataset saved with save_to_disk ({type(e).__name__})",
            hint="save it with datasets.Dataset.save_to_disk(folder), or name the split's folder",
        ) from None
    if isinstance(ds, datasets.DatasetDict):
        if len(ds) != 1:
            raise ConfigError(
                f"prompt folder {path} holds the splits {', '.join(ds)}, not one dataset",
                hint=f"name one split's folder, e.g. {path / next(iter(ds))}",
            )
        ds = next(iter(ds.values()))
    if ds.num_rows > MAX_ROWS:
        raise ConfigError(f"prompt folder {path} has over {MAX_ROWS} rows", hint="save a smaller selection")
    for name, option in ((opts.prompt_field, "prompt_field"), (opts.class_field, "class_field"),
                         (opts.output_tokens_field, "output_tokens_field"), (opts.id_field, "id_field")):  # fmt: skip
        if name is not None and name not in ds.column_names:
            raise ConfigError(
                f"prompt folder {path} has no column {name!r} (bench.workload.{option})",
                hint=f"use one of its columns: {', '.join(ds.column_names)}",
            )
    return _rows_to_prompts(((f"row [{i}]", i, r) for i, r in enumerate(ds)), path, opts, "hf-disk", notes)


def _rows_to_prompts(
    rows: Iterator[tuple[str, int, Any]],
    path: Path,
    opts: WorkloadConfig,
    fmt: str,
    notes: list[str] | None = None,
    *,
    fields: tuple[str, ...] = PROMPT_FIELDS,
) -> list[Prompt]:
    out: list[Prompt] = []
    seen: set[str] = set()
    skipped = 0
    for where, number, row in rows:
        if not isinstance(row, Mapping):
            raise _bad(path, where, "(row)", f"must be an object, not {type(row).__name__}", fmt)
        try:
            prompt = _row_prompt(row, number, opts, seen, fields)
        except RowError as e:
            raise _bad(path, where, e.field, e.problem, fmt) from None
        if prompt is None:
            skipped += 1
            continue
        out.append(prompt)
    if skipped and notes is not None:
        notes.append(f"prompt file {path}: skipped {skipped} conversation(s) without a user turn")
    return out


def _row_prompt(
    row: Mapping[str, Any], number: int, opts: WorkloadConfig, seen: set[str], fields: tuple[str, ...]
) -> Prompt | None:
    """One row of JSONL / CSV / hf-disk / ShareGPT; None for a ShareGPT conversation without a user turn."""
    field = opts.prompt_field or next((f for f in fields if row.get(f) is not None), None)
    if field is None or row.get(field) is None:
        wanted = opts.prompt_field or " or ".join(fields[:3])
        raise RowError(opts.prompt_field or fields[0], f"missing: the row needs {wanted}")
    value = row[field]
    hint_tokens: int | None = None
    if field == "conversations":
        turns, hint_tokens = _sharegpt_turns(value)
        if turns is None:
            return None
    elif field == "messages":
        turns = _message_turns(value)
    elif isinstance(value, list):
        turns = _turn_list(value, field)
    else:
        turns = _turn_list([value], field)
    cls_field = opts.class_field or next((f for f in CLASS_FIELDS if row.get(f) is not None), "class")
    try:
        cls = class_for(row.get(cls_field), opts)
    except RowError as e:
        raise RowError(cls_field, e.problem) from None
    out_field = opts.output_tokens_field or next((f for f in OUTPUT_FIELDS if row.get(f) is not None), None)
    output_tokens = _positive_int(row[out_field], out_field) if out_field else hint_tokens
    id_field = opts.id_field or "id"
    raw_id = row.get(id_field)
    if raw_id is None:
        raw_id = number
    elif not isinstance(raw_id, str | int) or isinstance(raw_id, bool):
        raise RowError(id_field, f"must be a string or number, not {type(raw_id).__name__}")
    return _make(str(raw_id), cls, turns, output_tokens, seen, id_field=id_field)


def _make(pid: str, cls: str, turns: list[str], output_tokens: int | None, seen: set[str], *, id_field: str) -> Prompt:
    if pid in seen:
        raise RowError(id_field, f"{pid!r} is used twice (ids must be unique; drop the ids to number the rows)")
    seen.add(pid)
    try:
        prompt = Prompt.model_validate(
            {"id": pid, "class": cls, "text": turns[0], "turns": turns if len(turns) > 1 else None,
             "output_tokens": output_tokens}
        )  # fmt: skip
    except ValidationError as e:
        err = e.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else "class"  # the model's own rule: the class and its turns
        name = {"text": "prompt", "class": "class", "id": id_field}.get(field, field)
        raise RowError(name, err["msg"].removeprefix("Value error, ")) from None
    return prompt


def _turn_list(value: object, field: str) -> list[str]:
    if not isinstance(value, list) or not value:
        raise RowError(field, "must be a non-empty list of strings" if field == "turns" else "must be a string")
    for i, turn in enumerate(value):
        if not isinstance(turn, str) or not turn.strip():
            where = f"{field}[{i}]" if field == "turns" else field
            raise RowError(where, "must be a non-empty string")
    return list(value)


def _message_turns(value: object) -> list[str]:
    """OpenAI ``messages``: the user messages are the turns; a system message is put before the first one."""
    if not isinstance(value, list) or not value:
        raise RowError("messages", "must be a non-empty list of {role, content} objects")
    system, turns = "", []
    for i, msg in enumerate(value):
        if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
            raise RowError(f"messages[{i}]", "must be an object with a role and a content")
        text = _content(msg.get("content"), f"messages[{i}].content")
        if msg["role"] == "system":
            system = text
        elif msg["role"] == "user":
            turns.append(text)
    if not turns:
        raise RowError("messages", "has no message with role user")
    if system:
        turns[0] = f"{system}\n\n{turns[0]}"
    return turns


def _content(value: object, field: str) -> str:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list):  # content parts: [{"type": "text", "text": "..."}]
        parts = []
        for part in value:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise RowError(field, "only text content parts are supported")
            parts.append(part["text"])
        if "".join(parts).strip():
            return "\n".join(parts)
    raise RowError(field, "must be a non-empty string (or a list of text parts)")


def _sharegpt_turns(value: object) -> tuple[list[str] | None, int | None]:
    """(human turns with a system turn put before the first, answer-length hint) of a ShareGPT conversation.

    The hint is the first gpt answer's length in characters / 4, rounded up: a rough token count."""
    if not isinstance(value, list):
        raise RowError("conversations", "must be a list of {from, value} objects")
    system, turns, answer = "", [], None
    for i, turn in enumerate(value):
        if (
            not isinstance(turn, dict)
            or not isinstance(turn.get("from"), str)
            or not isinstance(turn.get("value"), str)
        ):
            raise RowError(f"conversations[{i}]", 'must be an object with "from" and "value" strings')
        speaker, text = turn["from"], turn["value"]
        if speaker == "system":
            system = text
        elif speaker in ("human", "user") and text.strip():
            turns.append(text)
        elif speaker in ("gpt", "assistant", "chatgpt") and turns and answer is None:
            answer = text
    if not turns:
        return None, None
    if system.strip():
        turns[0] = f"{system}\n\n{turns[0]}"
    hint = max(1, -(-len(answer) // CHARS_PER_TOKEN)) if answer else None
    return turns, hint


def _positive_int(value: object, field: str) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())  # CSV holds every value as text
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # pyarrow/pandas columns with a gap become floats
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 1_000_000:
        raise RowError(field, f"must be a whole number of tokens from 1 to 1000000, not {value!r}")
    return value
