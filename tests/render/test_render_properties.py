"""Property: whatever text a user puts into any string field of the configuration, config -> render either
refuses it with a ConfigError or renders objects of exactly the same STRUCTURE as a known-good value would:
the same kinds and apiVersions in the same order, the same keys at every level, the same list lengths (so
the same number of args and env entries), names and labels that are valid Kubernetes names, the same script
texts, YAML output that parses back to the same objects, and no container string that Kubernetes would
expand into another variable's value. The value shows up only as data.

Budget: a fixed, derandomized run of ``MAX_EXAMPLES`` examples (deterministic on every machine); the test
prints how many examples ran, were rendered and were refused.
"""

from __future__ import annotations

import re
from datetime import timedelta
from functools import cache
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doubles.render_support import FIXED_PROMPTS, containers, k8s_expand
from spectrn.configuration.sources import build_config
from spectrn.errors import ConfigError
from spectrn.render import load_job, output
from spectrn.render import manifests as render

MAX_EXAMPLES = 300

DRAFT_KEY = "my-draft"
DRAFT = {
    "hf_id": "Qwen/Qwen3-1.7B",
    "params_b": 1.7,
    "tokenizer": "qwen3",
    "vocab_size": 151936,
    "architecture": "qwen3",
}

# A known-good value for every user string field; "" is itself valid where the field means "none".
SAMPLES: dict[str, str] = {
    "namespace": "spectrn",
    "target": "qwen3-32b",
    "draft": DRAFT_KEY,
    "image": "registry.example.com/vllm:1",
    "spectrn_image": "registry.example.com/spectrn:1",
    "instance_type": "trn2.48xlarge",
    "scheduler_name": "my-scheduler",
    "baseline_name": "qwen-vllm",
    "speculative_name": "qwen-sd-vllm",
    "s3.bucket": "my-models",
    "s3.region": "us-east-2",
    "s3.models_prefix": "models",
    "s3.artifacts_prefix": "compiled",
    "s3.mount_path": "/var/mdl",
    "s3.capacity": "1200Gi",
    "service_accounts.vllm": "spectrn-vllm",
    "service_accounts.loadgen": "spectrn-loadgen",
    "service_accounts.vllm_role_arn": "arn:aws:iam::111122223333:role/a",
    "service_accounts.loadgen_role_arn": "arn:aws:iam::111122223333:role/b",
    "hf_token_secret.name": "hf",
    "hf_token_secret.key": "token",
    "resources.cpu": "90",
    "resources.memory": "600Gi",
    "resources.shm_size": "128Gi",
    "compile.cpu": "90",
    "bench.prompts": "no-such-set",
    "cloudwatch.namespace": "Spectrn",
    "cloudwatch.region": "us-east-2",
    "cloudwatch.dashboard_prefix": "spectrn",
    "sim.preset": "qwen3-32b-trn2",
    "sim.image": "registry.example.com/spectrn:1",
    f"custom_models.{DRAFT_KEY}.hf_id": DRAFT["hf_id"],
    f"custom_models.{DRAFT_KEY}.tokenizer": DRAFT["tokenizer"],
    f"custom_models.{DRAFT_KEY}.architecture": DRAFT["architecture"],
    "custom model key": DRAFT_KEY,
}
EMPTY_MEANS_NONE = {"scheduler_name", "service_accounts.vllm_role_arn", "service_accounts.loadgen_role_arn"}

NASTY = [
    "$(HF_TOKEN)", "$$(HF_TOKEN)", "$(JOB_COMPLETION_INDEX)", "${HOME}", "`id`", "'; rm -rf / #", '"; echo x; "',
    "a\nkind: Secret", "{{ cfg }}", "{% raw %}", "{#", "../..", "..", "*", "?", "a b", "--set", "-o", "a: b",
    "- x", "&a", "*a", "!!python/object/apply:os.system", "|", ">", "#", "%", "@", "\\", "\t", "\x00", "\u2028",
    "é", "🚀", "x" * 300, "", " ", "qwen3-32b", "registry.example.com/x:1", "us-east-2", "models", "/var/mdl",
]  # fmt: skip

values = st.one_of(
    st.text(max_size=40),
    st.sampled_from(NASTY),
    st.builds(lambda a, b, c: a + b + c, st.text(max_size=6), st.sampled_from(NASTY), st.text(max_size=6)),
    # near a valid value: valid-looking content of another length must not change the shape either
    st.builds(
        lambda a, b: a + b,
        st.sampled_from(sorted(set(SAMPLES.values()))),
        st.from_regex(r"[a-z0-9]{0,6}", fullmatch=True),
    ),
)


def _config(field: str, value: str, runtime: str, source: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "runtime": runtime,
        "model_source": source,
        "hf_token_secret": {"name": "hf", "key": "token"},
        "resources_mode": "device-plugin" if runtime == "sim" else "dra-v1",
        "custom_models": {DRAFT_KEY: dict(DRAFT)},
        "draft": DRAFT_KEY,
        "spectrn_image": SAMPLES["spectrn_image"],
        "sim": {"image": SAMPLES["sim.image"]},
        "s3": {"bucket": "my-models"},
    }
    if field == "custom model key":
        data["custom_models"] = {value: dict(DRAFT)}
        data["draft"] = value
        return data
    node = data
    parts = (
        field.split(".")
        if not field.startswith("custom_models.")
        else ["custom_models", DRAFT_KEY, field.rsplit(".", 1)[1]]
    )
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return data


def _render(data: dict[str, Any], engine: str) -> list[dict[str, Any]]:
    from spectrn.deploy.compile import compile_jobs

    cfg = build_config(data, environ={})
    objs = render.render_objects(cfg, run_id="prop", engine=engine, prompts=FIXED_PROMPTS)
    if cfg.runtime == "neuron":
        objs += compile_jobs(cfg, [cfg.draft], [cfg.num_speculative_tokens])
    return objs


def structure(value: Any) -> Any:
    """The shape of an object: keys and list lengths kept, every scalar replaced by its type."""
    if isinstance(value, dict):
        return {k: structure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [structure(v) for v in value]
    return type(value).__name__


def scripts(objs: list[dict[str, Any]]) -> list[str]:
    """The script texts: ``bash -c`` and ``python3 -c`` programs of every container."""
    out = []
    for obj in objs:
        for c in containers(obj):
            cmd = [*c.get("command", []), *c.get("args", [])]
            out += [cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "-c"]
    return out


@cache
def baseline(field: str, value: str, runtime: str, source: str, engine: str) -> tuple[Any, list[str]]:
    objs = _render(_config(field, value, runtime, source), engine)
    return [(o["apiVersion"], o["kind"], structure(o)) for o in objs], scripts(objs)


def _baseline_value(field: str, value: str) -> str:
    if field in EMPTY_MEANS_NONE and value == "":
        return ""
    if field == "bench.prompts" and f"{value}.yaml" in FIXED_PROMPTS:
        return "structured"  # a prompt set the ConfigMap holds: the load pod is pointed at its file
    return SAMPLES[field]


_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


def check_property(field: str, value: str, runtime: str, source: str, engine: str) -> bool:
    """True when rendered (and the property held), False when refused with a ConfigError."""
    try:
        objs = _render(_config(field, value, runtime, source), engine)
    except ConfigError as e:
        assert "\n" not in str(e), "a ConfigError is one line"
        return False
    expected_structure, expected_scripts = baseline(field, _baseline_value(field, value), runtime, source, engine)
    assert [(o["apiVersion"], o["kind"], structure(o)) for o in objs] == expected_structure
    assert scripts(objs) == expected_scripts
    for obj in objs:
        meta = obj["metadata"]
        assert _DNS_SUBDOMAIN.fullmatch(meta["name"]) and len(meta["name"]) <= 253, meta["name"]
        assert all(_LABEL_VALUE.fullmatch(v) and len(v) <= 63 for v in meta["labels"].values()), meta["labels"]
        for c in containers(obj):
            defined = {e["name"]: "\x1bINJECTED" for e in c.get("env") or []} | {"HF_TOKEN": "\x1bINJECTED"}
            for text in [*c.get("command", []), *c.get("args", []), *(e.get("value", "") for e in c.get("env") or [])]:
                if text != "$(JOB_COMPLETION_INDEX)":
                    assert "\x1bINJECTED" not in k8s_expand(text, defined), text
    assert list(yaml.safe_load_all(output.to_yaml(objs))) == objs
    return True


def test_user_strings_never_change_the_structure_of_the_rendered_objects() -> None:
    counts = {"examples": 0, "rendered": 0, "refused": 0}
    fields_rendered: set[str] = set()

    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=timedelta(seconds=10),
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(
        field=st.sampled_from(sorted(SAMPLES)),
        value=values,
        runtime=st.sampled_from(["neuron", "sim"]),
        source=st.sampled_from(["s3", "hub"]),
        engine=st.sampled_from(["spectrn", "llmperf"]),
    )
    def prop(field: str, value: str, runtime: str, source: str, engine: str) -> None:
        counts["examples"] += 1
        if check_property(field, value, runtime, source, engine):
            counts["rendered"] += 1
            fields_rendered.add(field)
        else:
            counts["refused"] += 1

    prop()
    print(f"\nproperty examples: {counts}, fields rendered with a drawn value: {len(fields_rendered)}/{len(SAMPLES)}")
    # the run exercised the property, not only the refusals
    assert counts["examples"] >= MAX_EXAMPLES // 2
    assert counts["rendered"] >= counts["examples"] // 5, sorted(fields_rendered)
    assert len(fields_rendered) >= len(SAMPLES) // 3


def test_the_property_check_can_fail(monkeypatch) -> None:
    """A renderer that pasted a value into a script text would be caught."""
    import pytest

    real = load_job.llmperf_script
    monkeypatch.setattr(load_job, "llmperf_script", lambda cfg: real(cfg) + f"echo {cfg.draft_spec.hf_id}\n")
    baseline.cache_clear()
    try:
        with pytest.raises(AssertionError):
            check_property(f"custom_models.{DRAFT_KEY}.hf_id", "Qwen/Other", "neuron", "s3", "llmperf")
        assert check_property(f"custom_models.{DRAFT_KEY}.hf_id", DRAFT["hf_id"], "neuron", "s3", "llmperf")
    finally:
        baseline.cache_clear()
