"""Templates -> checked Kubernetes objects: the Jinja environment, spectrn's labels, the check of every object.

The shape of every object lives in ``manifests/*.yaml.j2``. Templates render with ``StrictUndefined``; the
output is parsed back and checked (kind, apiVersion, name, spectrn's labels) before anyone uses it, so a
template mistake is a ``RenderError`` here rather than a confusing apply failure later.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from spectrn.configuration.config import SpectrnConfig
from spectrn.errors import RenderError

if TYPE_CHECKING:
    import jinja2

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_COMPONENT = "spectrn.io/component"


def _template_env(folder: Path) -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # JSON is valid YAML flow syntax: every value computed in Python enters a template through this filter,
    # so quoting can never go wrong.
    env.filters["j"] = lambda v: json.dumps(v, ensure_ascii=False)
    return env


def _labels(cfg: SpectrnConfig, component: str, **extra: str) -> dict[str, str]:
    labels = {
        LABEL_MANAGED_BY: "spectrn",
        "app.kubernetes.io/part-of": "spectrn",
        LABEL_COMPONENT: component,
        "spectrn.io/namespace": cfg.namespace,
    }
    labels.update(extra)
    return labels


def _check(objects: list[Any], source: str) -> list[dict[str, Any]]:
    out = []
    for i, obj in enumerate(objects):
        if obj is None:
            continue
        where = f"{source} document {i + 1}"
        if not isinstance(obj, dict):
            raise RenderError(f"{where} is a {type(obj).__name__}, not a Kubernetes object")
        for key in ("apiVersion", "kind"):
            if not isinstance(obj.get(key), str) or not obj[key]:
                raise RenderError(f"{where} has no {key}")
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise RenderError(f"{where} ({obj['kind']}) has no metadata.name")
        labels = meta.get("labels") or {}
        if labels.get(LABEL_MANAGED_BY) != "spectrn" or LABEL_COMPONENT not in labels:
            raise RenderError(f"{where} ({obj['kind']} {meta['name']}) lacks spectrn's labels")
        out.append(obj)
    return out


class _Renderer:
    def __init__(self, cfg: SpectrnConfig) -> None:
        from spectrn.paths import data_dir

        try:
            folder = data_dir("manifests")
        except FileNotFoundError as e:
            raise RenderError(str(e), hint="reinstall spectrn; the wheel ships spectrn/manifests") from None
        self.cfg = cfg
        self.env = _template_env(folder)

    def render_text(self, template: str, **ctx: Any) -> str:
        import jinja2

        try:
            return self.env.get_template(template).render(cfg=self.cfg, **ctx)
        except jinja2.UndefinedError as e:
            raise RenderError(f"template {template}: {e.message}", hint="this is a bug in spectrn's manifests") from e
        except jinja2.TemplateError as e:
            raise RenderError(f"template {template}: {e}", hint="this is a bug in spectrn's manifests") from e

    def render(self, template: str, **ctx: Any) -> list[dict[str, Any]]:
        text = self.render_text(template, **ctx)
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as e:
            raise RenderError(f"template {template} produced invalid YAML: {e}") from None
        return _check(docs, template)
