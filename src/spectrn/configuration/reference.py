"""The configuration's own documentation, generated from the models: the README reference table and the
commented default file `spectrn init` writes."""

from __future__ import annotations

import json
import types
import typing
from typing import Any, Literal

import yaml
from pydantic import BaseModel

from spectrn.configuration.catalog import ModelSpec
from spectrn.configuration.config import SpectrnConfig


def _type_name(ann: Any) -> str:
    """``Literal['a', 'b']`` -> ``a \\| b``; ``int | None`` -> ``int \\| None``."""

    origin = typing.get_origin(ann)
    if origin is Literal:
        return " \\| ".join(str(a) for a in typing.get_args(ann))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in typing.get_args(ann))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(ann))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if ann is type(None):
        return "None"
    return getattr(ann, "__name__", None) or str(ann).replace("typing.", "")


def _walk_fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    rows = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        dotted = f"{prefix}{name}"
        if isinstance(ann, type) and issubclass(ann, BaseModel) and ann is not ModelSpec:
            rows.extend(_walk_fields(ann, f"{dotted}."))
            continue
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        choices = extra.get("enum")
        if isinstance(choices, list):  # a choice from a registry (spectrn.dialects): name the choices
            ann = Literal[tuple(choices)]  # type: ignore[assignment]
        if field.is_required():
            rows.append((dotted, _type_name(ann), "required", field.description or ""))
            continue
        default = field.get_default(call_default_factory=True)
        if isinstance(default, BaseModel):
            default = default.model_dump()
        rows.append((dotted, _type_name(ann), json.dumps(default), field.description or ""))
    return rows


def config_reference_markdown() -> str:
    """The configuration reference table, generated from the model's field descriptions."""
    lines = [
        "| key | type | default | description |",
        "| --- | --- | --- | --- |",
    ]
    for dotted, type_name, default, desc in _walk_fields(SpectrnConfig):
        desc = desc.replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
        lines.append(f"| `{dotted}` | {type_name} | `{default}` | {desc} |")
    lines += ["", "Keys of each `custom_models` entry:", "", "| key | type | default | description |"]
    lines.append("| --- | --- | --- | --- |")
    for dotted, type_name, default, desc in _walk_fields(ModelSpec):
        desc = desc.replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
        lines.append(f"| `{dotted}` | {type_name} | `{default}` | {desc} |")
    return "\n".join(lines)


def commented_default_yaml(values: dict[str, Any] | None = None, *, preset: str | None = None) -> str:
    """The file `spectrn init` writes: every key with its default (or, from a preset, the preset's value), each
    preceded by its description."""

    def emit(model: type[BaseModel], indent: int, given: dict[str, Any]) -> list[str]:
        out: list[str] = []
        pad = "  " * indent
        for name, field in model.model_fields.items():
            ann = field.annotation
            if field.description:
                out.append(f"{pad}# {field.description}")
            if isinstance(ann, type) and issubclass(ann, BaseModel) and ann is not ModelSpec:
                out.append(f"{pad}{name}:")
                # a nested model's own default fills fields it requires (bench.workload.synthetic.input)
                default = field.get_default(call_default_factory=True)
                base = default.model_dump() if isinstance(default, BaseModel) else {}
                out.extend(emit(ann, indent + 1, {**base, **(given.get(name) or {})}))
                continue
            default = given[name] if name in given else field.get_default(call_default_factory=True)
            dumped = yaml.safe_dump({name: default}, default_flow_style=True, width=1000).strip()
            dumped = dumped.removeprefix("{").removesuffix("}")
            out.append(f"{pad}{dumped}")
        return out

    header = [
        "# spectrn configuration. Every key is optional; shown values are the defaults.",
        "# Override any key with SPECTRN_<KEY> (nested: SPECTRN_BENCH__CONCURRENCY=8) or a CLI flag.",
    ]
    if preset is not None:
        header[0] = (
            f"# spectrn configuration from preset {preset} (docs/neuron.md, Presets). Every key is optional; "
            "shown values are the preset's, else the defaults."
        )
    return "\n".join(header + emit(SpectrnConfig, 0, values or {})) + "\n"
