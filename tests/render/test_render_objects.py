"""Rendered objects: schema validity, the two services' structural diff, dialect flags, security defaults."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from doubles.render_support import FIXED_PROMPTS, RESOURCES, SUPPORTED, k8s_expand, validate_k8s
from spectrn.errors import ConfigError, RenderError
from spectrn.render import iam, load_job, output, server, templates
from spectrn.render import manifests as render


def _by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def _deployments(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["labels"]["spectrn.io/variant"]: d for d in _by_kind(objs, "Deployment")}


def _container(dep: dict[str, Any]) -> dict[str, Any]:
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return c


def _flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


# ---- schema -------------------------------------------------------------------------------------


@pytest.mark.parametrize("resources_mode", RESOURCES)
@pytest.mark.parametrize("combo", sorted(SUPPORTED))
def test_every_object_validates_against_k8s_134(make_cfg, combo, resources_mode):
    cfg = make_cfg({**SUPPORTED[combo], "resources_mode": resources_mode})
    objs = render.render_objects(cfg, run_id="schema", prompts=FIXED_PROMPTS)
    kinds = {o["kind"] for o in objs}
    assert {"Namespace", "ServiceAccount", "PersistentVolume", "PersistentVolumeClaim", "ConfigMap"} <= kinds
    assert {"Deployment", "Service", "Job"} <= kinds
    assert ("ResourceClaimTemplate" in kinds) == (resources_mode != "device-plugin")
    for obj in objs:
        validate_k8s(obj)


@pytest.mark.parametrize(
    "overrides",
    [
        {"runtime": "sim", "resources_mode": "device-plugin"},
        {"runtime": "sim"},
        {"model_source": "hub", "hf_token_secret": {"name": "hf-token", "key": "token"}},
        {"bench.loadgen_pods": 4},
        {"service_accounts.vllm_role_arn": "arn:aws:iam::111122223333:role/spectrn-vllm"},
    ],
)
@pytest.mark.parametrize("engine", ["spectrn", "llmperf"])
def test_variants_and_engines_validate(make_cfg, overrides, engine):
    cfg = make_cfg(**{k.replace(".", "__"): v for k, v in overrides.items()})
    for obj in render.render_objects(cfg, run_id="schema", engine=engine, prompts=FIXED_PROMPTS):
        validate_k8s(obj)


def test_the_schema_check_can_fail(make_cfg):
    # Guard against a validator that accepts anything: a misspelt field and a wrong type must fail.
    import kubernetes_validate

    dep = _deployments(render.render_objects(make_cfg(), prompts=FIXED_PROMPTS))["baseline"]
    bad = json.loads(json.dumps(dep))
    bad["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_k8s(bad)
    bad = json.loads(json.dumps(dep))
    bad["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_k8s(bad)


# ---- the two services differ only where speculation requires -----------------------------------


def structural_diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths where two JSON-like trees differ (a list of another length differs as a whole)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                out.append(sub)
            else:
                out += structural_diff(a[key], b[key], sub)
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in structural_diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


# The only places the two Deployments may differ: each entry allows exactly that path and what lies below it
# (``metadata.name`` does not allow ``metadata.namespace``).
ALLOWED_DIFF_PATHS = (
    "metadata.name",
    "metadata.labels",
    "spec.selector.matchLabels",
    "spec.template.metadata.labels",
    "spec.template.spec.containers[0].args",
    "spec.template.spec.containers[0].env",
)
SPECULATION_KEYS = {"enable_fused_speculation", "enable_eagle_speculation"}


def unexpected_paths(diff: list[str]) -> list[str]:
    return [p for p in diff if not any(p == a or p.startswith((f"{a}.", f"{a}[")) for a in ALLOWED_DIFF_PATHS)]


def _override(args: list[str]) -> dict[str, Any]:
    if "--override-neuron-config" in args:
        return json.loads(_flag(args, "--override-neuron-config") or "{}")
    extra = json.loads(_flag(args, "--additional-config") or "{}")
    return extra.get("override_neuron_config", extra.get("neuron_config", {}))


def _without(args: list[str], *flags: str) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in flags:
            skip = True
        else:
            out.append(a)
    return out


@pytest.mark.parametrize("resources_mode", RESOURCES)
@pytest.mark.parametrize("combo", sorted(SUPPORTED))
def test_deployments_differ_only_in_speculation(make_cfg, combo, resources_mode):
    cfg = make_cfg({**SUPPORTED[combo], "resources_mode": resources_mode})
    deps = _deployments(render.render_objects(cfg, prompts=FIXED_PROMPTS))
    base, spec = deps["baseline"], deps["speculative"]
    diff = structural_diff(base, spec)
    assert diff, "the two Deployments are identical"
    assert unexpected_paths(diff) == [], f"Deployments differ outside speculation: {unexpected_paths(diff)}"

    # Arguments: identical once the speculation flags are removed; overrides differ only in speculation keys.
    b_args, s_args = _container(base)["args"], _container(spec)["args"]
    neuron_flags = ("--override-neuron-config", "--additional-config", "--speculative-config")
    assert _without(b_args, *neuron_flags) == _without(s_args, *neuron_flags)
    b_over, s_over = _override(b_args), _override(s_args)
    assert {k: v for k, v in s_over.items() if k not in SPECULATION_KEYS} == b_over
    assert set(s_over) - set(b_over) <= SPECULATION_KEYS
    assert "--speculative-config" not in b_args

    # Environment: only the draft id and the compiled-artifact path differ.
    b_env = {e["name"]: e for e in _container(base)["env"]}
    s_env = {e["name"]: e for e in _container(spec)["env"]}
    changed = {n for n in b_env.keys() | s_env.keys() if b_env.get(n) != s_env.get(n)}
    assert changed <= {"DRAFT_MODEL_ID", "NEURON_COMPILED_ARTIFACTS"}
    assert "NEURON_COMPILED_ARTIFACTS" in changed
    assert "DRAFT_MODEL_ID" in changed  # every mode that runs has a draft model (medusa is refused)


def test_sim_deployments_differ_only_in_speculation(make_cfg):
    cfg = make_cfg(runtime="sim", resources_mode="device-plugin")
    deps = _deployments(render.render_objects(cfg, prompts=FIXED_PROMPTS))
    diff = structural_diff(deps["baseline"], deps["speculative"])
    assert unexpected_paths(diff) == []
    b_args, s_args = _container(deps["baseline"])["args"], _container(deps["speculative"])["args"]
    assert _without(s_args, "--draft", "--window") == [*b_args[:-2], "--speculative", *b_args[-2:]]


def test_structural_diff_catches_another_namespace(make_cfg):
    # The allowed path metadata.name must not let metadata.namespace (same prefix) through.
    deps = _deployments(render.render_objects(make_cfg(), prompts=FIXED_PROMPTS))
    moved = json.loads(json.dumps(deps["speculative"]))
    moved["metadata"]["namespace"] = "elsewhere"
    diff = structural_diff(deps["baseline"], moved)
    assert "metadata.namespace" in diff
    assert unexpected_paths(diff) == ["metadata.namespace"]
    # and the other prefix holes of the same kind
    moved["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "x"}}]
    moved["metadata"]["labelsExtra"] = {"a": "b"}
    assert set(unexpected_paths(structural_diff(deps["baseline"], moved))) == {
        "metadata.namespace",
        "metadata.labelsExtra",
        "spec.template.spec.containers[0].envFrom",
    }


def test_structural_diff_catches_a_resource_difference(make_cfg):
    deps = _deployments(render.render_objects(make_cfg(), prompts=FIXED_PROMPTS))
    other = json.loads(json.dumps(deps["speculative"]))
    other["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "64"
    diff = structural_diff(deps["baseline"], other)
    assert "spec.template.spec.containers[0].resources.limits.cpu" in diff


# ---- dialect and mode flags ---------------------------------------------------------------------


def test_default_reproduces_the_published_experiment(make_cfg):
    cfg = make_cfg()
    deps = _deployments(render.render_objects(cfg, prompts=FIXED_PROMPTS))
    base, spec = _container(deps["baseline"]), _container(deps["speculative"])
    assert base["command"] == spec["command"] == ["vllm", "serve"]
    assert base["args"][0] == "/var/mdl/models/Qwen/Qwen3-32B"
    for args in (base["args"], spec["args"]):
        assert _flag(args, "--tensor-parallel-size") == "32"
        assert _flag(args, "--max-num-seqs") == "4"
        assert _flag(args, "--max-model-len") == "1024"
        assert _flag(args, "--served-model-name") == "Qwen/Qwen3-32B"
    assert json.loads(_flag(spec["args"], "--override-neuron-config")) == {
        "save_sharded_checkpoint": True,
        "enable_fused_speculation": True,
    }
    assert json.loads(_flag(spec["args"], "--speculative-config")) == {
        "model": "/var/mdl/models/Qwen/Qwen3-1.7B",
        "num_speculative_tokens": 7,
        "max_model_len": 1024,
    }
    env = {e["name"]: e.get("value") for e in spec["env"]}
    assert env["VLLM_NEURON_FRAMEWORK"] == "neuronx-distributed-inference"
    assert env["DRAFT_MODEL_ID"] == "Qwen/Qwen3-1.7B"
    assert env["NEURON_COMPILED_ARTIFACTS"] == f"/var/mdl/compiled/{cfg.artifact_key(True)}"
    assert env["NEURON_LOGICAL_NC_CONFIG"] == "2"
    assert deps["baseline"]["metadata"]["name"] == "qwen-vllm"
    assert deps["speculative"]["metadata"]["name"] == "qwen-sd-vllm"


def _spec_container(cfg: Any) -> dict[str, Any]:
    return _container(_deployments(render.render_objects(cfg, prompts=FIXED_PROMPTS))["speculative"])


def test_vllm_neuron_current_plugin_uses_neuron_config_and_eagle3(make_cfg):
    cfg = make_cfg(SUPPORTED["vllm-neuron-eagle3"], num_speculative_tokens=5)
    assert (
        cfg.server_image
        == "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.24.0.1.1.0-neuronx-py313-sdk2.32.0-ubuntu24.04"
    )
    spec = _spec_container(cfg)
    assert spec["image"] == cfg.server_image
    assert "--override-neuron-config" not in spec["args"]
    assert json.loads(_flag(spec["args"], "--additional-config")) == {"neuron_config": {}}
    assert "--no-enable-prefix-caching" in spec["args"]  # the plugin then sets block_size = max_model_len
    assert json.loads(_flag(spec["args"], "--speculative-config")) == {
        "method": "eagle3",
        "model": "/var/mdl/models/yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
        "num_speculative_tokens": 5,
    }
    assert "VLLM_NEURON_FRAMEWORK" not in {e["name"] for e in spec["env"]}


def test_vllm_neuron_0_2_uses_override_neuron_config_and_eagle_v1(make_cfg):
    cfg = make_cfg(SUPPORTED["vllm-neuron-0.2-eagle"])
    assert cfg.server_image.endswith(":0.11.0-neuronx-py312-sdk2.27.1-ubuntu24.04")
    spec = _spec_container(cfg)
    # plugin 0.2.x sets the fused/EAGLE keys itself from the speculative config
    assert json.loads(_flag(spec["args"], "--additional-config")) == {
        "override_neuron_config": {"save_sharded_checkpoint": True}
    }
    assert "--no-enable-prefix-caching" in spec["args"]
    sc = json.loads(_flag(spec["args"], "--speculative-config"))
    assert sc["method"] == "eagle" and sc["num_speculative_tokens"] == 7


def test_image_override_wins_over_the_dialect_default(make_cfg):
    cfg = make_cfg(SUPPORTED["vllm-neuron-eagle3"], image="123456789012.dkr.ecr.us-east-2.amazonaws.com/vllm:x")
    assert _spec_container(cfg)["image"] == "123456789012.dkr.ecr.us-east-2.amazonaws.com/vllm:x"


@pytest.mark.parametrize(
    ("combo", "expected", "method"),
    [
        ("legacy-neuron-fused", {"enable_fused_speculation": True}, None),
        ("legacy-neuron-eagle", {"enable_fused_speculation": True, "enable_eagle_speculation": True}, "eagle"),
    ],
)
def test_legacy_modes(make_cfg, combo, expected, method):
    spec = _spec_container(make_cfg(SUPPORTED[combo]))
    over = json.loads(_flag(spec["args"], "--override-neuron-config"))
    assert {k: v for k, v in over.items() if k != "save_sharded_checkpoint"} == expected
    sc = json.loads(_flag(spec["args"], "--speculative-config"))
    assert sc.get("method") == method
    assert "--no-enable-prefix-caching" not in spec["args"]


def test_artifact_paths_are_per_configuration(make_cfg):
    def path(cfg, speculative):
        return server.artifacts_path(cfg, speculative)

    a = make_cfg()
    seen = {
        path(a, False),
        path(a, True),
        path(make_cfg(num_speculative_tokens=5), True),
        path(make_cfg(draft="qwen3-0.6b"), True),
        path(make_cfg(max_num_seqs=8), True),
        path(make_cfg(max_model_len=2048), True),
        path(make_cfg(tensor_parallel_size=64, resources__neuron_devices=16), True),
        path(make_cfg(image="123456789012.dkr.ecr.us-east-2.amazonaws.com/vllm:other"), True),
    }
    assert len(seen) == 8
    assert all(p.startswith("/var/mdl/compiled/") for p in seen)
    assert path(make_cfg(num_speculative_tokens=5), False) == path(a, False)  # baseline reused across windows
    # the default image resolves to the same string as before, so existing compiled artifacts keep their key
    assert path(a, False) == path(make_cfg(image=a.server_image), False)


def test_hub_source_uses_hf_id_and_secret_ref(make_cfg):
    cfg = make_cfg(model_source="hub", hf_token_secret={"name": "hf", "key": "token"})
    objs = render.render_objects(cfg, prompts=FIXED_PROMPTS)
    c = _container(_deployments(objs)["speculative"])
    assert c["args"][0] == "Qwen/Qwen3-32B"
    assert json.loads(_flag(c["args"], "--speculative-config"))["model"] == "Qwen/Qwen3-1.7B"
    (token,) = [e for e in c["env"] if e["name"] == "HF_TOKEN"]
    assert token == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}
    assert "Secret" not in {o["kind"] for o in objs}


def test_device_plugin_requests_extended_resources(make_cfg):
    cfg = make_cfg(resources_mode="device-plugin")
    objs = render.render_objects(cfg, prompts=FIXED_PROMPTS)
    assert not _by_kind(objs, "ResourceClaimTemplate")
    for dep in _deployments(objs).values():
        res = _container(dep)["resources"]
        assert res["requests"]["aws.amazon.com/neuron"] == res["limits"]["aws.amazon.com/neuron"] == "8"
        assert "resourceClaims" not in dep["spec"]["template"]["spec"]


def test_dra_v1_and_v1beta1_claim_shapes(make_cfg):
    (v1,) = _by_kind(render.render_objects(make_cfg(), prompts=FIXED_PROMPTS), "ResourceClaimTemplate")
    assert v1["apiVersion"] == "resource.k8s.io/v1"
    req = v1["spec"]["spec"]["devices"]["requests"][0]
    assert req["exactly"]["deviceClassName"] == "neuron.aws.com"
    assert req["exactly"]["count"] == 8
    params = v1["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert params["kind"] == "NeuronConfig" and params["logicalNeuronCore"] == 2
    assert v1["spec"]["spec"]["devices"]["constraints"][0]["matchAttribute"] == "resource.aws.com/devicegroup8_id"
    objs = render.render_objects(make_cfg(resources_mode="dra-v1beta1"), prompts=FIXED_PROMPTS)
    (beta,) = _by_kind(objs, "ResourceClaimTemplate")
    assert beta["apiVersion"] == "resource.k8s.io/v1beta1"
    breq = beta["spec"]["spec"]["devices"]["requests"][0]
    assert "exactly" not in breq and breq["count"] == 8
    for dep in _deployments(objs).values():
        spec = dep["spec"]["template"]["spec"]
        assert spec["resourceClaims"] == [{"name": "neuron", "resourceClaimTemplateName": "spectrn-neuron-8"}]
        assert _container(dep)["resources"]["claims"] == [{"name": "neuron"}]


def test_probes_allow_for_neuron_compilation(make_cfg):
    cfg = make_cfg(probes={"startup_budget_s": 17100, "period_s": 30})
    for dep in _deployments(render.render_objects(cfg, prompts=FIXED_PROMPTS)).values():
        c = _container(dep)
        sp = c["startupProbe"]
        assert sp["httpGet"]["path"] == "/health"
        assert sp["periodSeconds"] * sp["failureThreshold"] >= 17100
        assert c["readinessProbe"]["httpGet"]["path"] == c["livenessProbe"]["httpGet"]["path"] == "/health"


# ---- security defaults --------------------------------------------------------------------------


def _pod_specs(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o["spec"]["template"]["spec"] for o in objs if o["kind"] in ("Deployment", "Job")]


@pytest.mark.parametrize("runtime", ["neuron", "sim"])
@pytest.mark.parametrize("engine", ["spectrn", "llmperf"])
def test_secure_defaults(make_cfg, runtime, engine):
    cfg = make_cfg(runtime=runtime, model_source="hub", hf_token_secret={"name": "hf"})
    objs = render.render_objects(cfg, run_id="sec", engine=engine, prompts=FIXED_PROMPTS)
    for spec in _pod_specs(objs):
        assert spec["automountServiceAccountToken"] is False
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in spec.get("initContainers", []) + spec["containers"]:
            sc = c["securityContext"]
            assert sc.get("privileged", False) is False
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert "add" not in sc["capabilities"]
            for part in ("requests", "limits"):
                assert c["resources"][part]["cpu"] and c["resources"][part]["memory"]
            for env in c.get("env", []):
                if "value" in env:
                    assert not any(w in env["name"] for w in ("TOKEN", "SECRET", "PASSWORD")), env
    text = output.to_yaml(objs)
    assert re.search(r"\bhf_[A-Za-z0-9]{16,}", text) is None and "kind: Secret" not in text


def test_restricted_profile_for_sim_and_load_pods(make_cfg):
    cfg = make_cfg(runtime="sim")
    objs = render.render_objects(cfg, run_id="sec", prompts=FIXED_PROMPTS)
    (ns,) = _by_kind(objs, "Namespace")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert not _by_kind(objs, "PersistentVolume") and not _by_kind(objs, "PersistentVolumeClaim")
    for spec in _pod_specs(objs):
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] != 0
        assert all(v.get("persistentVolumeClaim") is None for v in spec["volumes"])
        for c in spec.get("initContainers", []) + spec["containers"]:
            assert c["securityContext"]["readOnlyRootFilesystem"] is True


def test_neuron_namespace_is_baseline_with_shm_and_s3(make_cfg):
    objs = render.render_objects(make_cfg(), prompts=FIXED_PROMPTS)
    (ns,) = _by_kind(objs, "Namespace")
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"
    for dep in _deployments(objs).values():
        vols = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
        assert vols["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "128Gi"}
        assert vols["models"]["persistentVolumeClaim"]["claimName"] == "spectrn-s3"
    (pv,) = _by_kind(objs, "PersistentVolume")
    assert pv["spec"]["csi"]["driver"] == "s3.csi.aws.com"
    assert pv["spec"]["storageClassName"] == ""
    (pvc,) = _by_kind(objs, "PersistentVolumeClaim")
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"]
    assert pv["spec"]["claimRef"] == {"namespace": "spectrn", "name": pvc["metadata"]["name"]}


def test_irsa_annotation_only_when_role_given(make_cfg):
    objs = render.render_objects(make_cfg(), prompts=FIXED_PROMPTS)
    assert all("annotations" not in sa["metadata"] for sa in _by_kind(objs, "ServiceAccount"))
    role = "arn:aws:iam::111122223333:role/spectrn-load"
    objs = render.render_objects(make_cfg(service_accounts={"loadgen_role_arn": role}), prompts=FIXED_PROMPTS)
    sas = {sa["metadata"]["name"]: sa for sa in _by_kind(objs, "ServiceAccount")}
    assert sas["spectrn-loadgen"]["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": role}


def test_labels_on_every_object(make_cfg):
    for obj in render.render_objects(make_cfg(), run_id="lbl", prompts=FIXED_PROMPTS):
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "spectrn"
        assert labels["app.kubernetes.io/part-of"] == "spectrn"
        assert labels["spectrn.io/component"]


def test_iam_policy_is_least_privilege(make_cfg):
    cfg = make_cfg(cloudwatch={"namespace": "MyTeam/Spec", "dashboard_prefix": "spec", "region": "eu-west-1"})
    policy = iam.iam_policy(cfg)
    statements = policy["Statement"]
    actions = [a for st in statements for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])]
    assert set(actions) <= {"cloudwatch:PutMetricData", "cloudwatch:PutDashboard", "cloudwatch:GetDashboard"}
    assert {"cloudwatch:PutMetricData", "cloudwatch:PutDashboard"} <= set(actions)
    assert all(st["Effect"] == "Allow" for st in statements)
    for st in statements:
        if st["Action"] == "cloudwatch:PutMetricData":
            assert st["Condition"]["StringEquals"]["cloudwatch:namespace"] == "MyTeam/Spec"
        else:
            assert st["Resource"].endswith(":dashboard/spec-*")
    with pytest.raises(ConfigError, match="dashboard_prefix"):
        iam.iam_policy(make_cfg(cloudwatch={"dashboard_prefix": "bad prefix*"}))


# ---- load Job -----------------------------------------------------------------------------------


def test_loadgen_job_follows_the_load_pod_contract(make_cfg):
    cfg = make_cfg()
    cm, job = load_job.render_load_job(cfg, "run-1", prompts=FIXED_PROMPTS)
    assert cm["kind"] == "ConfigMap" and job["kind"] == "Job"
    assert "completionMode" not in job["spec"]
    c = job["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == cfg.spectrn_image
    assert c["command"] == ["spectrn"]
    args = c["args"]
    assert args[0] == "loadgen"
    assert [args[i + 1] for i, a in enumerate(args) if a == "--endpoint"] == [
        "baseline=http://qwen-vllm.spectrn.svc.cluster.local:8000",
        "speculative=http://qwen-sd-vllm.spectrn.svc.cluster.local:8000",
    ]
    assert _flag(args, "--config") == "/etc/spectrn/spectrn.yaml"
    assert _flag(args, "--prompts-file") == "/etc/spectrn/prompts/structured.yaml"
    assert _flag(args, "--run-id") == "run-1"
    assert _flag(args, "--out") == "/results/run-1"
    assert _flag(args, "--hold-until-collected") == "3600"
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert {"/etc/spectrn/spectrn.yaml", "/etc/spectrn/prompts", "/results"} <= mounts
    loaded = yaml.safe_load(cm["data"]["spectrn.yaml"])
    assert loaded["target"] == "qwen3-32b" and loaded["num_speculative_tokens"] == 7


def test_loadgen_job_is_indexed_when_sharded(make_cfg):
    cfg = make_cfg(bench={"loadgen_pods": 3})
    _, job = load_job.render_load_job(cfg, "run-2", prompts=FIXED_PROMPTS)
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 3
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert _flag(args, "--shard-index") == "$(JOB_COMPLETION_INDEX)"
    assert _flag(args, "--shards") == "3"


def test_user_prompt_file_travels_in_the_configmap(make_cfg, tmp_path):
    f = tmp_path / "mine.yaml"
    f.write_text("name: mine\nprompts:\n  - id: a\n    class: structured\n    text: hi\n")
    cfg = make_cfg(bench={"prompts": str(f)})
    objs = render.render_objects(cfg, run_id="run-3")
    cms = {o["metadata"]["name"]: o for o in _by_kind(objs, "ConfigMap")}
    # the workload as read and shaped (here: nothing to shape), in spectrn's own prompt-set form
    assert yaml.safe_load(cms["spectrn-prompts"]["data"]["user-prompts.yaml"]) == yaml.safe_load(f.read_text())
    assert yaml.safe_load(cms["spectrn-config-run-3"]["data"]["spectrn.yaml"])["bench"]["prompts"] == (
        "/etc/spectrn/prompts/user-prompts.yaml"
    )
    (job,) = _by_kind(objs, "Job")
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert _flag(args, "--prompts-file") == "/etc/spectrn/prompts/user-prompts.yaml"


def test_missing_user_prompt_file(make_cfg, tmp_path):
    cfg = make_cfg(bench={"prompts": str(tmp_path / "absent.yaml")})
    with pytest.raises(ConfigError, match="bench.prompts file .* does not exist"):
        render.render_objects(cfg, run_id="r")
    assert render.render_objects(cfg, components=["namespace"])  # not needed, not read


def test_prompts_configmap_carries_the_packaged_files(make_cfg):
    from spectrn.paths import data_dir

    (cm,) = render.render_objects(make_cfg(), components=["prompts"])
    files = {p.name: p.read_text(encoding="utf-8") for p in data_dir("prompts").glob("*.yaml")}
    assert cm["data"] == files


def test_empty_prompts_folder_renders_empty_configmap(make_cfg):
    (cm,) = render.render_objects(make_cfg(), components=["prompts"], prompts={})
    assert cm["data"] == {}
    validate_k8s(cm)


def _llmperf_job(cfg: Any, run_id: str) -> dict[str, Any]:
    _, job = load_job.render_load_job(cfg, run_id, "llmperf", prompts=FIXED_PROMPTS)
    return job


def test_llmperf_job_runs_the_samples_benchmark(make_cfg):
    cfg = make_cfg()
    c = _llmperf_job(cfg, "run-4")["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == load_job.LLMPERF_IMAGE
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["SPECTRN_LLMPERF_REF"] == load_job.LLMPERF_REF
    assert env["SPECTRN_MODEL"] == "Qwen/Qwen3-32B"
    assert (env["SPECTRN_INPUT_LEN"], env["SPECTRN_OUTPUT_LEN"], env["SPECTRN_CONCURRENCY"]) == ("64", "600", "4")
    assert env["SPECTRN_SAMPLING_PARAMS"] == '{"temperature": 0.0}'
    assert env["SPECTRN_ENDPOINTS"].splitlines() == [
        "baseline http://qwen-vllm.spectrn.svc.cluster.local:8000/v1",
        "speculative http://qwen-sd-vllm.spectrn.svc.cluster.local:8000/v1",
    ]
    assert len(env["SPECTRN_CASES"].splitlines()) == len(load_job.LLMPERF_TEST_CASES)
    assert env["SPECTRN_OUT"] == "/results/run-4"
    assert {"name": "OPENAI_API_KEY", "value": "dummy"} in c["env"]
    script = c["args"][0]
    for flag in ("--model", "--mean-input-tokens", "--stddev-input-tokens 0", "--llm-api openai", "--timeout"):
        assert flag in script
    assert '"$OUT/llmperf/$slug/$variant"' in script
    assert "git clone" not in script and "apt-get" not in script


def test_llmperf_timeout_is_the_whole_runs_budget(make_cfg):
    # llmperf's --timeout stops the whole run (token_benchmark_ray.py "The amount of time to run the load test
    # for"), so it must cover every wave of requests, not one request.
    cfg = make_cfg(bench={"requests": 32, "concurrency": [4], "timeout_s": 1200})
    env = {e["name"]: e["value"] for e in _llmperf_job(cfg, "t")["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert int(env["SPECTRN_RUN_TIMEOUT_S"]) == 1200 * 8 == load_job.llmperf_run_timeout_s(cfg)
    assert load_job.llmperf_run_timeout_s(make_cfg(bench={"requests": 33, "concurrency": [4]})) == 1200 * 9


def test_llmperf_script_is_the_same_text_for_every_configuration(make_cfg):
    a = _llmperf_job(make_cfg(), "r1")["spec"]["template"]["spec"]["containers"][0]["args"][0]
    other = make_cfg(bench={"requests": 7, "max_tokens": 9, "concurrency": [2]}, namespace="elsewhere")
    b = _llmperf_job(other, "r2")["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert a == b


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_llmperf_script_is_valid_bash(make_cfg):
    script = _llmperf_job(make_cfg(), "run-5")["spec"]["template"]["spec"]["containers"][0]["args"][0]
    proc = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_llmperf_script_runs_each_case_against_each_endpoint(make_cfg, tmp_path):
    """The script's loops with llmperf, pip and the download replaced by stand-ins: every (case, variant)
    pair gets its own results folder and run, with the values exactly as the env carried them."""
    job = _llmperf_job(make_cfg(), "run-7")
    c = job["spec"]["template"]["spec"]["containers"][0]
    script = c["args"][0]
    start = script.index("OUT=")
    body = script[start:].replace("/work/venv/bin/python token_benchmark_ray.py", "record")
    body = body.replace("/work/venv/bin/python -c", "python3 -c").replace("/work/sonnet.orig.txt", "sonnet.orig")
    stub = (
        "set -euo pipefail\n"
        'record() { printf "%s|%s\\n" "$OPENAI_API_BASE" "$*" >> calls.txt; }\n'
        "mkdir -p src/llmperf && touch sonnet.orig\n"
    )
    env = {e["name"]: e["value"] for e in c["env"]}
    env.update(SPECTRN_OUT=str(tmp_path / "out"), SPECTRN_HOLD_S="0", PATH="/usr/bin:/bin")
    proc = subprocess.run(["bash", "-c", stub + body], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert len(calls) == 2 * len(load_job.LLMPERF_TEST_CASES)
    assert sum("qwen-sd-vllm" in line for line in calls) == len(load_job.LLMPERF_TEST_CASES)
    assert all("--model Qwen/Qwen3-32B" in line and "--timeout 9600" in line for line in calls)
    assert "llmperf finished; results in" in proc.stdout
    assert sorted(p.name for p in (tmp_path / "out" / "llmperf").iterdir()) == sorted(
        {"sonnet" if t == load_job.LLMPERF_KEEP_SONNET else load_job._slug(t) for t in load_job.LLMPERF_TEST_CASES}
    )


def test_wait_for_servers_script_compiles(make_cfg):
    _, job = load_job.render_load_job(make_cfg(), "run-6", prompts=FIXED_PROMPTS)
    (init,) = job["spec"]["template"]["spec"]["initContainers"]
    assert init["command"][:2] == ["python3", "-c"]
    compile(init["command"][2], "wait", "exec")
    assert init["command"][4:] == [
        "http://qwen-vllm.spectrn.svc.cluster.local:8000/health",
        "http://qwen-sd-vllm.spectrn.svc.cluster.local:8000/health",
    ]


def test_only_one_variant(make_cfg):
    objs = render.render_objects(
        make_cfg(), components=[*render.SHARED_COMPONENTS, "speculative", "loadgen"], run_id="one"
    )
    assert [d["metadata"]["name"] for d in _by_kind(objs, "Deployment")] == ["qwen-sd-vllm"]
    (job,) = _by_kind(objs, "Job")
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args.count("--endpoint") == 1


# ---- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("run_id", ["UPPER", "has_underscore", "-lead", "x" * 41, "a/b"])
def test_bad_run_ids_are_refused(make_cfg, run_id):
    with pytest.raises(ConfigError, match="run id"):
        load_job.render_load_job(make_cfg(), run_id)


def test_bad_service_account_name(make_cfg):
    with pytest.raises(ConfigError, match="service_accounts.vllm"):
        render.render_objects(make_cfg(service_accounts={"vllm": "Bad_Name"}))


def test_unknown_engine_and_component(make_cfg):
    with pytest.raises(ConfigError, match="engine"):
        load_job.render_load_job(make_cfg(), "r", "locust")
    with pytest.raises(ConfigError, match="component"):
        render.render_objects(make_cfg(), components=["gpu"])


def test_broken_template_is_a_render_error(make_cfg, tmp_path):
    import jinja2

    r = templates._Renderer(make_cfg())
    r.env.loader = jinja2.DictLoader(
        {
            "undefined.yaml.j2": "kind: ConfigMap\napiVersion: v1\nmetadata: {name: {{ missing }}}\n",
            "nokind.yaml.j2": "apiVersion: v1\nmetadata: {name: x, labels: {}}\n",
            "nolabels.yaml.j2": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
            "badyaml.yaml.j2": "a: [1, 2\n",
        }
    )
    with pytest.raises(RenderError, match="missing"):
        r.render("undefined.yaml.j2")
    with pytest.raises(RenderError, match="no kind"):
        r.render("nokind.yaml.j2")
    with pytest.raises(RenderError, match="labels"):
        r.render("nolabels.yaml.j2")
    with pytest.raises(RenderError, match="invalid YAML"):
        r.render("badyaml.yaml.j2")


# ---- output -------------------------------------------------------------------------------------


def test_to_yaml_round_trips(make_cfg):
    objs = render.render_objects(make_cfg(), run_id="rt", engine="llmperf", prompts=FIXED_PROMPTS)
    text = output.to_yaml(objs)
    assert text.startswith("---\n")
    assert list(yaml.safe_load_all(text)) == objs
    assert text.count("# Pod Security Standards level: baseline") == 2  # the two vLLM Deployments
    assert text.count("# Pod Security Standards level: restricted") == 1  # the load Job
    assert "# Placeholder bucket" in text
    sim = output.to_yaml(render.render_objects(make_cfg(runtime="sim"), prompts=FIXED_PROMPTS))
    assert sim.count("# Pod Security Standards level: restricted") == 2 and "level: baseline" not in sim


def test_write_objects_one_file_each(make_cfg, tmp_path):
    objs = render.render_objects(make_cfg(), run_id="files", prompts=FIXED_PROMPTS)
    paths = output.write_objects(objs, tmp_path / "out")
    assert [p.name for p in paths] == sorted(p.name for p in paths)  # apply order == file order
    assert paths[0].name == "01-namespace-spectrn.yaml"
    assert [yaml.safe_load(p.read_text()) for p in paths] == objs
    assert not list((tmp_path / "out").glob(".*"))  # no temp files left behind


def test_write_objects_into_a_dotdot_path_stays_inside_it(make_cfg, tmp_path):
    # `render -o ../out` is the user's chosen folder: allowed, and every file lands directly inside it
    objs = render.render_objects(make_cfg(), prompts=FIXED_PROMPTS)
    (tmp_path / "here").mkdir()
    paths = output.write_objects(objs, tmp_path / "here" / ".." / "out")
    assert {p.resolve().parent for p in paths} == {(tmp_path / "out").resolve()}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in paths)
    assert [p for p in tmp_path.rglob("*") if p.is_file() and p.parent.name != "out"] == []


def test_write_objects_refuses_a_planted_symlink_and_a_file(make_cfg, tmp_path):
    objs = render.render_objects(make_cfg(), components=["namespace"])
    out = tmp_path / "out"
    out.mkdir()
    (out / output.object_filename(1, objs[0])).symlink_to(tmp_path / "elsewhere.yaml")
    with pytest.raises(ConfigError, match="does not lead into"):
        output.write_objects(objs, out)
    assert not (tmp_path / "elsewhere.yaml").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is not a folder"):
        output.write_objects(objs, tmp_path / "file")


# ---- a real trn2 cluster: the S3 volume, the scheduler, Kubernetes' own expansion ------------------------------


def _all_pods(make_cfg: Any) -> list[tuple[str, dict[str, Any]]]:
    """(where, pod spec) of every pod spectrn renders: each supported configuration in each resources mode,
    the simulator, the hub source, both load engines and the compile Jobs."""
    from spectrn.deploy.compile import compile_jobs

    out = []
    configs = {f"{c}-{r}": make_cfg({**SUPPORTED[c], "resources_mode": r}) for c in SUPPORTED for r in RESOURCES}
    configs["sim"] = make_cfg(runtime="sim", resources_mode="device-plugin")
    configs["hub"] = make_cfg(model_source="hub", hf_token_secret={"name": "hf"})
    for name, cfg in configs.items():
        for engine in ("spectrn", "llmperf"):
            for obj in render.render_objects(cfg, run_id="pods", engine=engine, prompts=FIXED_PROMPTS):
                if obj["kind"] in ("Deployment", "Job"):
                    out.append((f"{name} {engine} {obj['metadata']['name']}", obj["spec"]["template"]["spec"]))
        if cfg.runtime == "neuron":
            for job in compile_jobs(cfg, [cfg.draft], [cfg.num_speculative_tokens]):
                out.append((f"{name} {job['metadata']['name']}", job["spec"]["template"]["spec"]))
    return out


def test_pods_that_write_the_s3_volume_have_an_fs_group(make_cfg):
    """The rule: a pod that mounts the Mountpoint S3 claim with a container that is not root, or is root with
    every capability dropped (no CAP_DAC_OVERRIDE), sets fsGroup; the CSI driver v2 then mounts with
    gid=fsGroup and group-writable modes, otherwise the bucket's files belong to uid 1000 with mode 755."""
    checked = 0
    for where, spec in _all_pods(make_cfg):
        claims = {
            v["name"]
            for v in spec["volumes"]
            if (v.get("persistentVolumeClaim") or {}).get("claimName") == "spectrn-s3"
        }
        if not claims:
            continue
        pod_sc = spec.get("securityContext") or {}
        for c in spec["containers"]:
            if not claims & {m["name"] for m in c.get("volumeMounts", [])}:
                continue
            sc = c.get("securityContext") or {}
            non_root = (
                sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
                or sc.get("runAsUser", pod_sc.get("runAsUser", 0)) != 0
            )
            caps_dropped = "ALL" in ((sc.get("capabilities") or {}).get("drop") or [])
            if non_root or caps_dropped:
                assert isinstance(pod_sc.get("fsGroup"), int) and pod_sc["fsGroup"] > 0, where
                checked += 1
    assert checked >= 2 * len(SUPPORTED) * len(RESOURCES)  # both Deployments of every neuron configuration


def test_the_fs_group_rule_can_fail(make_cfg):
    dep = _deployments(render.render_objects(make_cfg(), prompts=FIXED_PROMPTS))["baseline"]
    spec = dep["spec"]["template"]["spec"]
    assert spec["securityContext"]["fsGroup"] == 1000
    assert (
        _deployments(render.render_objects(make_cfg(s3={"fs_group": 4242}), prompts=FIXED_PROMPTS))["baseline"]["spec"][
            "template"
        ]["spec"]["securityContext"]["fsGroup"]
        == 4242
    )


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"resources_mode": "device-plugin"}, "my-scheduler"),
        ({"resources_mode": "device-plugin", "scheduler_name": "neuron-scheduler"}, "neuron-scheduler"),
        ({"resources_mode": "device-plugin", "scheduler_name": ""}, None),
        ({"resources_mode": "dra-v1"}, None),
        ({"resources_mode": "dra-v1beta1"}, None),
        ({"resources_mode": "device-plugin", "runtime": "sim"}, None),
    ],
)
def test_neuron_scheduler_extension_in_device_plugin_mode_only(make_cfg, overrides, expected):
    from spectrn.deploy.compile import compile_jobs

    cfg = make_cfg(**overrides)
    specs = [
        d["spec"]["template"]["spec"] for d in _deployments(render.render_objects(cfg, prompts=FIXED_PROMPTS)).values()
    ]
    if cfg.runtime == "neuron":
        specs += [j["spec"]["template"]["spec"] for j in compile_jobs(cfg, ["qwen3-1.7b"], [7])]
    assert [s.get("schedulerName") for s in specs] == [expected] * len(specs)


def test_a_value_reaches_the_container_as_written_not_expanded(make_cfg):
    # Kubernetes expands $(NAME) in command, args and env values: a configured value must come out as typed.
    cfg = make_cfg(runtime="sim", model_source="hub", hf_token_secret={"name": "hf"}, sim={"preset": "$(HF_TOKEN)$$x"})
    spec = _deployments(render.render_objects(cfg, prompts=FIXED_PROMPTS))["speculative"]
    c = _container(spec)
    env = {"HF_TOKEN": "hf_SECRETSECRETSECRET", "MODEL_ID": "m"}
    assert _flag(c["args"], "--preset") == "$$(HF_TOKEN)$$$$x"
    assert k8s_expand(_flag(c["args"], "--preset"), env) == "$(HF_TOKEN)$$x"
    assert k8s_expand("$(HF_TOKEN)", env) == "hf_SECRETSECRETSECRET"  # what an unescaped value would become


def test_every_rendered_container_string_survives_kubernetes_expansion(make_cfg):
    """Scripts and values alike: with every env name defined, expansion changes nothing but the escapes, and
    the only deliberate reference is the shard index of a sharded load Job."""
    for where, spec in _all_pods(make_cfg):
        for c in [*(spec.get("initContainers") or []), *spec["containers"]]:
            defined = {e["name"]: "INJECTED" for e in c.get("env") or []}
            defined["JOB_COMPLETION_INDEX"] = "INJECTED"
            for text in [*c.get("command", []), *c.get("args", []), *(e.get("value", "") for e in c.get("env") or [])]:
                assert "INJECTED" not in k8s_expand(text, defined) or text == "$(JOB_COMPLETION_INDEX)", (where, text)


def test_scripts_hold_no_configured_value(make_cfg):
    from spectrn.deploy.compile import WRAPPER, compile_jobs

    odd = make_cfg(namespace="other-ns", port=9123, s3={"mount_path": "/mnt/weights", "bucket": "b-u-c"})
    (job,) = compile_jobs(odd, ["qwen3-1.7b"], [7], baseline=False)
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert script == WRAPPER
    assert not any(v in script for v in ("9123", "/mnt/weights", "other-ns", odd.artifact_key(True)))
