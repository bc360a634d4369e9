"""run data (moved)"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spectrn.errors import AnalysisError, one_line
from spectrn.run.records import RequestRecord, RunMeta, read_records


@dataclass
class RunData:
    """A run folder read back: metadata, measured (non-warm-up) records, summary and acceptance."""

    run_dir: Path
    meta: RunMeta
    records: list[RequestRecord]
    summary: dict[str, Any] | None
    acceptance: dict[str, Any]

    @property
    def run_id(self) -> str:
        return self.meta.run_id

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.meta.config)

    @property
    def config_label(self) -> str:
        return config_label(self.config)

    @property
    def prompt_classes(self) -> list[str]:
        return sorted({dim_value(r.prompt_class) for r in self.records})

    @property
    def levels(self) -> list[str]:
        return _sorted_levels({dim_value(r.level) for r in self.records})

    @property
    def variants(self) -> list[str]:
        order = {"baseline": 0, "speculative": 1}
        return sorted({r.variant for r in self.records}, key=lambda v: (order.get(v, 2), v))

    def acceptance_for(self, variant: str, level: str) -> dict[str, Any] | None:
        """Acceptance of one variant at one load level: ``acceptance.json`` (keys ``variant@level`` or
        ``variant``, as analyze reads them), else the summary's ``acceptance`` of that variant."""
        value = self.acceptance.get(f"{variant}@{level}", self.acceptance.get(variant))
        if isinstance(value, dict):
            return value
        s = self.summary or {}
        lv = (s.get("levels") or {}).get(level) if isinstance(s.get("levels"), dict) else None
        if lv is None and s.get("level", level) == level:
            lv = s
        acc = ((lv or {}).get("variants") or {}).get(variant, {}) if isinstance(lv, dict) else {}
        acc = acc.get("acceptance") if isinstance(acc, dict) else None
        return acc if isinstance(acc, dict) else None

    @property
    def has_acceptance(self) -> bool:
        return any(self.acceptance_for(v, lv) for v in self.variants for lv in self.levels)

    def time_range(self) -> tuple[float, float]:
        """(first send, last completion) in Unix seconds; falls back to run.json's start/end."""
        if not self.records:
            return self.meta.started_at, self.meta.finished_at or self.meta.started_at
        start = min(r.sent_at for r in self.records)
        end = max(r.sent_at + (r.e2e if r.e2e is not None and math.isfinite(r.e2e) else 0.0) for r in self.records)
        return start, end


def config_section(config: Any, key: str) -> dict[str, Any]:
    """``config[key]`` when it is a mapping (run.json holds the config dump), else an empty one."""
    value = config.get(key) if isinstance(config, dict) else None
    return value if isinstance(value, dict) else {}


def config_label(config: dict[str, Any]) -> str:
    """``<draft>/k<window>`` (``medusa/k<window>`` for Medusa): one value naming the speculative setup."""
    window = config.get("num_speculative_tokens")
    draft = "medusa" if config.get("speculation_mode") == "medusa" else config.get("draft")
    if draft is None and window is None:
        return "default"
    return f"{draft or 'draft'}/k{window if window is not None else '?'}"


def _sorted_levels(levels: Iterable[str]) -> list[str]:
    def key(level: str) -> tuple[str, float, str]:
        m = re.fullmatch(r"([a-z]+)([0-9.]+)", level)
        if m:
            try:
                return (m.group(1), float(m.group(2)), level)
            except ValueError:
                pass
        return ("~", 0.0, level)

    return sorted(set(levels), key=key)


def load_run(run_dir: Path) -> RunData:
    """Read ``run.json``, ``requests.jsonl`` and, when present, ``summary.json`` and ``acceptance.json``."""
    run_dir = Path(run_dir)
    meta_path = run_dir / "run.json"
    if not run_dir.is_dir():
        raise AnalysisError(f"run folder {run_dir} does not exist", hint="pass a folder such as results/<run-id>")
    if not meta_path.exists():
        raise AnalysisError(f"{meta_path} is missing", hint="pass a run folder written by `spectrn bench`")
    try:
        meta = RunMeta.model_validate_json(meta_path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise AnalysisError(
            f"{meta_path} is not valid run metadata: {one_line(e)}", hint="restore run.json, or re-run the bench"
        ) from None
    records = [r for r in read_records(run_dir / "requests.jsonl") if not r.warmup]
    summary = _read_json(run_dir / "summary.json")
    acceptance = _acceptance(_read_json(run_dir / "acceptance.json"))
    return RunData(run_dir, meta, records, summary, acceptance)


def _read_json(path: Path) -> Any:
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise AnalysisError(f"{path} is not valid JSON: {e}", hint="re-run `spectrn analyze` or remove it") from None


def _acceptance(raw: Any) -> dict[str, Any]:
    """``acceptance.json`` as written by loadgen: {variant or "variant@level": {...} | null}."""
    if isinstance(raw, dict) and isinstance(raw.get("variants"), dict):
        raw = raw["variants"]
    return dict(raw) if isinstance(raw, dict) else {}


def dim_value(v: str | None) -> str:
    v = (v or "").strip()
    return v[:1024] if v else "unknown"
