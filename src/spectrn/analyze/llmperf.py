"""llmperf-compatible result files, both ways.

Write: for each variant, ``<variant>/<model>_<in>_<out>_summary.json`` (flat ``results_*`` keys) and
``..._individual_responses.json``, so dashboards and scripts built for llmperf (as the published
experiment's CloudWatch path) keep working. Their ``inter_token_latency_s`` follows llmperf's own
definition (``spectrn.analyze.metrics``); spectrn's summary.json has the correct per-token figures.

Ingest: the result folders of an llmperf run (the ``--engine llmperf`` pod: one folder per variant, or per
test case and variant) become a spectrn run folder (run.json + requests.jsonl), which the same code as any
run then analyzes, reports and publishes. llmperf records no per-event times, so per-token ITL is not
available from it, its token counts come from its own fixed tokenizer, and its responses name no prompt, so
speedups cannot be paired by request.
"""

from __future__ import annotations

import json
import math
import re
import time
from array import array
from pathlib import Path
from typing import Any

from spectrn.analyze.metrics import request_metrics
from spectrn.errors import AnalysisError
from spectrn.run.folder import RunFolder
from spectrn.run.json_doc import load_json
from spectrn.run.records import RequestRecord, RunMeta
from spectrn.run.summary import Provenance
from spectrn.sanitize import file_name, server_label, valid_text

MAX_TOKEN_COUNT = 10_000_000  # a count above this is not a real count (the stream parser's bound, loadgen/stream.py)

LLMPERF_QUANTILES = (25, 50, 75, 90, 95, 99)
VARIANT_FOLDERS = {"base": "baseline", "baseline": "baseline", "sd": "speculative", "speculative": "speculative"}
FIELDS = (
    ("inter_token_latency_s", "results_inter_token_latency_s"),
    ("ttft_s", "results_ttft_s"),
    ("end_to_end_latency_s", "results_end_to_end_latency_s"),
    ("request_output_throughput_token_per_s", "results_request_output_throughput_token_per_s"),
    ("number_input_tokens", "results_number_input_tokens"),
    ("number_output_tokens", "results_number_output_tokens"),
)


def _flat_stats(prefix: str, values: Any) -> dict[str, Any]:
    import numpy as np

    a = np.asarray(values, dtype=float)
    if a.size == 0:
        return {}
    out: dict[str, Any] = {f"{prefix}_quantiles_p{q}": float(np.percentile(a, q)) for q in LLMPERF_QUANTILES}
    out[f"{prefix}_mean"] = float(a.mean())
    out[f"{prefix}_min"] = float(a.min())
    out[f"{prefix}_max"] = float(a.max())
    out[f"{prefix}_stddev"] = float(a.std(ddof=1)) if a.size > 1 else 0.0
    return out


def _safe(name: str) -> str:
    # llmperf names its files so: every run of characters other than letters, digits, "_" and "-" becomes one "-"
    return re.sub(r"-{2,}", "-", re.sub(r"[^A-Za-z0-9_-]+", "-", name)).strip("-") or "model"


def individual_response(rec: RequestRecord, time_scale: float) -> dict[str, Any]:
    m = request_metrics(rec, time_scale)
    n_in = rec.prompt_tokens or 0
    if m is None:
        code = rec.status if rec.status and rec.status != 200 else -1
        return {
            "error_code": code,
            "error_msg": rec.error_msg or rec.error or "",
            "inter_token_latency_s": 0,
            "ttft_s": 0,
            "end_to_end_latency_s": 0,
            "request_output_throughput_token_per_s": 0,
            "number_total_tokens": n_in,
            "number_output_tokens": 0,
            "number_input_tokens": n_in,
        }
    return {
        "error_code": None,
        "error_msg": "",
        "inter_token_latency_s": m.llmperf_itl or 0,
        "ttft_s": m.ttft,
        "end_to_end_latency_s": m.e2e,
        "request_output_throughput_token_per_s": m.throughput_tok_s,
        "number_total_tokens": n_in + m.output_tokens,
        "number_output_tokens": m.output_tokens,
        "number_input_tokens": n_in,
    }


class _VariantWriter:
    """One variant's individual responses streamed to disk, with the columns its summary needs."""

    def __init__(self, folder: RunFolder, variant: str) -> None:
        self.folder = folder
        self.variant = variant
        self.f, self.tmp = folder.open_llmperf_responses(variant)
        self.f.write("[")
        self.count = self.errors = 0
        self.cols: dict[str, array[float]] = {k: array("d") for k, _ in FIELDS}
        self.codes: dict[str, int] = {}
        self.inputs = 0.0
        self.first_send = math.inf
        self.last_end = -math.inf

    def add(self, rec: RequestRecord, row: dict[str, Any]) -> None:
        self.f.write(("\n  " if self.count == 0 else ",\n  ") + json.dumps(row))
        self.count += 1
        self.inputs += row["number_input_tokens"]
        if row["error_code"] is not None:
            self.errors += 1
            self.codes[str(row["error_code"])] = self.codes.get(str(row["error_code"]), 0) + 1
            return
        for k, _ in FIELDS:
            self.cols[k].append(float(row[k]))
        if rec.e2e is not None:
            self.first_send = min(self.first_send, rec.sent_at)
            self.last_end = max(self.last_end, rec.sent_at + rec.e2e)

    def close(self, meta: RunMeta, model: str, out_tokens: int, time_scale: float) -> list[Path]:
        self.f.write("\n]\n")
        self.f.close()
        mean_in = int(self.inputs / self.count)  # a writer exists once its variant has a record: count >= 1
        stem = f"{model}_{mean_in}_{out_tokens}"
        summary: dict[str, Any] = {
            "version": "spectrn-llmperf-compatible",
            "name": f"{stem}_summary",  # llmperf's name: the summary file's, without ".json"
            "model": meta.model,
            "mean_input_tokens": mean_in,
            "mean_output_tokens": out_tokens,
            "num_concurrent_requests": None,
            "note": "inter_token_latency uses llmperf's definition (divides by SSE events); see summary.json itl_s",
        }
        for key, prefix in FIELDS:
            summary.update(_flat_stats(prefix, self.cols[key]))
        ok = self.count - self.errors
        total_out = sum(self.cols["number_output_tokens"])
        duration = (self.last_end - self.first_send) / time_scale  # -inf when none completed: the rates are 0
        summary.update(
            results_num_requests_started=self.count,
            results_error_rate=self.errors / self.count,
            results_number_errors=self.errors,
            results_error_code_frequency=json.dumps(self.codes),
            results_mean_output_throughput_token_per_s=total_out / duration if duration > 0 else 0.0,
            results_num_completed_requests=ok,
            results_num_completed_requests_per_min=ok / duration * 60 if duration > 0 else 0.0,
        )
        return self.folder.write_llmperf(self.variant, stem, summary, self.tmp)


def write_llmperf_files(folder: RunFolder) -> list[Path]:
    """llmperf-compatible files of every variant, in one pass over the records (real-time figures)."""
    meta = folder.meta
    scale = meta.provenance.time_scale if meta.provenance.time_scale > 0 else 1.0
    writers: dict[str, _VariantWriter] = {}
    try:
        for rec in folder.records():
            w = writers.get(rec.variant)
            if w is None:
                w = writers[rec.variant] = _VariantWriter(folder, rec.variant)
            w.add(rec, individual_response(rec, scale))
    except BaseException:
        for w in writers.values():
            w.f.close()
            w.tmp.unlink(missing_ok=True)
        raise
    # the stem's other parts and suffix take at most 55 bytes: the name stays within NAME_MAX (255)
    model = file_name(_safe(str(meta.model or "model")), 200)
    out_tokens = int(meta.max_tokens or 0)
    written: list[Path] = []
    for w in writers.values():
        written += w.close(meta, model, out_tokens, scale)
    return written


# ---- ingest --------------------------------------------------------------------------------------


def _read_rows(path: Path) -> list[dict[str, Any]]:
    try:
        rows = load_json(path, error=AnalysisError)
    except (OSError, ValueError) as e:
        raise AnalysisError(f"{path}: not a readable llmperf result file: {e}") from None
    if not isinstance(rows, list):
        raise AnalysisError(f"{path}: expected a list of responses", hint="point at llmperf's --results-dir")
    return [r for r in rows if isinstance(r, dict)]


def _num(row: dict[str, Any], key: str, where: str) -> float:
    v = row.get(key)
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    raise AnalysisError(
        f"{where}: field {key!r} is {v!r}, not a number", hint="the llmperf file is damaged or from another tool"
    )


def _records(folder: Path, variant: str, prompt_class: str, level: str, start: float) -> list[RequestRecord]:
    files = sorted(folder.glob("*_individual_responses.json"))  # at least one: ingest's variant_dirs kept the folder
    out = []
    for i, row in enumerate(_read_rows(files[0])):
        where = f"{files[0]} response {i}"
        ident = {"variant": variant, "index": i, "prompt_id": f"{prompt_class}-{i}", "prompt_class": prompt_class,
                 "level": level, "sent_at": start}  # fmt: skip
        code = row.get("error_code")
        if code:
            status = code if isinstance(code, int) and not isinstance(code, bool) and 100 <= code <= 599 else None
            # the server's message as data: a lone surrogate (from a JSON escape) kept as its escape
            msg = valid_text(str(row.get("error_msg") or "")[:300])
            error = f"http_{server_label(str(code), 40)}"
            out.append(RequestRecord(**ident, status=status, error=error, error_msg=msg))
            continue
        ttft, e2e = _num(row, "ttft_s", where), _num(row, "end_to_end_latency_s", where)
        itl, n_out = _num(row, "inter_token_latency_s", where), _num(row, "number_output_tokens", where)
        n_in = row.get("number_input_tokens")
        problem = _impossible(ttft, e2e, itl, n_out, n_in)
        if problem is not None:  # a classified record, never a negative TPOT or an overflow in a clean run
            out.append(RequestRecord(**ident, status=200, error="bad_response", error_msg=f"{where}: {problem}"))
            continue
        out.append(
            RequestRecord(
                **ident,
                ttft=ttft,
                e2e=e2e,
                completion_tokens=int(n_out),
                prompt_tokens=int(n_in) if isinstance(n_in, int | float) and n_in > 0 else None,
                status=200,
                token_source="text",
                llmperf_itl=itl,
            )
        )
    return out


def _impossible(ttft: float, e2e: float, itl: float, n_out: float, n_in: object) -> str | None:
    """Why a successful row cannot describe a real response (times and counts that contradict each other), or None."""
    if ttft < 0 or e2e <= 0 or itl < 0:
        return f"a negative time (ttft_s {ttft!r}, end_to_end_latency_s {e2e!r}, inter_token_latency_s {itl!r})"
    if ttft > e2e:
        return f"ttft_s {ttft!r} is after the end (end_to_end_latency_s {e2e!r})"
    if n_out != int(n_out) or not 1 <= n_out <= MAX_TOKEN_COUNT:
        return f"number_output_tokens {n_out!r} is not a count in 1..{MAX_TOKEN_COUNT}"
    if n_in is not None and (
        isinstance(n_in, bool)
        or not isinstance(n_in, int | float)
        or not math.isfinite(n_in)
        or n_in != int(n_in)
        or not 0 <= n_in <= MAX_TOKEN_COUNT
    ):
        return f"number_input_tokens {server_label(repr(n_in), 60)} is not a count in 0..{MAX_TOKEN_COUNT}"
    return None


def ingest(results_dir: Path, run_dir: Path, *, run_id: str | None = None, meta: RunMeta | None = None) -> RunFolder:
    """Turn llmperf result folders into the run folder ``run_dir`` (run.json + requests.jsonl).

    Layouts: ``results_dir/<variant>/`` (``base``/``sd`` or ``baseline``/``speculative``), or the published
    sample's ``results_dir/<test case>/<variant>/``; each with llmperf's ``*_individual_responses.json``.
    """
    from spectrn.names import check_name

    if not results_dir.is_dir():
        raise AnalysisError(f"{results_dir} is not a folder", hint="pass the folder holding one sub-folder per variant")

    def variant_dirs(folder: Path) -> dict[str, Path]:
        out = {}
        for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
            if any(sub.glob("*_individual_responses.json")):
                out[VARIANT_FOLDERS.get(sub.name, sub.name)] = sub
        return out

    cases = {"llmperf": variant_dirs(results_dir)}
    if not cases["llmperf"]:
        cases = {sub.name: variant_dirs(sub) for sub in sorted(p for p in results_dir.iterdir() if p.is_dir())}
        cases = {k: v for k, v in cases.items() if v}
    if not cases:
        raise AnalysisError(
            f"{results_dir} holds no llmperf result folders",
            hint="pass the folder with one sub-folder per variant (or per test case), each holding llmperf's files",
        )
    base = meta or RunMeta(run_id=run_id or results_dir.name, spectrn_version="", started_at=time.time())
    level = base.levels[0] if base.levels else f"c{base.config.bench.concurrency[0]}"
    records: list[RequestRecord] = []
    for case, variants in cases.items():
        cls = check_name(case, what="llmperf test case", source=str(results_dir))
        for variant, folder in variants.items():
            check_name(variant, what="llmperf variant folder", source=str(folder))
            records += _records(folder, variant, cls, level, base.started_at)
    out = RunFolder(run_dir)
    out.write_records(records)  # re-ingest replaces what an earlier ingest wrote
    from spectrn import __version__

    meta_out = base.model_copy(
        update={
            "run_id": run_id or base.run_id,
            "spectrn_version": base.spectrn_version or __version__,
            "engine": "llmperf",
            "finished_at": base.finished_at or base.started_at,
            "levels": [level],
            "provenance": base.provenance.model_copy(update={"engine": "llmperf"})
            if meta
            else Provenance(runtime="llmperf", engine="llmperf"),
            "notes": [*base.notes, f"ingested from llmperf results in {results_dir.name}: no per-event times "
                      "(per-token ITL unavailable), llmperf's own token counts, speedups unpaired"],
        }
    )  # fmt: skip
    out.write_meta(meta_out)
    return RunFolder.open(run_dir)
