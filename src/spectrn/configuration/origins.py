"""Where each configuration value came from, and problems named by it: ``Origins``, the cross-field ``FieldError``
and the one-line rendering of a validation error with each value's origin and fix."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import ValidationError

PathT = tuple[str | int, ...]


class Origins:
    """Where each configuration value came from: ``("bench", "concurrency") -> "flag --concurrency"``.

    A later layer that sets a path replaces the origin of the path and of everything below it."""

    def __init__(self) -> None:
        self._by_path: dict[PathT, str] = {}
        # the text a number was written as (``0.20`` stays "0.20" where a field holds text)
        self.number_text: dict[PathT, str] = {}

    def record(self, path: PathT, value: Any, source: str, *, text: str | None = None) -> None:
        """``value`` set at ``path`` by ``source``; ``text``: how a scalar value was written, when known."""
        n = len(path)
        for p in [p for p in self._by_path if p[:n] == path]:
            del self._by_path[p]
        for p in [p for p in self.number_text if p[:n] == path]:
            del self.number_text[p]
        self._mark(path, value, source)
        if text is not None and is_number(value):
            self.number_text[path] = text.strip()

    def _mark(self, path: PathT, value: Any, source: str) -> None:
        self._by_path[path] = source
        if isinstance(value, dict):
            for k, v in value.items():
                self._mark((*path, str(k)), v, source)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self._mark((*path, i), v, source)

    def record_yaml(self, node: yaml.Node, path: PathT, file: str) -> None:
        """Origins of a composed YAML document: every key and item with its own line."""
        self._by_path[path] = f"{file} line {node.start_mark.line + 1}"
        if isinstance(node, yaml.ScalarNode) and node.tag in _NUMBER_TAGS:
            self.number_text[path] = str(node.value)
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    sub = (*path, str(key_node.value))
                    self.record_yaml(value_node, sub, file)
                    self._by_path[sub] = f"{file} line {key_node.start_mark.line + 1}"
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.record_yaml(item, (*path, i), file)

    def find(self, path: PathT) -> str | None:
        """Where ``path``'s value came from: its own origin or its nearest parent's; else the origins of the keys set
        under it (``--set neuron_driver.versions=...`` sets neuron_driver)."""
        for n in range(len(path), 0, -1):
            found = self._by_path.get(path[:n])
            if found is not None:
                return found
        below = dict.fromkeys(src for p, src in self._by_path.items() if len(p) > len(path) and p[: len(path)] == path)
        return "; ".join(below) or None

    def describe(self, path: PathT) -> str:
        found = self.find(path)
        return f"from {found}" if found else "the default"

    def describe_fields(self, fields: tuple[str, ...] | list[str]) -> str:
        """``from flag --window`` for one user-set field; ``draft from ...; target from ...`` for several."""
        found = [(f, self.find(dotted_path(f))) for f in fields]
        user = [(f, src) for f, src in found if src]
        if not user:
            return "the default" if len(fields) == 1 else "all defaults"
        if len(user) == 1 and user[0][0] == fields[0]:
            return f"from {user[0][1]}"
        return "; ".join(f"{f} from {src}" for f, src in user)


_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def dotted_path(dotted: str) -> PathT:
    return tuple(dotted.split("."))


class FieldError(ValueError):
    """A cross-field problem: ``fields`` (dotted, the first one blamed) and the fix.

    pydantic keeps the exception in the error's context, so ``build_config`` can look up where each field's
    value came from and give the rule's own fix instead of a generic one."""

    def __init__(self, message: str, *, fields: tuple[str, ...], fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields
        self.fix = fix


def loc_text(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc)


def flag_of(origins: Origins | None, path: PathT) -> str | None:
    """The command-line flag a value came from (``--mode``), or None when it came from elsewhere."""
    found = origins.find(path) if origins else None
    return found.removeprefix("flag ") if found and found.startswith("flag ") else None


def format_validation_error(err: ValidationError, origins: Origins | None = None) -> str:
    """One line per problem, each naming the field path (and, with ``origins``, where its value came from).

    A value given by a command-line flag is named by that flag first (``--mode: ...``), the config key after."""
    lines = []
    for e in err.errors():
        loc = loc_text(e["loc"])
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, FieldError):
            text = cause.message
            where = origins.describe_fields(cause.fields) if origins else ""
            blamed = cause.fields[0]
        else:
            msg = e["msg"].removeprefix("Value error, ")
            if e["type"] == "extra_forbidden":
                msg = "unknown key (misspelt?); see `spectrn init` for the valid keys"
            text = f"{loc}: {msg}" if loc else msg
            where = origins.describe(tuple(e["loc"])) if origins else ""
            blamed = loc
        flag = flag_of(origins, dotted_path(blamed)) if blamed else None
        if flag and text.startswith(f"{blamed}: "):
            text = f"{flag}: {text.removeprefix(f'{blamed}: ')} (config key {blamed})"
            where = "" if where == f"from flag {flag}" else where
        lines.append(f"{text} ({where})" if where else text)
    return "; ".join(lines)


def validation_hint(err: ValidationError, origins: Origins | None = None) -> str:
    """The fix for the first problem: the rule's own fix, a spelling check for unknown keys, else the values
    (named by the flag when a flag gave the value)."""
    first = err.errors()[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        if cause.fix:
            return cause.fix
        flag = flag_of(origins, dotted_path(cause.fields[0]))
        if flag:
            return f"change {flag}; `spectrn config-reference` lists the valid values of {cause.fields[0]}"
        return f"change {cause.fields[0]}; `spectrn config-reference` lists its valid values"
    loc = loc_text(first["loc"]) or "the configuration"
    if first["type"] == "extra_forbidden":
        return "check the key's spelling; `spectrn config-reference` lists every valid key"
    flag = flag_of(origins, tuple(first["loc"])) if first["loc"] else None
    if flag:
        expected = (first.get("ctx") or {}).get("expected")
        if first["type"] == "literal_error" and expected:
            return f"give {flag} one of {expected}"
        return f"change {flag}; `spectrn config-reference` lists the valid values of {loc}"
    return f"change {loc}; `spectrn config-reference` lists its valid values"
