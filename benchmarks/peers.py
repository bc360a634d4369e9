"""spectrn's load generator against its peers, inference-perf and guidellm, on a server with a known schedule.

For every tool, level (1, 16, 64, 256 concurrent streams) and token pattern (``--pattern 1``: one token per
event; ``--pattern 3``: three tokens per decode event, as speculative decoding streams them), a fresh
``tests/doubles/reference_server.py`` is started and the tool runs against it as a subprocess, closed loop,
``max(2*C, 32)`` requests of exactly 128 output tokens. We then compare what the tool REPORTS in its own
output files (p50 TTFT, p50 TPOT) with the truth in the server's ``/log``:

* TTFT, server-side truth: first event write minus request arrival, both on the server's clock. It is the
  same for every tool and excludes everything on the client side of the socket (connect, request upload,
  HTTP parsing before the handler), so every tool reads slightly high against it.
* TTFT, client-send truth: first event write minus the tool's OWN recorded request start (matched to the
  server's request by prompt text; one machine, so clocks agree: ``perf_counter`` is CLOCK_MONOTONIC and
  ``time.time`` the same wall clock in every process). Against it the only error left is the tool's delay
  in reading and time-stamping the first event. Each tool starts its clock at a different point (spectrn:
  before taking a pooled connection; guidellm: when request headers start to be written; inference-perf:
  before ``session.post``), and this truth uses each tool's own start, so it is fair to all of them.
* TPOT: (last event write - first event write) / (tokens - 1), per request, on the server's clock; p50 over
  requests. Compared with the tool's own decode-time-per-token statistic: spectrn ``tpot_s``,
  inference-perf ``time_per_output_token``, guidellm ``inter_token_latency_ms`` (guidellm's own
  ``time_per_output_token_ms`` includes the TTFT and is reported separately).

Client CPU: the tool's whole process tree (``os.wait4`` rusage, which includes its worker processes), and a
20 ms sampler over ``/proc`` that splits it into start-up (before the first request reached the server:
interpreter, imports, tokenizer, data generation) and the rest. ``cpu_us_per_token`` = CPU from the first
request on (streaming + the tool's own result processing and report writing) / tokens streamed;
``stream_cpu_us_per_token`` counts only CPU spent while requests were in flight.

Peers live in their own virtualenvs under ``.venv-peers/`` (never in ``.venv``), pinned below. Both need a
Hugging Face tokenizer; nothing is downloaded from a model hub: ``setup`` trains a small byte-level BPE on
local text with the ``tokenizers`` package (every `` t<N>`` word the reference server streams is exactly one
token, so tokenizer-based counts are exact) and the tools run with ``HF_HUB_OFFLINE=1``.

    .venv/bin/python benchmarks/peers.py setup
    .venv/bin/python benchmarks/peers.py run [--tools spectrn,inference-perf,guidellm] [--levels 1,16,64,256]
                                             [--patterns 1,3] [--tokens 128] [--out DIR]

Writes benchmarks/results/peers.json and benchmarks/results/peers.md; tool outputs and logs go to
benchmarks/results/peers_runs/<stamp>/ (not committed).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from spectrn.errors import BenchError

# the exact-schedule reference server (a test double, kept under tests/)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference import start_reference, stop  # noqa: E402  (this folder is not a package)

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / ".venv-peers"
TOKENIZER = PEERS / "tokenizer"
RESULTS = ROOT / "benchmarks" / "results"
TOOLS = ("spectrn", "inference-perf", "guidellm")
PINS = {"inference-perf": "inference-perf==0.7.0", "guidellm": "guidellm==0.8.1"}
# inference-perf 0.7.0 requires Python >= 3.12; guidellm 0.8.1 runs on 3.11
MIN_PYTHON = {"inference-perf": (3, 12), "guidellm": (3, 10)}
TTFT_S, GAP_S = 0.1, 0.03
SAMPLE_S = 0.02
RUN_TIMEOUT_S = 900.0

TOKENIZER_SCRIPT = r"""
import sys
from pathlib import Path
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

out, text_file = sys.argv[1], sys.argv[2]
words = Path(text_file).read_text(encoding="utf-8").split()
corpus = [" " + " ".join(words[i : i + 50]) for i in range(0, len(words), 50)]
# the reference server streams " t<N>" per token: each must be one token for exact client-side counts
corpus += ["".join(f" t{i}" for i in range(j, j + 100)) for j in range(0, 5000, 100)]
tok = Tokenizer(models.BPE(unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Sequence(
    [pre_tokenizers.Split(Regex(r" ?\S+|\s+"), behavior="isolated"),
     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(
    vocab_size=9000, min_frequency=1, special_tokens=["[UNK]", "<s>", "</s>"],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
)
tok.train_from_iterator(corpus, trainer)
fast = PreTrainedTokenizerFast(
    tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>", eos_token="</s>", model_max_length=8192
)
fast.save_pretrained(out)
bad = [i for i in range(5000) if len(fast(f" t{i}", add_special_tokens=False).input_ids) != 1]
if bad:
    sys.exit(f"tokenizer splits the server's tokens, e.g. ' t{bad[0]}'")
print(f"tokenizer: {tok.get_vocab_size()} entries in {out}")
"""


class PeerError(BenchError):
    """A peer tool is missing or misconfigured."""


# ---- setup ---------------------------------------------------------------------------------------


def venv_python(tool: str) -> Path:
    return PEERS / tool / "bin" / "python"


def find_python(minimum: tuple[int, int]) -> str:
    """An interpreter of at least ``minimum`` (PATH first, then pyenv's versions folder)."""
    cands = [shutil.which(f"python{minimum[0]}.{m}") for m in range(minimum[1], 16)]
    cands += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")), reverse=True)
    cands.append(sys.executable)
    for c in cands:
        if not c:
            continue
        try:
            out = subprocess.run([c, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True)
        except OSError:
            continue
        if out.returncode == 0 and tuple(int(x) for x in out.stdout.split()) >= minimum:
            return c
    raise PeerError(
        f"no Python >= {minimum[0]}.{minimum[1]} found on PATH or in ~/.pyenv/versions",
        hint=f"install one, e.g. pyenv install {minimum[0]}.{minimum[1]}",
    )


def setup() -> None:
    PEERS.mkdir(exist_ok=True)
    for tool, pin in PINS.items():
        py = venv_python(tool)
        if not py.exists():
            base = find_python(MIN_PYTHON[tool])
            print(f"{tool}: creating {PEERS / tool} with {base}", flush=True)
            subprocess.run([base, "-m", "venv", str(PEERS / tool)], check=True)
        print(f"{tool}: pip install {pin}", flush=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", pin], check=True)
    TOKENIZER.mkdir(exist_ok=True)
    subprocess.run(
        [str(venv_python("inference-perf")), "-c", TOKENIZER_SCRIPT, str(TOKENIZER), str(ROOT / "README.md")],
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )


def tool_version(tool: str) -> str:
    if tool == "spectrn":
        from spectrn import __version__

        return __version__
    out = subprocess.run(
        [str(venv_python(tool)), "-m", "pip", "show", tool], capture_output=True, text=True, check=False
    ).stdout
    return next((ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Version:")), "?")


def git_commit() -> str | None:
    """HEAD of the work tree, with ``+dirty`` when spectrn's sources differ from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "src"], cwd=ROOT, capture_output=True)
    except OSError:
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+dirty" if dirty.returncode else "")


# ---- CPU of a process tree -----------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, ...] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    f = raw[raw.rfind(b")") + 2 :].split()
    return tuple(int(x) for x in f[11:15])  # utime stime cutime cstime


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            out += [int(x) for x in Path(task).read_text().split()]
        except OSError:
            pass
    return out


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and all its descendants, including reaped ones (cutime/cstime)."""
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        st = _stat(pid)
        if st is None:
            continue
        total += sum(st)
        todo += _children(pid)
    return total / _TICK


class CpuSampler(threading.Thread):
    """(perf_counter, tree CPU seconds) every SAMPLE_S until stopped."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.samples: list[tuple[float, float]] = []
        self._stop_evt = threading.Event()

    def run(self) -> None:
        while not self._stop_evt.is_set():
            self.samples.append((time.perf_counter(), tree_cpu(self.pid)))
            self._stop_evt.wait(SAMPLE_S)

    def stop(self) -> None:
        self._stop_evt.set()
        self.join(5)

    def at(self, t: float) -> float:
        """Tree CPU at time ``t``, interpolated between the samples around it."""
        s = self.samples
        if not s:
            return 0.0
        if t <= s[0][0]:
            return s[0][1]
        for (t0, c0), (t1, c1) in zip(s, s[1:], strict=False):
            if t0 <= t <= t1:
                return c0 + (c1 - c0) * (t - t0) / (t1 - t0) if t1 > t0 else c1
        return s[-1][1]


# ---- the reference server ------------------------------------------------------------------------


def server_log(base: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{base}/log", timeout=60) as r:
        return list(json.load(r))


# ---- the tools -----------------------------------------------------------------------------------


def spectrn_cmd(base: str, c: int, n: int, tokens: int, out: Path) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "_spectrn",
        "--base",
        base,
        "--concurrency",
        str(c),
        "--requests",
        str(n),
        "--tokens",
        str(tokens),
        "--out",
        str(out),
    ]


def spectrn_child(base: str, c: int, n: int, tokens: int, out: Path) -> None:
    """What ``spectrn bench`` does for one endpoint and one closed-loop level: run, then analyse."""
    import asyncio

    from spectrn.analyze.run import analyze_folder
    from spectrn.loadgen.client import RequestParams
    from spectrn.loadgen.plan import RunPlan
    from spectrn.loadgen.prompts import Prompt, PromptSet, build_schedule
    from spectrn.loadgen.runner import Level, run_bench

    ps = PromptSet(name="bench", prompts=[Prompt(id="p", **{"class": "c"}, text="hello world")])
    schedule = build_schedule(ps, requests=n, warmup=0, seed=0, nonce=f"c{c}")
    run_dir = out / "run"
    plan = RunPlan(
        run_id=f"c{c}",
        out_dir=run_dir,
        endpoints={"ep": base},
        schedule=schedule,
        params=RequestParams(model="ref-model", api="completions", max_tokens=tokens, keep_output=False),
        levels=[Level.closed(c)],
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "prompts.json").write_text(json.dumps({r.index: r.text for r in schedule}))
    asyncio.run(run_bench(plan))
    analyze_folder(run_dir)


def spectrn_results(out: Path) -> dict[str, Any]:
    summary = json.loads((out / "run" / "summary.json").read_text())
    v = summary["levels"][0]["variants"]["ep"]
    texts = {int(k): t for k, t in json.loads((out / "prompts.json").read_text()).items()}
    starts, tpot_last = [], []
    for line in (out / "run" / "requests.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("error") is None:
            starts.append((texts[rec["index"]], "wall", rec["sent_at"]))
            n = sum(rec["chunk_tokens"])
            if n > 1:
                tpot_last.append((rec["chunk_times"][-1] - rec["chunk_times"][0]) / (n - 1))
    return {
        # diagnostic computed here from spectrn's raw records, not reported by spectrn: TPOT ending at the
        # last token's arrival instead of the end of the stream (e2e), as the peers and the truth do
        "diag_tpot_last_token_p50_s": statistics.median(tpot_last) if tpot_last else None,
        "ttft_p50_s": v["ttft_s"]["p50"],
        "tpot_p50_s": v["tpot_s"]["p50"],
        "tpot_name": "tpot_s",
        "itl_p50_s": v["itl_s"]["p50"],
        "itl_name": "itl_s (per token, chunk gap split over its tokens)",
        "output_tokens_p50": v["output_tokens"]["p50"],
        "completed": v["requests"]["completed"],
        "errors": v["requests"]["errors"],
        "starts": starts,
    }


def inference_perf_cmd(base: str, c: int, n: int, tokens: int, out: Path) -> list[str]:
    import yaml

    workers = os.cpu_count() or 1
    cfg = {
        "api": {"type": "completion", "streaming": True},
        "server": {"type": "vllm", "model_name": "ref-model", "base_url": base, "ignore_eos": True},
        "tokenizer": {"pretrained_model_name_or_path": str(TOKENIZER)},
        "data": {
            "type": "random",
            "input_distribution": {"min": 16, "max": 16, "mean": 16, "std_dev": 0, "type": "fixed"},
            "output_distribution": {"min": tokens, "max": tokens, "mean": tokens, "std_dev": 0, "type": "fixed"},
        },
        # default workers (CPU count); per-worker concurrency raised only where the default (100) would cap C
        "load": {
            "type": "concurrent",
            "stages": [{"num_requests": n, "concurrency_level": c}],
            "worker_max_concurrency": max(100, -(-c // workers)),
        },
        "report": {
            "request_lifecycle": {
                "summary": True,
                "per_stage": False,
                "per_request": True,  # for the request start times; the bulky fields are left out
                "per_request_fields": {"request": True, "response": False, "info": False, "response_chunks": False},
            },
            "prometheus": {"summary": False, "per_stage": False},
        },
        "storage": {"local_storage": {"path": str(out / "report")}},
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(yaml.safe_dump(cfg))
    return [str(PEERS / "inference-perf" / "bin" / "inference-perf"), "--config_file", str(out / "config.yaml")]


def inference_perf_results(out: Path) -> dict[str, Any]:
    s = json.loads((out / "report" / "summary_lifecycle_metrics.json").read_text())
    lat = s["successes"]["latency"]
    per = json.loads((out / "report" / "per_request_lifecycle_metrics.json").read_text())
    starts = [
        (json.loads(r["request"])["prompt"], "mono", float(r["start_time"]))
        for r in per
        if r.get("error") in (None, "None")
    ]
    tok = s["successes"].get("output_len") or {}
    return {
        "ttft_p50_s": lat["time_to_first_token"]["median"],
        "tpot_p50_s": lat["time_per_output_token"]["median"],
        "tpot_name": "time_per_output_token",
        "itl_p50_s": lat["inter_token_latency"]["median"],
        "itl_name": "inter_token_latency (per token; tokens of one chunk share its arrival time)",
        "output_tokens_p50": tok.get("median"),
        "completed": s["successes"]["count"],
        "errors": (s.get("failures") or {}).get("count", 0),
        "starts": starts,
    }


def guidellm_cmd(base: str, c: int, n: int, tokens: int, out: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    return [
        str(PEERS / "guidellm" / "bin" / "guidellm"),
        "run",
        "--backend",
        f"kind=openai_http,target={base},model=ref-model,request_format=/v1/completions",
        "--profile",
        f"kind=concurrent,streams={c}",
        "--constraint",
        f"kind=max_requests,count={n}",
        "--data",
        f"kind=synthetic_text,prompt_tokens=16,output_tokens={tokens}",
        "--tokenizer",
        f"kind=huggingface_auto,model={TOKENIZER}",
        "--output",
        f"kind=json,path={out / 'benchmarks.json'}",
        "--disable-console-interactive",
    ]


def guidellm_results(out: Path) -> dict[str, Any]:
    b = json.loads((out / "benchmarks.json").read_text())["benchmarks"][0]
    m = b["metrics"]

    def p50(name: str) -> float | None:
        v = m[name]["successful"]["percentiles"]["p50"]
        return None if v is None else v / 1000.0 if name.endswith("_ms") else v

    starts = [
        (json.loads(r["request_args"])["body"]["prompt"], "wall", r["info"]["timings"]["request_start"])
        for r in b["requests"]["successful"]
    ]
    return {
        "ttft_p50_s": p50("time_to_first_token_ms"),
        "tpot_p50_s": p50("inter_token_latency_ms"),
        "tpot_name": "inter_token_latency_ms ((last - first token) / (tokens - 1))",
        "itl_p50_s": p50("time_per_output_token_ms"),
        "itl_name": "time_per_output_token_ms ((last token - request start) / tokens, includes TTFT)",
        "output_tokens_p50": p50("output_token_count"),
        "completed": len(b["requests"]["successful"]),
        "errors": len(b["requests"]["errored"]) + len(b["requests"]["incomplete"]),
        "starts": starts,
    }


COMMANDS = {"spectrn": spectrn_cmd, "inference-perf": inference_perf_cmd, "guidellm": guidellm_cmd}
PARSERS = {"spectrn": spectrn_results, "inference-perf": inference_perf_results, "guidellm": guidellm_results}


# ---- one run -------------------------------------------------------------------------------------


def run_tool(cmd: list[str], log: Path, env: dict[str, str]) -> tuple[int, float, CpuSampler, float]:
    """Run ``cmd`` in its own process group; returns (exit code, tree CPU seconds, sampler, wall seconds)."""
    t0 = time.perf_counter()
    with log.open("wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    sampler = CpuSampler(proc.pid)
    sampler.start()
    timer = threading.Timer(RUN_TIMEOUT_S, lambda: os.killpg(proc.pid, signal.SIGKILL))
    timer.start()
    try:
        _pid, status, ru = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
        sampler.stop()
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, ru.ru_utime + ru.ru_stime, sampler, time.perf_counter() - t0


def truth_and_match(log: list[dict[str, Any]], starts: list[tuple[str, str, float]]) -> dict[str, Any]:
    done = [e for e in log if e["sent"] and len(e["sent"]) == len(e["offsets"])]
    ttft_server = [e["sent"][0] - e["arrival"] for e in done]
    tpot = [(e["sent"][-1] - e["sent"][0]) / (sum(e["sizes"]) - 1) for e in done]
    by_prompt: dict[str, list[dict[str, Any]]] = {}
    for e in done:
        by_prompt.setdefault(e["prompt"] if isinstance(e["prompt"], str) else json.dumps(e["prompt"]), []).append(e)
    ttft_send, unmatched = [], 0
    for prompt, clock, t in starts:
        cands = by_prompt.get(prompt)
        if not cands:
            unmatched += 1
            continue
        e = cands.pop(0)
        first = e["first_wall"] if clock == "wall" else e["sent"][0]
        ttft_send.append(first - t)
    # in flight at each arrival, as the server saw it
    spans = sorted((e["arrival"], e["sent"][-1]) for e in done)
    inflight = [sum(1 for a, z in spans if a <= t < z) for t, _ in spans]
    return {
        "true_ttft_server_p50_s": statistics.median(ttft_server) if done else None,
        "true_ttft_send_p50_s": statistics.median(ttft_send) if ttft_send else None,
        "true_tpot_p50_s": statistics.median(tpot) if done else None,
        "matched_requests": len(ttft_send),
        "unmatched_requests": unmatched,
        "server_requests": len(done),
        "server_inflight_max": max(inflight) if inflight else 0,
        "tokens": sum(sum(e["sizes"]) for e in done),
        "first_arrival": min(e["arrival"] for e in done) if done else None,
        "last_write": max(e["sent"][-1] for e in done) if done else None,
    }


def pct(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else (a / b - 1.0) * 100.0


def run_one(tool: str, c: int, pattern: str, tokens: int, work: Path) -> dict[str, Any]:
    out = work / f"p{pattern}" / tool / f"c{c}"
    out.mkdir(parents=True, exist_ok=True)
    n = max(2 * c, 32)
    load_before = os.getloadavg()
    server = start_reference(out / "server.log", ttft_s=TTFT_S, gap_s=GAP_S, pattern=pattern)
    base = server.url
    try:
        cmd = COMMANDS[tool](base, c, n, tokens, out)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        rc, cpu, sampler, wall = run_tool(cmd, out / "tool.log", env)
        log = server_log(base)
        (out / "server_log.json").write_text(json.dumps(log))
    finally:
        stop(server)
    load_after = os.getloadavg()
    row: dict[str, Any] = {"tool": tool, "pattern": int(pattern), "concurrency": c, "requests": n, "exit_code": rc}
    row["loadavg_1m"] = [round(load_before[0], 2), round(load_after[0], 2)]
    if rc != 0:
        tail = (out / "tool.log").read_text(errors="replace")[-1500:]
        row["failure"] = f"exit code {rc}; log tail: {tail}"
        return row
    res = PARSERS[tool](out)
    truth = truth_and_match(log, res.pop("starts"))
    startup = sampler.at(truth["first_arrival"]) if truth["first_arrival"] else None
    in_flight = sampler.at(truth["last_write"]) - startup if truth["last_write"] and startup is not None else None
    tok = truth["tokens"]
    row.update(res)
    row.update({k: v for k, v in truth.items() if k not in ("first_arrival", "last_write")})
    row.update(
        {
            "ttft_err_vs_server_pct": pct(res["ttft_p50_s"], truth["true_ttft_server_p50_s"]),
            "ttft_err_vs_send_pct": pct(res["ttft_p50_s"], truth["true_ttft_send_p50_s"]),
            "tpot_err_pct": pct(res["tpot_p50_s"], truth["true_tpot_p50_s"]),
            "cpu_total_s": cpu,
            "cpu_startup_s": startup,
            "cpu_us_per_token": (cpu - startup) / tok * 1e6 if tok and startup is not None else None,
            "stream_cpu_us_per_token": in_flight / tok * 1e6 if tok and in_flight is not None else None,
            # after the last token: the tool's own statistics, report files and shutdown
            "cpu_after_s": cpu - startup - in_flight if startup is not None and in_flight is not None else None,
            "wall_s": wall,
        }
    )
    return row


# ---- report --------------------------------------------------------------------------------------


def fmt(v: Any, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Load generator vs peers (reference server, known schedule)",
        "",
        f"Measured {meta['started']} to {meta['finished']} on {meta['cpus']} CPUs shared with other work; "
        f"1-minute load average {meta['loadavg_min']:.1f} to {meta['loadavg_max']:.1f} during the runs. "
        f"Server: TTFT {TTFT_S * 1e3:.0f} ms, one event every {GAP_S * 1e3:.0f} ms, {meta['tokens']} output "
        "tokens; pattern 3 = three tokens per decode event. Versions: "
        + ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
        + ".",
        "",
        "Errors are of the tool's own reported p50 against the truth from the server's log. TTFT vs server: "
        "truth = first write - arrival on the server (excludes connect and request upload); TTFT vs send: "
        "truth = first write - the tool's own recorded request start. CPU: whole process tree, from the first "
        "request to exit (streaming + result processing) per streamed token; 'in flight' counts only CPU "
        "while requests were streaming; start-up is listed apart.",
        "",
        "| pattern | C | tool | n ok | TTFT p50 ms (true srv / send) | TTFT err vs srv | TTFT err vs send "
        "| TPOT p50 ms (true) | TPOT err | 2nd stat p50 ms | CPU us/token | in flight us/token | start-up CPU s "
        "| after-run CPU s | load 1m |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "failure" in r:
            lines.append(
                f"| {r['pattern']} | {r['concurrency']} | {r['tool']} | failed: exit {r['exit_code']} "
                "| | | | | | | | | | | |"
            )
            continue

        def ms(key: str, spec: str, r: dict[str, Any] = r) -> str:
            v = r.get(key)
            return fmt(None if v is None else v * 1e3, spec)

        lines.append(
            f"| {r['pattern']} | {r['concurrency']} | {r['tool']} | {r['completed']}/{r['requests']} "
            f"| {ms('ttft_p50_s', '.1f')} ({ms('true_ttft_server_p50_s', '.1f')} / "
            f"{ms('true_ttft_send_p50_s', '.1f')}) "
            f"| {fmt(r['ttft_err_vs_server_pct'], '+.1f')}% | {fmt(r['ttft_err_vs_send_pct'], '+.1f')}% "
            f"| {ms('tpot_p50_s', '.3f')} ({ms('true_tpot_p50_s', '.3f')}) "
            f"| {fmt(r['tpot_err_pct'], '+.2f')}% | {ms('itl_p50_s', '.3f')} "
            f"| {fmt(r['cpu_us_per_token'], '.1f')} | {fmt(r['stream_cpu_us_per_token'], '.1f')} "
            f"| {fmt(r['cpu_startup_s'], '.2f')} | {fmt(r['cpu_after_s'], '.2f')} "
            f"| {r['loadavg_1m'][0]:.1f}-{r['loadavg_1m'][1]:.1f} |"
        )
    lines += [
        "",
        "2nd stat: spectrn `itl_s` (per-token ITL, a chunk's gap split over its tokens); inference-perf "
        "`inter_token_latency` (per-token deltas, tokens of one chunk share its arrival time, so 0 inside a "
        "chunk); guidellm `time_per_output_token_ms` ((last token - request start) / tokens, includes TTFT).",
        "",
    ]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> None:
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    setup_hint = "run: .venv/bin/python benchmarks/peers.py setup"
    for t in tools:
        if t not in TOOLS:
            raise PeerError(f"--tools: unknown tool {t!r}", hint=f"choose from {', '.join(TOOLS)}")
        if t != "spectrn" and not venv_python(t).exists():
            raise PeerError(f"{t} is not installed in {PEERS / t}", hint=setup_hint)
    if any(t != "spectrn" for t in tools) and not (TOKENIZER / "tokenizer.json").exists():
        raise PeerError(f"no local tokenizer in {TOKENIZER}", hint=setup_hint)
    levels = [int(x) for x in args.levels.split(",")]
    patterns = [p.strip() for p in args.patterns.split(",")]
    work = RESULTS / "peers_runs" / time.strftime("%Y%m%d-%H%M%S")
    work.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    commit = git_commit()
    rows: list[dict[str, Any]] = []
    # levels run one after another; tools alternate inside a level so slow drift in the machine's load
    # hits all three alike
    for pattern in patterns:
        for c in levels:
            for tool in tools:
                row = run_one(tool, c, pattern, args.tokens, work)
                rows.append(row)
                if "failure" in row:
                    print(f"p{pattern} c={c:4d} {tool:15s} FAILED {row['failure'][:300]}", flush=True)
                    continue
                print(
                    f"p{pattern} c={c:4d} {tool:15s} TTFT {row['ttft_p50_s'] * 1e3:7.2f} ms "
                    f"(srv {fmt(row['ttft_err_vs_server_pct'], '+6.1f')}%, send "
                    f"{fmt(row['ttft_err_vs_send_pct'], '+6.1f')}%) | TPOT {row['tpot_p50_s'] * 1e3:7.3f} ms "
                    f"({fmt(row['tpot_err_pct'], '+6.2f')}%) | CPU {fmt(row['cpu_us_per_token'], '7.1f')} us/tok "
                    f"(in flight {fmt(row['stream_cpu_us_per_token'], '6.1f')}, start-up "
                    f"{fmt(row['cpu_startup_s'], '.2f')} s) | load {row['loadavg_1m']}",
                    flush=True,
                )
    loads = [x for r in rows for x in r["loadavg_1m"]]
    meta = {
        "started": started,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "cpus": os.cpu_count(),
        "loadavg_min": min(loads),
        "loadavg_max": max(loads),
        "tokens": args.tokens,
        "server": {"ttft_s": TTFT_S, "gap_s": GAP_S},
        "versions": {t: tool_version(t) for t in tools},
        "spectrn_commit_at_start": commit,
        "runs_folder": str(work.relative_to(ROOT)),
        "command": " ".join([".venv/bin/python", "benchmarks/peers.py", *sys.argv[1:]]),
    }
    dest: Path = args.out
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "peers.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    (dest / "peers.md").write_text(markdown(rows, meta))
    print(f"wrote {dest / 'peers.json'} and {dest / 'peers.md'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup", help="create .venv-peers/ (pinned peers) and the local tokenizer")
    r = sub.add_parser("run", help="run the comparison")
    r.add_argument("--tools", default=",".join(TOOLS))
    r.add_argument("--levels", default="1,16,64,256")
    r.add_argument("--patterns", default="1,3")
    r.add_argument("--tokens", type=int, default=128)
    r.add_argument("--out", type=Path, default=RESULTS, help="folder for peers.json and peers.md")
    ch = sub.add_parser("_spectrn", help=argparse.SUPPRESS)
    ch.add_argument("--base", required=True)
    ch.add_argument("--concurrency", type=int, required=True)
    ch.add_argument("--requests", type=int, required=True)
    ch.add_argument("--tokens", type=int, required=True)
    ch.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    try:
        if a.cmd == "setup":
            setup()
        elif a.cmd == "run":
            run(a)
        else:
            spectrn_child(a.base, a.concurrency, a.requests, a.tokens, a.out)
    except PeerError as e:
        sys.exit(f"peers: {e}")


if __name__ == "__main__":
    main()
