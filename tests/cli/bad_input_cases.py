"""The bad-input matrix: every command with missing, malformed, contradictory or hostile input.

One list, ``CASES``, drives both the test (``test_rel_bad_input.py``) and the table in ``docs/bad-input.md``.
Regenerate the document after changing the list:

    .venv/bin/python tests/cli/bad_input_cases.py > docs/bad-input.md

Each case runs in a folder prepared by ``make_inputs`` (file names below refer to it), with a fake
Kubernetes API and no AWS credentials. Expected: the documented exit code, exactly one error line
``Type: cause (fix: ...)`` (Click usage errors: ``Usage error: ...``) containing ``expect``, and no new
file anywhere in the folder (nothing half-written).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

if __name__ == "__main__":  # run as a script to write the doc: the tests folder is not on the path then
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support import minimal_record  # noqa: E402

DEAD = "http://127.0.0.1:9"  # the discard port: nothing listens there on a test machine
EP = ("--endpoint", f"baseline={DEAD}")
ID = ("--run-id", "r")


@dataclass(frozen=True)
class Case:
    command: str
    what: str
    argv: tuple[str, ...]
    code: int
    expect: str


def _c(what: str, argv: str | tuple[str, ...], code: int, expect: str) -> Case:
    args = tuple(argv.split()) if isinstance(argv, str) else argv
    command = " ".join(args[:2]) if args[0] in ("sim", "kind", "twin") else args[0]
    return Case(command, what, args, code, expect)


CASES: list[Case] = [
    # ---- config files: shared by every command that takes --config ----
    _c("YAML alias (billion-laughs bomb)", "render -c alias.yaml", 2, "YAML aliases are not allowed"),
    _c("YAML nested 5000 levels deep", "render -c deep.yaml", 2, "nested too deeply"),
    _c("config file over 1 MB", "render -c huge.yaml", 2, "over the 1000000-byte limit"),
    _c("unknown (misspelt) key", "render -c unknown.yaml", 2, "bench.requets: unknown key"),
    _c(
        "pricing.region without a built-in price, and no price given",
        ("render", "--set", "pricing.region=eu-west-1"),
        2,
        "pricing.region: no built-in price for trn2.48xlarge in 'eu-west-1'",
    ),
    _c(
        "the same key twice (a second bench:)",
        "render -c dup.yaml",
        2,
        "line 3 column 1: malformed YAML: duplicate key 'bench' (first on line 1)",
    ),
    _c("the same nested key twice", "render -c dup_nested.yaml", 2, "duplicate key 'requests' (first on line 2)"),
    _c("config not UTF-8", "render -c latin1.yaml", 2, "is not UTF-8"),
    _c("config is a list, not a mapping", "render -c list.yaml", 2, "top level must be a mapping"),
    _c("config file missing", "render -c missing.yaml", 2, "does not exist"),
    _c("malformed YAML", "render -c broken.yaml", 2, "malformed YAML"),
    _c("--set without '='", "render --set nonsense", 2, "is not KEY=VALUE"),
    _c(
        "--set value with YAML aliases",
        ("render", "--set", "bench.concurrency=[&a [1], *a]"),
        2,
        "--set bench.concurrency: YAML aliases are not allowed",
    ),
    _c(
        "--set value nested 5000 deep",
        ("render", "--set", "bench.concurrency=" + "[" * 5000 + "]" * 5000),
        2,
        "--set bench.concurrency is nested too deeply",
    ),
    _c("--set wrong type", "render --set bench.requests=abc", 2, "bench.requests: Input should be a valid integer"),
    _c("unknown draft model", "render --draft nosuch", 2, "draft: unknown model 'nosuch'"),
    _c("draft not smaller than target", "render --draft qwen3-32b", 2, "is not smaller than target"),
    _c("window 0", "render --window 0", 2, "--window: 0 is outside 1..32 (config key num_speculative_tokens)"),
    _c("window enormous", "render --window 1000000", 2, "is outside 1..32"),
    _c("namespace with '/' and '..'", "render --set namespace=../etc", 2, "namespace: must be a DNS-1123 label"),
    _c("--only not a service", "render --only both", 2, "--only 'both' is not a service"),
    _c("run id with '..'", "render --run-id ../x", 2, "run id '../x' (from --run-id) is not usable"),
    _c(
        "output folder is a file",
        "render -o spectrn.yaml",
        2,
        "render output folder spectrn.yaml exists and is not a folder",
    ),
    _c("load Job option without --job", "render --engine llmperf", 2, "--engine applies to the load Job"),
    _c(
        "control character in a value",
        ("render", "--set", 'namespace="a\\nb"'),
        2,
        "namespace: the value contains the control character U+000A (from --set namespace)",
    ),
    _c(
        "custom model key that climbs out",
        ("render", "--set", "custom_models={../x: {hf_id: a/b, params_b: 1, tokenizer: t, vocab_size: 1}}"),
        2,
        "custom_models.../x '../x' (from --set custom_models) is not a safe name",
    ),
    _c(
        "wildcard artifacts prefix (widens the S3 policy)",
        "render --s3-policy --set s3.artifacts_prefix=*",
        2,
        "s3.artifacts_prefix '*' (from --set s3.artifacts_prefix) is not a safe name",
    ),
    _c("artifacts prefix over the weights", "render --set s3.artifacts_prefix=models", 2, "overlaps s3.models_prefix"),
    _c(
        "vanilla speculation on the Neuron fork", "render --set speculation_mode=vanilla", 2, "reads only fused outputs"
    ),
    _c("EAGLE with a plain draft", "render --set speculation_mode=eagle", 2, "needs an EAGLE draft"),
    _c("Medusa (on any server)", "render --set speculation_mode=medusa", 2, "runs on no vLLM Neuron server"),
    _c(
        "Neuron timeouts on the legacy fork",
        "render --set neuron_timeout_s=1200",
        2,
        "neuron_timeout_s: vllm_dialect 'legacy-neuron' has no documented compile/execute timeout variables",
    ),
    _c(
        "scheduling mode that is not a choice",
        "render --set scheduling=async",
        2,
        "scheduling: Input should be 'same' or 'server-default'",
    ),
    _c(
        "every capability added to the vLLM container",
        "render --set capabilities.add=[ALL]",
        2,
        "capabilities.add: ALL would give the container every capability",
    ),
    _c(
        "capability with the CAP_ prefix",
        "render --set capabilities.add=[CAP_SYS_ADMIN]",
        2,
        "Kubernetes names capabilities without the CAP_ prefix",
    ),
    _c(
        "host driver version that is not a version",
        "render --set neuron_driver.versions=[2.30.x]",
        2,
        "neuron_driver.versions: '2.30.x' is not a driver version",
    ),
    _c(
        "host driver selector without a DRA claim",
        ("render", "--set", "resources_mode=device-plugin", "--set", "neuron_driver.versions=[2.30.2.0]"),
        2,
        "neuron_driver: a driver-version selector needs a DRA claim",
    ),
    _c(
        "draft model on the vllm-neuron plugin",
        "render --set vllm_dialect=vllm-neuron",
        2,
        "is not supported by vllm_dialect 'vllm-neuron'",
    ),
    _c(
        "spectrn image without a registry",
        "render --job --set s3.bucket=models",
        2,
        "spectrn_image: 'spectrn:0.1.0' (the default) names no registry",
    ),
    _c("unknown load engine", "render --engine locust", 2, "--engine 'locust'"),
    _c("IAM policy from a bad config", "render --iam-policy -c unknown.yaml", 2, "unknown key"),
    # ---- init ----
    _c("config file already exists", "init", 2, "already exists"),
    _c("unknown preset", "init --preset qwen3-32b-eagle fresh.yaml", 2, "--preset: unknown preset 'qwen3-32b-eagle'"),
    # ---- bench / loadgen: flags, endpoints, prompts, paths ----
    _c("endpoint not NAME=URL", "bench --endpoint nourl", 2, "is not NAME=URL"),
    _c("endpoint not http(s)", "bench --endpoint baseline=ftp://x", 2, "is not an http(s) URL"),
    _c("endpoint without a host", "bench --endpoint baseline=http:///v1", 2, "is not an http(s) URL"),
    _c("same endpoint name twice", ("bench", *EP, *EP), 2, "given twice"),
    _c("unreachable endpoint", ("bench", *EP, *ID), 4, "endpoint baseline (http://127.0.0.1:9) is unreachable"),
    _c("negative request count", ("bench", *EP, "--requests", "-1"), 2, "--requests: Input should be greater"),
    _c(
        "SLO without a unit",
        ("bench", *EP, "--slo", "p90:tpot<=50"),
        2,
        "--slo: SLO 'p90:tpot<=50': the limit 50 has no unit",
    ),
    _c("SLO with '<' for '<='", ("bench", *EP, "--slo", "ttft<2s"), 2, "--slo: SLO 'ttft<2s' compares with '<'"),
    _c("SLO on an unknown metric", ("bench", *EP, "--slo", "p90:latency<=1s"), 2, "unknown metric 'latency'"),
    _c("SLO percentile above 100", ("bench", *EP, "--slo", "p101:e2e<=1s"), 2, "percentile p101 is outside (0, 100]"),
    _c("SLO in the config file", "bench -c bad_slo.yaml --local", 2, "bench.slo: item 2: SLO 'tpot<=fast'"),
    _c("enormous request count", ("bench", *EP, "--requests", str(10**12)), 2, "less than or equal to 1000000"),
    _c("request count not a number", ("bench", *EP, "--requests", "nan"), 2, "Invalid value for '--requests'"),
    _c("concurrency 0", ("bench", *EP, "--set", "bench.concurrency=[0]"), 2, "level 0 outside 1..4096"),
    _c("concurrency enormous", ("bench", *EP, "--concurrency", "100000"), 2, "level 100000 outside 1..4096"),
    _c("concurrency not a list of integers", ("bench", *EP, "--concurrency", "1,x"), 2, "comma-separated list"),
    _c("negative rate", ("bench", *EP, "--rate", "-1"), 2, "--rate: rate -1 is outside (0, 1000000] req/s"),
    _c(
        "rate and concurrency both given",
        ("bench", *EP, "--rate", "2", "--concurrency", "1,4"),
        2,
        "--rate 2 and --concurrency 1,4 both given: open-loop arrivals and closed-loop streams are two load shapes",
    ),
    _c(
        "trace and rate both given",
        ("bench", *EP, "--trace", "trace.csv", "--rate", "2"),
        2,
        "--trace trace.csv and --rate 2 both given",
    ),
    _c(
        "burstiness without gamma arrivals",
        ("bench", *EP, "--rate", "2", "--burstiness", "0.5"),
        2,
        "--burstiness 0.5 and bench.arrivals poisson both given",
    ),
    _c(
        "in-flight cap on a closed loop",
        ("bench", *EP, "--max-in-flight", "4"),
        2,
        "--max-in-flight 4 applies to open loop only",
    ),
    _c(
        "bad trace row",
        ("bench", *EP, "--trace", "bad_trace.csv"),
        2,
        "bad_trace.csv line 3: output_tokens is 'many', not a number",
    ),
    _c("zero output tokens", ("bench", *EP, "--max-tokens", "0"), 2, "bench.max_tokens"),
    _c("infinite timeout", ("bench", *EP, "--set", "bench.timeout_s=1e400"), 2, "bench.timeout_s"),
    _c(
        "infinite price",
        "render --set pricing.instance_hourly_usd=inf",
        2,
        "pricing.instance_hourly_usd: Input should be a finite number (from --set pricing.instance_hourly_usd)",
    ),
    _c("NaN price", "render --set pricing.instance_hourly_usd=nan", 2, "instance_hourly_usd: Input should be a finite"),
    _c(
        "absurd price",
        "render --set pricing.instance_hourly_usd=1e9",
        2,
        "pricing.instance_hourly_usd: Input should be less than or equal to 10000",
    ),
    _c(
        "absurd instances per service (1e308)",
        "render -c absurd_share.yaml",
        2,
        "pricing.instances_per_service: Input should be less than or equal to 1024 (from absurd_share.yaml line 2)",
    ),
    _c("NaN time scale", "render --set sim.time_scale=nan", 2, "sim.time_scale: Input should be a finite number"),
    _c("absurd TPOT SLO", ("bench", *EP, "--set", "bench.slo_tpot_s=1e300"), 2, "less than or equal to 86400"),
    _c("absurd prompt length filter", "render --set bench.workload.max_chars=1e15", 2, "bench.workload.max_chars"),
    _c(
        "input + output tokens over max_model_len",
        "render --set max_model_len=2048 --set bench.input_tokens=2000 --set bench.max_tokens=600",
        2,
        "input_tokens 2000 + max_tokens 600 exceeds max_model_len 2048",
    ),
    _c("unknown API", ("bench", *EP, "--api", "grpc"), 2, "--api: Input should be 'chat' or 'completions'"),
    _c(
        "unknown schedule mode",
        ("bench", *EP, "--mode", "fast"),
        2,
        "--mode: Input should be 'simultaneous' or 'interleaved' (config key bench.schedule)",
    ),
    _c("unknown prompt set", ("bench", *EP, "--prompts", "nosuch"), 2, "--prompts: unknown prompt set 'nosuch'"),
    _c("unknown output format", ("bench", *EP, "-o", "xml"), 2, "Invalid value for '--output' / '-o'"),
    _c("--out-dir climbing out with '..'", ("bench", *EP, "--out-dir", "../x"), 2, "--out-dir ../x contains '..'"),
    _c("run id with '..'", ("bench", *EP, "--run-id", "../x"), 2, "run id '../x' (from --run-id) is not usable"),
    _c("run id with '/'", ("bench", *EP, "--run-id", "a/b"), 2, "run id 'a/b' (from --run-id) is not usable"),
    _c("run id with capitals (not a Kubernetes name)", ("bench", *EP, "--run-id", "My_Run"), 2, "is not usable"),
    _c("run id over 40 characters", ("bench", *EP, "--run-id", "r" * 41), 2, "1-40 lowercase letters"),
    _c("run id of 300 characters", ("bench", *EP, "--run-id", "r" * 300), 2, "1-40 lowercase letters"),
    _c(
        "results folder name over 255 bytes",
        ("bench", *EP, "--out-dir", "é" * 150),
        2,
        "--out-dir: the folder name 'éééééééééééééééééééééééééééééééééééééééé'... is 300 bytes, over the 255",
    ),
    _c("--repeats 0", ("bench", *EP, "--repeats", "0"), 2, "--repeats 0 is below 1"),
    _c("--repeats in the cluster", ("bench", "--repeats", "2"), 2, "--repeats 2 needs a local run (--local or"),
    _c(
        "--repeats making run ids over 40 characters",
        ("bench", *EP, "--run-id", "r" * 39, "--repeats", "2"),
        2,
        "(from --run-id with --repeats 2: run i is <run-id>-r<i>) is not usable",
    ),
    _c("pod run id with '..'", ("loadgen", *EP, "--run-id", "../x"), 2, "run id '../x' (from --run-id) is not usable"),
    _c("endpoint name with '/'", ("bench", "--endpoint", f"../../x={DEAD}", *ID), 2, "endpoint name '../../x'"),
    _c("endpoint name absolute", ("bench", "--endpoint", f"/tmp/x={DEAD}", *ID), 2, "is not a safe name"),
    _c("prompt class with '/'", ("bench", *EP, *ID, "--prompts", "bad_class.yaml"), 2, "prompts[0].class '../c'"),
    _c("bench --local output with '..' (before any server starts)", "bench --local --out-dir ../x", 2, "contains '..'"),
    _c("prompt file over 5 MB", ("bench", *EP, "--prompts", "huge_prompts.yaml"), 2, "over the 5000000-byte limit"),
    _c("prompt file not UTF-8", ("bench", *EP, "--prompts", "latin1_prompts.yaml"), 2, "is not UTF-8"),
    _c(
        "prompt file with a negative class weight",
        ("bench", *EP, "--prompts", "weighted_prompts.yaml"),
        2,
        "class_weights: -1.0 for class 'a' is not a positive weight",
    ),
    _c("prompt file missing", ("bench", *EP, "--prompts", "nope.yaml"), 2, "nope.yaml"),
    _c("prompt file with a YAML alias", ("bench", *EP, "--prompts", "alias.yaml"), 2, "YAML aliases are not allowed"),
    _c("prompt file nested too deeply", ("bench", *EP, "--prompts", "deep.yaml"), 2, "nested too deeply"),
    _c("pod prompt file over 5 MB", ("loadgen", *EP, "--prompts-file", "huge_prompts.yaml"), 2, "byte limit"),
    _c(
        "workload JSONL row without a prompt",
        ("bench", *EP, *ID, "--prompts", "bad_row.jsonl"),
        2,
        "prompt file bad_row.jsonl, line 2, field 'prompt': missing",
    ),
    _c(
        "ShareGPT record without conversations",
        ("bench", *EP, *ID, "--prompts", "bad_sharegpt.json"),
        2,
        "prompt file bad_sharegpt.json, record [1], field 'conversations': missing",
    ),
    _c(
        "workload CSV with a bad output length",
        ("bench", *EP, *ID, "--prompts", "bad_rows.csv"),
        2,
        "prompt file bad_rows.csv, line 3, field 'output_tokens'",
    ),
    _c("workload JSONL not UTF-8", ("bench", *EP, *ID, "--prompts", "latin1.jsonl"), 2, "line 1 is not UTF-8"),
    _c(
        "workload class weight for a class the file lacks",
        ("bench", *EP, *ID, "--prompts", "good.csv", "--set", "bench.workload.class_weights={nosuch: 2}"),
        2,
        "class_weights names class(es) nosuch",
    ),
    _c(
        "saved dataset folder that is not one",
        ("bench", *EP, *ID, "--prompts", "empty_dir", "--set", "bench.workload.format=hf-disk"),
        2,
        "is not a dataset saved with save_to_disk",
    ),
    _c("unknown local runtime", "bench --local --runtime docker", 2, "--runtime 'docker' is not a local runtime"),
    _c("unknown engine", ("bench", *EP, "--engine", "locust"), 2, "--engine 'locust'"),
    _c("no endpoint", "loadgen", 2, "loadgen needs at least one --endpoint"),
    _c("zero shards", ("loadgen", *EP, "--shards", "0"), 2, "--shard-index 0 is outside"),
    _c("shard index past the shards", ("loadgen", *EP, "--shard-index", "3", "--shards", "2"), 2, "is outside 0..1"),
    _c("pod run folder and results root both", ("loadgen", *EP, "--out", "x/r2", "--out-dir", "x"), 2, "both given"),
    _c("pod run folder named unusably", ("loadgen", *EP, "--out", "x/My_Run"), 2, "run id 'My_Run' (from --out"),
    _c("--out with '..'", ("loadgen", *EP, "--run-id", "r1", "--out", "../r1"), 2, "contains '..'"),
    _c("demo with zero requests", "demo --requests 0", 2, "bench.requests"),
    _c("demo with negative time scale", "demo --time-scale -1", 2, "--time-scale -1 is outside (0, 100]"),
    _c("bench with zero time scale", "bench --local --time-scale 0", 2, "--time-scale 0 is outside (0, 100]"),
    # ---- analyze / report / compare / publish / dashboard / ingest: run folders ----
    _c("run folder missing", "analyze nosuch", 5, "nosuch does not exist (fix: pass one of the run"),
    _c("not a run folder", "analyze empty_dir", 5, "empty_dir has no run.json, so it is not a run folder"),
    _c("a results folder, not a run", "analyze .", 5, ". is a results folder holding 11 run(s), not a run folder"),
    _c("a sweep folder, not a run", "report a_sweep", 5, "a_sweep is a sweep folder (sweep.json), not a run folder"),
    _c("run.json garbled", "analyze corrupt_run", 5, "run.json is not valid run metadata: Invalid JSON"),
    _c("run with no finished request", "analyze empty_run", 5, "has no measured requests"),
    _c("hand-edited acceptance.json (a list)", "analyze list_acc_run", 5, "is not an object of counter deltas"),
    _c("hand-edited price in run.json (a string)", "analyze price_run", 5, "config.pricing.instance_hourly_usd"),
    _c(
        "run.json from an older spectrn with 1e308 instances per service",
        "analyze absurd_share_run",
        5,
        "config.pricing.instances_per_service: Input should be less than or equal to 1024: the cost figures are",
    ),
    _c(
        "run.json with an infinite price",
        "analyze inf_price_run",
        5,
        "config.pricing.instance_hourly_usd: Input should be a finite number: the cost figures are computed from it",
    ),
    _c(
        "run.json with a key twice",
        "analyze dup_key_run",
        5,
        "run.json holds the key 'finished_at' twice in one object",
    ),
    _c(
        "requests.jsonl record with a key twice",
        "analyze dup_record_run",
        5,
        "line 2 is not a request record: the key 'ttft' appears twice in one object",
    ),
    _c("summary.json of another schema", "report old_summary_run", 5, "is not a summary of schema version 2"),
    _c("requests.jsonl damaged mid-file", "analyze damaged_run", 5, "line 2 is not a request record"),
    _c("report of a missing run", "report nosuch", 5, "nosuch does not exist (fix: pass one of the run"),
    _c("report of a garbled run", "report corrupt_run", 5, "is not valid run metadata"),
    _c("report output with '..'", "report good_run --out ../x", 2, "contains '..'"),
    _c(
        "report folder name over 255 bytes (a traceback before)",
        ("report", "good_run", "--out-dir", "x" * 300),
        2,
        "is 300 bytes, over the 255 bytes a file name may hold (fix: choose a shorter report folder)",
    ),
    _c("compare with one run", "compare good_run", 2, "Missing argument"),
    _c("compare a garbled run", "compare good_run corrupt_run", 5, "is not valid run metadata"),
    _c("compare Markdown path with '..'", "compare good_run good_run --markdown ../x.md", 2, "contains '..'"),
    _c("publish a missing run", "publish nosuch", 5, "nosuch does not exist (fix: pass one of the run"),
    _c("publish batch size 0", "publish good_run --batch-size 0", 2, "--batch-size"),
    _c("publish with zero attempts", "publish good_run --max-attempts 0", 2, "--max-attempts"),
    _c("publish without AWS credentials", "publish good_run", 6, "no AWS credentials found"),
    _c("dry-run publish of a run without requests", "publish empty_run --dry-run", 5, "no measured requests"),
    _c("dashboard of a missing run", "dashboard nosuch --print", 5, "nosuch does not exist (fix: pass one of the run"),
    _c("llmperf folder missing", "ingest-llmperf nosuch", 5, "nosuch is not a folder"),
    _c(
        "run folder name over 255 bytes",
        ("ingest-llmperf", "empty_dir", "--out", "y" * 300),
        2,
        "--out: the folder name 'yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy'... is 300 bytes, over the 255 bytes",
    ),
    _c("llmperf folder without results", "ingest-llmperf empty_dir", 5, "holds no llmperf result folders"),
    _c("llmperf output with '..'", "ingest-llmperf empty_dir --out ../x", 2, "--out ../x contains '..'"),
    _c("config-reference into a file without markers", "config-reference --write unknown.yaml", 2, "lacks the markers"),
    _c("config-reference of a missing file", "config-reference --check nope.md", 2, "nope.md cannot be read"),
    _c("schemas into a file", "schemas --write spectrn.yaml", 2, "spectrn.yaml exists and is not a folder"),
    # ---- cluster commands (fake API) ----
    _c("deploy with a bad config", "deploy -c alias.yaml", 2, "YAML aliases are not allowed"),
    _c("deploy with negative timeout", "deploy --timeout -5", 2, "--timeout"),
    _c("status in an invalid namespace", "status --set namespace=Bad_NS", 2, "namespace: must be a DNS-1123 label"),
    _c("teardown with a bad config", "teardown --yes -c unknown.yaml", 2, "unknown key"),
    _c("collect a run id with '..'", "collect ../x", 2, "run id '../x' (from the RUN_ID argument) is not usable"),
    _c("collect a run id with '/'", "collect a/b", 2, "run id 'a/b' (from the RUN_ID argument) is not usable"),
    _c("collect a run that does not exist", "collect nosuchrun", 4, "no load Job for run nosuchrun"),
    _c("collect with negative timeout", "collect abc --timeout -1", 2, "--timeout"),
    _c("collect with --out and --out-dir", "collect abc --out a --out-dir b", 2, "--out-dir b and --out a both given"),
    _c("fake capacity on a cluster that is not kind", "kind fake-neuron", 2, "is not a kind cluster"),
    _c("negative fake device count", "kind fake-neuron --neuron -1", 2, "--neuron"),
    # ---- twin ----
    _c("twin: run folder missing", "twin calibrate nosuch", 5, "nosuch does not exist (fix: pass one of the run"),
    _c("twin: a folder that is not a run", "twin calibrate empty_dir", 5, "empty_dir has no run.json"),
    _c(
        "twin: a run whose window is unknown",
        "twin calibrate good_run",
        2,
        "the speculative server's window is unknown",
    ),
    _c("twin: twin file missing", "twin predict nosuch.yaml", 2, "simulator preset file nosuch.yaml does not exist"),
    _c("twin: malformed twin file", "twin predict broken.yaml", 2, "malformed YAML"),
    _c("twin: a config file given as the twin", "twin predict spectrn.yaml", 8, "name: Field required"),
    _c("twin: YAML alias in the twin file", "twin report alias.yaml", 2, "YAML aliases are not allowed"),
    _c("twin: too few parameter draws", "twin predict nosuch.yaml --samples 3", 2, "greater than or equal to 10"),
    # ---- sweep / compile ----
    _c("sweep window 0", "sweep --local --windows 0", 2, "--windows: 0 is outside 1..32"),
    _c("sweep windows not numbers", "sweep --local --windows a", 2, "--windows 'a'"),
    _c("sweep unknown draft", "sweep --local --drafts nosuch", 2, "--drafts: unknown model 'nosuch'"),
    _c("sweep id of 300 characters", ("sweep", "--local", "--sweep-id", "s" * 300), 2, "is not a safe folder name"),
    _c("sweep unknown prompt set", "sweep --local --prompts nosuch", 2, "--prompts: unknown prompt set 'nosuch'"),
    _c(
        "sweep SLO with a bad unit",
        ("sweep", "--local", "--slo", "tpot<=5us"),
        2,
        "--slo: SLO 'tpot<=5us': unknown unit",
    ),
    _c("sweep unknown objective", "sweep --local --objective speed", 2, "--objective 'speed' is not an objective"),
    _c("sweep negative gain threshold", "sweep --local --min-gain -1", 2, "Invalid value for '--min-gain'"),
    _c("sweep id with '..'", "sweep --local --sweep-id ../x", 2, "is not a safe folder name"),
    _c("sweep mix malformed", "sweep --local --mix bad", 2, "is not CLASS=WEIGHT"),
    _c("resume a sweep that does not exist", "sweep --local --resume --sweep-id nosuch", 2, "there is no sweep nosuch"),
    _c(
        "resume a sweep written by a newer spectrn",
        "sweep --local --resume --sweep-id newer --out-dir sweeps",
        5,
        "sweep.json was written by a newer spectrn (sweep schema 99",
    ),
    # ---- capacity ----
    _c(
        "capacity without a percentile SLO",
        ("capacity", *EP, "--slo", "tpot<=50ms"),
        2,
        "--slo: capacity needs at least one percentile SLO (given: tpot<=50ms)",
    ),
    _c("capacity with a bad SLO", ("capacity", *EP, "--slo", "p90:tpot<=50"), 2, "the limit 50 has no unit"),
    _c("capacity with no server", ("capacity", "--slo", "p90:tpot<=50ms"), 2, "no server to search"),
    _c(
        "capacity endpoint not baseline or speculative",
        ("capacity", "--endpoint", f"draft={DEAD}", "--slo", "p90:tpot<=50ms"),
        2,
        "--endpoint draft: capacity searches baseline and speculative only",
    ),
    _c(
        "capacity --max below --start",
        ("capacity", *EP, "--start", "8", "--max", "4"),
        2,
        "--max 4 is below --start 8",
    ),
    _c(
        "capacity fractional concurrency",
        ("capacity", *EP, "--start", "1.5"),
        2,
        "--start 1.5 is not a whole number of concurrent requests",
    ),
    _c(
        "capacity rate precision not relative",
        ("capacity", *EP, "--rate-search", "--precision", "2"),
        2,
        "--precision 2: a rate search's precision is relative",
    ),
    _c("compile windows not numbers", "compile --dry-run --windows x", 2, "--windows 'x'"),
    _c("compile unknown draft", "compile --dry-run --drafts nosuch", 2, "unknown model 'nosuch'"),
    # ---- simulator ----
    _c("port out of range", "sim serve --port 70000", 2, "--port"),
    _c("address not on this machine", "sim serve --host 10.255.255.1 --port 1", 8, "cannot listen on 10.255.255.1:1"),
    _c("error rate above 1", "sim serve --error-rate 2", 8, "faults.error_rate"),
    _c("error status not 500/503", "sim serve --error-status 404", 8, "faults.error_status"),
    _c("negative time scale", "sim serve --time-scale -1", 8, "time_scale: Input should be greater than 0"),
    _c("unknown preset", "sim serve --preset nosuch", 8, "unknown simulator preset 'nosuch'"),
    _c("sim config YAML bomb", "sim serve --config-file alias.yaml", 2, "YAML aliases are not allowed"),
    _c("sim config over 1 MB", "sim serve --config-file huge.yaml", 2, "over the 1000000-byte limit"),
    _c("expect without a prompt", "sim expect", 2, "--prompt"),
]


def make_inputs(root: Path) -> None:
    """Write every file the cases refer to into ``root``."""
    (root / "alias.yaml").write_text("a: &a [1, 2]\nb: [*a, *a]\n")
    (root / "deep.yaml").write_text("a: " + "[" * 5000 + "]" * 5000 + "\n")
    (root / "huge.yaml").write_text("# " + "x" * 1_100_000 + "\n")
    (root / "unknown.yaml").write_text("bench:\n  requets: 5\n")
    (root / "absurd_share.yaml").write_text("pricing:\n  instances_per_service: 1e308\n")
    (root / "dup.yaml").write_text("bench:\n  requests: 5\nbench:\n  concurrency: [2]\n")
    (root / "dup_nested.yaml").write_text("bench:\n  requests: 5\n  requests: 50\n")
    (root / "latin1.yaml").write_bytes("namespace: caf\xe9\n".encode("latin-1"))
    (root / "list.yaml").write_text("- a\n- b\n")
    (root / "broken.yaml").write_text("bench: [1, 2\n")
    (root / "bad_slo.yaml").write_text("bench:\n  slo:\n    - p90:tpot<=50ms\n    - tpot<=fast\n")
    (root / "spectrn.yaml").write_text("namespace: spectrn\n")  # makes `init` find an existing file
    line = '  - {id: p, class: structured, text: "' + "y" * 1000 + '"}\n'
    (root / "huge_prompts.yaml").write_text("prompts:\n" + line * 5300)
    (root / "latin1_prompts.yaml").write_bytes('prompts:\n  - {id: p, text: "caf\xe9"}\n'.encode("latin-1"))
    weighted = "name: w\nprompts: [{id: p, class: a, text: hi}]\nclass_weights: {a: -1}\n"
    (root / "weighted_prompts.yaml").write_text(weighted)
    (root / "bad_class.yaml").write_text("name: bad\nprompts:\n  - {id: p, class: ../c, text: hello}\n")
    (root / "empty_dir").mkdir()
    (root / "a_sweep").mkdir()
    (root / "a_sweep" / "sweep.json").write_text("{}")
    (root / "bad_row.jsonl").write_text('{"prompt": "fine"}\n{"class": "c"}\n')
    (root / "bad_sharegpt.json").write_text('[{"conversations": [{"from": "human", "value": "hi"}]}, {"id": "b"}]')
    (root / "bad_rows.csv").write_text("prompt,output_tokens\nhello,5\nworld,many\n")
    (root / "good.csv").write_text("prompt,class\nhello,greeting\nworld,greeting\n")
    (root / "bad_trace.csv").write_text("timestamp,output_tokens\n0,5\n0.5,many\n")
    (root / "latin1.jsonl").write_bytes('{"prompt": "caf\xe9"}\n'.encode("latin-1"))
    (root / "sweeps" / "newer").mkdir(parents=True)
    newer = {"schema_version": 99, "sweep_id": "newer", "created_at": 1_800_000_000.0, "fingerprint": "f", "cells": {}}
    (root / "sweeps" / "newer" / "sweep.json").write_text(json.dumps(newer))
    meta = {"run_id": "r", "spectrn_version": "0.1.0", "started_at": 1_800_000_000.0, "finished_at": 1_800_000_100.0}
    hand_edited = ("list_acc_run", "price_run", "old_summary_run", "absurd_share_run", "inf_price_run", "dup_key_run")
    for name in ("corrupt_run", "empty_run", "damaged_run", "good_run", "dup_record_run", *hand_edited):
        (root / name).mkdir()
        (root / name / "run.json").write_text(json.dumps(meta))
    (root / "corrupt_run" / "run.json").write_text("{not json")
    (root / "empty_run" / "requests.jsonl").write_text("")
    good = "".join(json.dumps(minimal_record(v, i)) + "\n" for v in ("baseline", "speculative") for i in range(6))
    (root / "good_run" / "requests.jsonl").write_text(good)
    for name in hand_edited:  # hand-edited copies of a good run
        (root / name / "requests.jsonl").write_text(good)
    # what an older spectrn wrote: a finite but absurd share, and an infinite price (Python's json writes Infinity)
    absurd = {**meta, "config": {"pricing": {"instances_per_service": 1e308}}}
    (root / "absurd_share_run" / "run.json").write_text(json.dumps(absurd))
    (root / "inf_price_run" / "run.json").write_text(
        json.dumps({**meta, "config": {"pricing": {"instance_hourly_usd": float("inf")}}})
    )
    (root / "dup_key_run" / "run.json").write_text(json.dumps(meta).replace("{", '{"finished_at": null, ', 1))
    twice = json.dumps(minimal_record("baseline", 1)).replace("{", '{"ttft": 9.0, ', 1)
    (root / "dup_record_run" / "requests.jsonl").write_text(
        json.dumps(minimal_record("baseline", 0))
        + "\n"
        + twice
        + "\n"
        + json.dumps(minimal_record("baseline", 2))
        + "\n"
    )
    (root / "list_acc_run" / "acceptance.json").write_text("[1, 2]")
    priced = {**meta, "config": {"pricing": {"instance_hourly_usd": "cheap"}}}
    (root / "price_run" / "run.json").write_text(json.dumps(priced))
    (root / "old_summary_run" / "summary.json").write_text(json.dumps({"run_id": "r", "clean": True}))
    (root / "damaged_run" / "requests.jsonl").write_text(
        json.dumps(minimal_record("baseline", 0))
        + '\n{"variant": "bas\n'
        + json.dumps(minimal_record("baseline", 1))
        + "\n"
    )


def render_doc() -> str:
    from spectrn.errors import EXIT_CODES

    out = [
        "# Bad input: what spectrn says and how it exits",
        "",
        "Generated from `tests/cli/bad_input_cases.py` (the list the tests run); regenerate with",
        "`.venv/bin/python tests/cli/bad_input_cases.py > docs/bad-input.md`. A test fails when this",
        "file and the list disagree.",
        "",
        "Every case below is run through the real CLI by `tests/cli/test_rel_bad_input.py`, which checks",
        "the exit code, that stderr carries exactly one error line `Type: cause (fix: what to do)` (Click's own",
        "usage errors: `Usage error: ...` followed by a pointer to `--help`) containing the expected text, and",
        "that the command left no new file behind (no half-written summary, run folder or manifest).",
        "",
        "## Exit codes",
        "",
        "| exit | error type | meaning |",
        "| --- | --- | --- |",
    ]
    meaning = {
        "SpectrnError": "anything else spectrn reports on purpose",
        "ConfigError": "bad configuration, flags, files or other user input",
        "RenderError": "a template produced something invalid",
        "BenchError": "load generation could not run or produced unusable results",
        "EndpointError": "an endpoint is unreachable, not ready (/health) or answers wrongly",
        "AnalysisError": "results cannot be analyzed (missing or corrupt files)",
        "PublishError": "CloudWatch rejected or failed part of a publish (progress kept in publish.json)",
        "KubeError": "the Kubernetes API refused or failed a call",
        "DeployError": "a workload did not become ready (with a diagnosis)",
        "SimError": "the simulated server could not start or was misconfigured",
        "Interrupted": "stopped by Ctrl-C; finished requests are kept",
        "Terminated": "stopped by SIGTERM (`kill`, a pod deletion); finished requests are kept, local servers stopped",
    }
    for name, code in sorted(EXIT_CODES.items(), key=lambda kv: (kv[1], kv[0])):
        out.append(f"| {code} | `{name}` | {meaning.get(name, '')} |")
    out.append("| 2 | `Usage error` | Click rejected a flag (unknown option, value out of range, missing argument) |")
    out += [
        "| 0 | | success; a run with failed requests exits 0 but is marked `clean: false` with a WARNING above "
        "`bench.max_error_rate` (a variant with no successful request at all: exit 4, everything still written) |",
        "",
        "## Cases",
        "",
        "| command | bad input | invocation | exit | the error line contains |",
        "| --- | --- | --- | --- | --- |",
    ]
    for c in CASES:
        inv = " ".join(a if len(a) < 80 else f"{a[:40]}...({len(a)} characters)" for a in c.argv)
        inv = inv.replace("|", "\\|")
        expect = c.expect.replace("|", "\\|")
        out.append(f"| `{c.command}` | {c.what} | `spectrn {inv}` | {c.code} | {expect} |")
    out += [
        "",
        f"{len(CASES)} cases over {len({c.command for c in CASES})} commands.",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render_doc())
