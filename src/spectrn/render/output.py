"""Rendered objects -> YAML: multi-document text for ``kubectl apply -f -``, or one file per object (``render -o``).

A reader of the YAML gets a comment where they must act (an AWS identity to attach, a placeholder bucket) and
each pod's Pod Security Standards level; files are numbered in apply order and written atomically.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from spectrn.errors import ConfigError


class _Dumper(yaml.SafeDumper):
    """Block literals for multi-line strings (scripts, config and prompt files stay readable)."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def _notes(obj: Mapping[str, Any]) -> list[str]:
    """Comments for a reader of the YAML: what each pod's security level is, what to fill in."""
    kind, meta = obj["kind"], obj["metadata"]
    if kind == "ServiceAccount" and "eks.amazonaws.com/role-arn" not in meta.get("annotations", {}):
        return [
            "AWS identity: set service_accounts.*_role_arn to render the IRSA annotation",
            "eks.amazonaws.com/role-arn, or create an EKS Pod Identity association for this ServiceAccount.",
        ]
    if kind in ("Deployment", "Job"):
        ctx = obj["spec"]["template"]["spec"].get("securityContext", {})
        level = "restricted" if ctx.get("runAsNonRoot") else "baseline (root in the Neuron DLC, /dev/shm, S3 volume)"
        from spectrn.configuration.neuron_host import beyond_baseline  # capabilities.add may take the pod past baseline

        caps = [a for c in obj["spec"]["template"]["spec"]["containers"]
                for a in (c.get("securityContext") or {}).get("capabilities", {}).get("add", [])]  # fmt: skip
        if beyond_baseline(caps):
            level = f"privileged (capabilities.add: {', '.join(beyond_baseline(caps))})"
        return [f"Pod Security Standards level: {level}."]
    if kind == "PersistentVolume" and "REPLACE" in str(obj["spec"].get("csi", {}).get("volumeAttributes", {})):
        return ["Placeholder bucket: set s3.bucket to the bucket holding your weights and compiled artifacts."]
    return []


def to_yaml(objects: Iterable[Mapping[str, Any]]) -> str:
    """Multi-document YAML, pipeable to ``kubectl apply -f -``, with a comment where a reader must act."""
    docs = []
    for o in objects:
        notes = "".join(f"# {line}\n" for line in _notes(o))
        docs.append(notes + yaml.dump(dict(o), Dumper=_Dumper, sort_keys=False, width=10_000, allow_unicode=True))
    return "---\n" + "---\n".join(docs) if docs else ""


def object_filename(index: int, obj: Mapping[str, Any]) -> str:
    """``NN-kind-name.yaml``: the number keeps ``kubectl apply -f DIR`` in dependency order."""
    kind = re.sub(r"[^a-z0-9]+", "-", str(obj["kind"]).lower()).strip("-")
    name = re.sub(r"[^a-z0-9.-]+", "-", str(obj["metadata"]["name"]).lower()).strip("-.")
    return f"{index:02d}-{kind}-{name or 'object'}.yaml"


def output_folder(path: Path) -> Path:
    """The folder ``render -o`` writes into, created if needed. It is the user's chosen path, so ``..`` is
    fine; what is refused is a path that exists and is not a folder."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"render output folder {path} exists and is not a folder", hint="choose another path")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(
            f"render output folder {path} cannot be created: {e.strerror}", hint="check permissions"
        ) from None
    return path


def write_objects(objects: Iterable[Mapping[str, Any]], out_dir: Path) -> list[Path]:
    """One file per object directly inside ``out_dir`` (atomic writes); returns the paths written. File names
    come from ``object_filename`` (no separators), and each is checked to land in the folder itself."""
    from spectrn.paths import atomic_write_text

    folder = output_folder(out_dir)
    real = folder.resolve()
    written = []
    for i, obj in enumerate(objects, start=1):
        path = folder / object_filename(i, obj)
        if path.resolve().parent != real:  # a symlink planted under the file's name would lead elsewhere
            raise ConfigError(f"{path} does not lead into {folder}", hint="remove it, or choose an empty folder")
        atomic_write_text(path, to_yaml([obj]))
        written.append(path)
    return written
