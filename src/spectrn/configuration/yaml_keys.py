"""A YAML loader that refuses a mapping with the same key twice, naming the key and both lines.

YAML 1.2 requires the keys of a mapping to be unique, but PyYAML keeps the last value of a repeated key and says
nothing: a second ``bench:`` block would silently replace the first, and the run would measure a configuration
no one wrote. spectrn's YAML readers (config files, ``--set`` values, prompt files) load through this class.
"""

from __future__ import annotations

from typing import Any

import yaml


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` whose mappings refuse a repeated key (a ``ConstructorError`` at its second line)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], Any] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    continue  # a complex key: SafeLoader refuses it as unhashable anyway
                key = (key_node.tag, key_node.value)
                if key in first:
                    raise yaml.constructor.ConstructorError(
                        None,
                        None,
                        f"duplicate key {key_node.value[:80]!r} (first on line {first[key].line + 1}); YAML keys "
                        "must be unique: keep one",
                        key_node.start_mark,
                    )
                first[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)
