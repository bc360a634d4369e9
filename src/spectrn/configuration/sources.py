"""Where a config comes from and how it is built: the YAML file (safe, size-capped, with the line of every key),
``SPECTRN_*`` environment variables, ``--set`` and flags, merged in that order with the origin of every value.

Precedence, lowest to highest: field defaults < the YAML file < ``SPECTRN_*`` environment variables <
``--set`` < CLI flags. Environment variables address nested fields with a double underscore:
``SPECTRN_BENCH__CONCURRENCY=8`` sets ``bench.concurrency``; values are parsed as YAML scalars, and a scalar
where a list is expected becomes a one-item list (``8`` -> ``[8]``, ``1,4,16`` -> ``[1, 4, 16]``). Variables
whose first part is not a configuration key (``SPECTRN_CHECKOV``, ``SPECTRN_KIND_CLUSTER``) belong to other
tools and are left alone.

``build_config`` turns every problem into one ``ConfigError`` that also names where the bad value came from:
the file and line, the environment variable, the ``--set`` key or the flag (``Origins``). Checks that pydantic
cannot express run around it: control characters anywhere (before validation), and every name that becomes a
path, a label or a shell word (after validation, through the one rule in ``spectrn.names``).

Values are taken as a person writes them: YAML reads ``plugin_release: 0.2`` or ``compile.cpu=190`` as a
number, and where the field holds text (a string or a choice of strings) the number becomes the text exactly as
written (``_strings_as_written``), from the file, the environment, ``--set`` or a flag alike.
"""

from __future__ import annotations

import copy
import os
import re
import stat
import types
import typing
import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ValidationError

from spectrn.configuration.config import ORIGINS, SpectrnConfig
from spectrn.configuration.origins import (
    Origins,
    PathT,
    dotted_path,
    format_validation_error,
    is_number,
    loc_text,
    validation_hint,
)
from spectrn.configuration.yaml_keys import UniqueKeyLoader
from spectrn.errors import ConfigError
from spectrn.names import check_name

DEFAULT_CONFIG_FILE = "spectrn.yaml"
ENV_PREFIX = "SPECTRN_"
MAX_CONFIG_BYTES = 1_000_000


class _SafeLoader(UniqueKeyLoader):  # duplicate keys refused (spec/yaml_keys.py)
    """SafeLoader that refuses aliases, so a 'billion laughs' file cannot expand in memory."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.constructor.ConstructorError(
                None, None, "YAML aliases are not allowed in spectrn files", event.start_mark
            )
        return super().compose_node(parent, index)


def yaml_value(raw: str, *, what: str = "value") -> Any:
    """A ``--set`` or ``SPECTRN_*`` value parsed as YAML with the file rules (no aliases); text that is not
    valid YAML stays text, so the config's own validation names the field."""
    if raw == "":
        return ""
    try:
        return yaml.load(raw, Loader=_SafeLoader)  # noqa: S506 - _SafeLoader is a SafeLoader
    except yaml.constructor.ConstructorError as e:
        if "aliases" in str(e):
            raise ConfigError(f"{what}: YAML aliases are not allowed", hint="write the value out in full") from None
        return raw
    except yaml.YAMLError:
        return raw
    except RecursionError:
        raise ConfigError(f"{what} is nested too deeply", hint="give a flat value") from None


def _read_yaml_text(path: Path, what: str, max_bytes: int) -> str:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist", hint="check the path") from None
    except OSError as e:
        raise ConfigError(f"{what} {path} cannot be read: {e.strerror}", hint="check the path") from None
    if not stat.S_ISREG(info.st_mode):  # a folder, or a device such as /dev/zero that never ends
        raise ConfigError(f"{what} {path} is not a regular file", hint="give the path of a YAML file")
    size = info.st_size
    if size > max_bytes:
        raise ConfigError(
            f"{what} {path} is {size} bytes, over the {max_bytes}-byte limit", hint="split or trim the file"
        )
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what} {path} is not UTF-8 (byte {e.start})", hint="save it as UTF-8") from None
    except OSError as e:  # a folder, a device, no permission
        raise ConfigError(f"{what} {path} cannot be read: {e.strerror}", hint="give the path of a YAML file") from None


def _yaml_problem(e: yaml.YAMLError, what: str, path: Path) -> ConfigError:
    mark = getattr(e, "problem_mark", None)
    where = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    return ConfigError(f"{what} {path}{where}: malformed YAML: {problem}", hint="fix the YAML syntax")


def load_yaml(path: Path, *, what: str = "file", max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """Read a YAML file safely: size-capped, UTF-8, no aliases; errors name the file and the line."""
    text = _read_yaml_text(path, what, max_bytes)
    try:
        return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - _SafeLoader is a SafeLoader
    except RecursionError:  # a hostile document: thousands of nested [ or {
        raise ConfigError(f"{what} {path} is nested too deeply", hint="flatten the document") from None
    except yaml.YAMLError as e:
        raise _yaml_problem(e, what, path) from None


def load_yaml_with_origins(path: Path, *, what: str = "file") -> tuple[Any, Origins]:
    """``load_yaml`` plus the line of every key, for error messages."""
    data = load_yaml(path, what=what)
    origins = Origins()
    text = _read_yaml_text(path, what, MAX_CONFIG_BYTES)
    try:
        node = yaml.compose(text, Loader=_SafeLoader)  # noqa: S506 - _SafeLoader is a SafeLoader
    except (yaml.YAMLError, RecursionError):  # already reported by load_yaml
        node = None
    if node is not None:
        origins.record_yaml(node, (), str(path))
        origins._by_path.pop((), None)  # the document itself is not a value
    return data, origins


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested dict, creating levels as needed."""
    set_path(data, dotted_path(dotted), value)


def set_path(data: dict[str, Any], path: PathT, value: Any) -> None:
    node = data
    for part in path[:-1]:
        child = node.get(str(part))
        if not isinstance(child, dict):
            child = {}
            node[str(part)] = child
        node = child
    node[str(path[-1])] = value


def _env_items(environ: Mapping[str, str]) -> Iterator[tuple[PathT, str, str]]:
    """(path, raw value, variable name) of each ``SPECTRN_*`` variable that addresses a configuration key."""
    skip = {"SPECTRN_CONFIG", "SPECTRN_HOME"}
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or name in skip:
            continue
        path = tuple(name[len(ENV_PREFIX) :].lower().split("__"))
        if path[0] not in SpectrnConfig.model_fields:  # another tool's setting (SPECTRN_CHECKOV, ...)
            continue
        yield path, raw, name


def env_overrides(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """``SPECTRN_BENCH__CONCURRENCY=8`` -> ``{"bench": {"concurrency": [8]}}``; values parsed as YAML scalars."""
    environ = dict(os.environ) if environ is None else environ
    out: dict[str, Any] = {}
    for path, raw, name in _env_items(environ):
        set_path(out, path, as_list_if_needed(path, yaml_value(raw, what=name)))
    return out


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _list_paths(model: type[BaseModel], prefix: PathT = ()) -> set[PathT]:
    import typing

    out: set[PathT] = set()
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out |= _list_paths(ann, (*prefix, name))
        elif typing.get_origin(ann) is list:
            out.add((*prefix, name))
    return out


def as_list_if_needed(path: PathT, value: Any) -> Any:
    """A scalar where the configuration expects a list becomes a list: ``8`` -> ``[8]``, ``"1,4"`` -> ``[1, 4]``;
    a mapping is walked so ``--set bench={concurrency: 8}`` works too."""
    if isinstance(value, dict):
        return {k: as_list_if_needed((*path, str(k)), v) for k, v in value.items()}
    if path not in _LIST_PATHS or isinstance(value, list) or value is None:
        return value
    if isinstance(value, str) and re.fullmatch(r"[^\[\]{}&*,]+(,[^\[\]{}&*,]+)+", value):
        return [yaml_value(part.strip()) for part in value.split(",")]
    return [value]


_LIST_PATHS: set[PathT] = _list_paths(SpectrnConfig)


def _unwrap(ann: Any) -> Any:
    while typing.get_origin(ann) is typing.Annotated:
        ann = typing.get_args(ann)[0]
    return ann


def _options(ann: Any) -> list[Any]:
    """The members of a union (``str | None`` -> [str]), without None."""
    ann = _unwrap(ann)
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        return [_unwrap(a) for a in typing.get_args(ann) if a is not type(None)]
    return [ann]


def _holds_text_only(ann: Any) -> bool:
    """A field that holds text and nothing else: ``str``, a ``Literal`` of strings, or either with None."""
    options = _options(ann)
    return bool(options) and all(
        a is str or (typing.get_origin(a) is Literal and all(isinstance(x, str) for x in typing.get_args(a)))
        for a in options
    )


def _strings_as_written(ann: Any, value: Any, path: PathT, texts: Mapping[PathT, str]) -> Any:
    """``value`` with every number that stands where ``ann`` holds text replaced by the text it was written as
    (from ``texts``, or the number's shortest form: ``0.2`` -> "0.2", ``190`` -> "190"). Walks models, lists and
    mappings; nothing else changes, so every other problem is still pydantic's to name."""
    if is_number(value):
        return texts.get(path, repr(value)) if _holds_text_only(ann) else value
    for option in _options(ann):
        if isinstance(value, dict) and isinstance(option, type) and issubclass(option, BaseModel):
            fields = option.model_fields
            return {
                k: _strings_as_written(fields[k].annotation, v, (*path, str(k)), texts) if k in fields else v
                for k, v in value.items()
            }
        origin, args = typing.get_origin(option), typing.get_args(option)
        if isinstance(value, list) and origin is list and args:
            return [_strings_as_written(args[0], v, (*path, i), texts) for i, v in enumerate(value)]
        if isinstance(value, dict) and origin is dict and len(args) == 2:
            return {k: _strings_as_written(args[1], v, (*path, str(k)), texts) for k, v in value.items()}
    return value


def _control_chars(data: Any, path: PathT, origins: Origins) -> None:
    """Refuse control characters (and Unicode line separators) in every key and string, naming the field."""

    def bad(text: str) -> str | None:
        for ch in text:
            if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
                return f"U+{ord(ch):04X}"
        return None

    if isinstance(data, dict):
        for k, v in data.items():
            sub = (*path, str(k))
            found = bad(str(k))
            if found:
                raise ConfigError(
                    f"{loc_text(path) or 'the configuration'}: a key contains the control character {found} "
                    f"({origins.describe(sub)})",
                    hint="remove line breaks, tabs and other control characters from keys",
                )
            _control_chars(v, sub, origins)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _control_chars(v, (*path, i), origins)
    elif isinstance(data, str):
        found = bad(data)
        if found:
            raise ConfigError(
                f"{loc_text(path)}: the value contains the control character {found} ({origins.describe(path)})",
                hint=f"remove line breaks, tabs and other control characters from {loc_text(path)}",
            )


def check_config_names(cfg: SpectrnConfig) -> None:
    """Every configured name that becomes a path, a label or a shell word passes ``spectrn.names.check_name``:
    model keys (labels, artifact folders), Hugging Face id parts (paths under the model mount) and the S3
    prefixes and mount path (folders, and the IAM policy's resources)."""

    def name(value: str, field: str, example: str) -> None:
        check_name(value, what=field, source=cfg.origin_of(field), example=example)

    for key in cfg.custom_models:
        name(key, f"custom_models.{key}", "llama-3-8b")
    for field in ("target", "draft"):
        name(getattr(cfg, field), field, "qwen3-1.7b")
    for key in {cfg.target, cfg.draft, *cfg.custom_models}:
        hf_id = cfg.model(key).hf_id
        field = f"custom_models.{key}.hf_id" if key in cfg.custom_models else f"model {key} hf_id"
        parts = hf_id.split("/")
        if len(parts) > 2:
            raise ConfigError(
                f"{field} {hf_id!r} (from {cfg.origin_of(field)}) is not a Hugging Face id",
                hint="write it as organisation/name, e.g. Qwen/Qwen3-32B",
            )
        for part in parts:
            name(part, field, "Qwen3-32B")
    for field in ("s3.models_prefix", "s3.artifacts_prefix", "s3.mount_path"):
        value = getattr(cfg.s3, field.split(".")[1])
        parts = value.strip("/").split("/")
        for part in parts:
            name(part, field, "compiled")


def build_config(
    data: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    *,
    origins: Origins | None = None,
    sources: Mapping[str, str] | None = None,
    texts: Mapping[str, str] | None = None,
) -> SpectrnConfig:
    """Validate file data + environment + overrides (``{"bench.concurrency": [8]}``, applied in order).

    ``origins`` holds where the file's values came from (``load_yaml_with_origins``); ``sources`` names the
    origin of each override (``{"num_speculative_tokens": "flag --window"}``; default ``--set KEY``); ``texts``
    how an override was written (``{"plugin_release": "0.2"}``), for numbers that stand where text belongs.
    Every error names the origin of the value it is about."""
    origins = origins or Origins()
    merged: dict[str, Any] = copy.deepcopy(data or {})
    for path, raw, name in _env_items(dict(os.environ) if environ is None else environ):
        value = as_list_if_needed(path, yaml_value(raw, what=name))
        set_path(merged, path, value)
        origins.record(path, value, f"environment variable {name}", text=raw)
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        path = dotted_path(dotted)
        value = as_list_if_needed(path, value)
        set_path(merged, path, value)
        origins.record(path, value, (sources or {}).get(dotted, f"--set {dotted}"), text=(texts or {}).get(dotted))
    merged = _strings_as_written(SpectrnConfig, merged, (), origins.number_text)
    _control_chars(merged, (), origins)
    try:
        cfg = SpectrnConfig.model_validate(merged, context={ORIGINS: origins})
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, origins), hint=validation_hint(e, origins)) from None
    cfg._origins = origins
    check_config_names(cfg)
    return cfg


def load_config(
    path: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    *,
    sources: Mapping[str, str] | None = None,
    texts: Mapping[str, str] | None = None,
) -> SpectrnConfig:
    """Load ``path`` (or ``$SPECTRN_CONFIG`` or ./spectrn.yaml when present), then apply env and flags."""
    env = dict(os.environ) if environ is None else environ
    explicit = path is not None or "SPECTRN_CONFIG" in env
    if path is None:
        path = Path(env.get("SPECTRN_CONFIG", DEFAULT_CONFIG_FILE))
    data: dict[str, Any] = {}
    origins = Origins()
    if path.exists() or explicit:
        loaded, origins = load_yaml_with_origins(path, what="config file")
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(
                f"config file {path}: top level must be a mapping of keys, got {type(loaded).__name__}",
                hint="see `spectrn init` for the layout",
            )
        data = loaded
    return build_config(data, overrides, env, origins=origins, sources=sources, texts=texts)
