"""Safe by default: scanner findings, Pod Security levels, no credentials anywhere, least privilege.

* checkov on the rendered manifests of the main configurations: every finding is in
  ``security/checkov-allowlist.yaml`` with a reason, and every allow-list entry still matches something.
* Pod Security Standards: the simulator pods and the load pods meet "restricted", the Neuron vLLM pods
  "baseline"; each pod spec states its level and the Namespace enforces baseline and warns on restricted.
* Credentials: tokens in URLs, flags and config values are masked in the CLI's error output; no secret
  appears in rendered manifests or in a run folder, even when the endpoint URL or the environment held one.
* Least privilege: the load pod gets no Kubernetes API token and no RBAC; the IAM policy allows only
  PutMetricData in spectrn's namespace and region, and the dashboards under spectrn's prefix.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from doubles.relhelp import Behaviour, FaultyServer, bench_argv, run_cli
from require_tiers import tier_missing

ROOT = Path(__file__).resolve().parents[2]
ALLOWLIST = ROOT / "security" / "checkov-allowlist.yaml"
REGISTRY = "123456789012.dkr.ecr.us-east-2.amazonaws.com"
BASE = ["--set", "s3.bucket=my-models", "--job", "--run-id", "r1", "--set", f"spectrn_image={REGISTRY}/spectrn:0.1.0"]
CONFIGS: dict[str, list[str]] = {
    "default": [],
    "device-plugin": ["--set", "resources_mode=device-plugin"],
    "sim": [
        "--set",
        "runtime=sim",
        "--set",
        "resources_mode=device-plugin",
        "--set",
        f"sim.image={REGISTRY}/spectrn:0.1.0",
    ],
    "llmperf": ["--engine", "llmperf"],
}
DIGEST = "sha256:" + "0123456789abcdef" * 4

SECRET_PATTERNS = [
    re.compile(r"hf_[A-Za-z0-9]{16,}"),
    re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b"),
    re.compile(r"(?i)bearer\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)(aws_secret_access_key|password|passwd)\s*[:=]\s*[^\s*'\"]{6,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"://[^/\s:@]+:[^/\s@*]+@"),  # user:password@host
]
# planted in the tests below; none may survive into any output
PLANTED = {
    "hf": "hf_" + "Zq7" * 8,
    "aws_key": "AKIA" + "Q" * 16,
    "aws_secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
    "password": "s3cr3t-Passw0rd",
    "token": "tok" + "9" * 20,
}


def _render(out: Path, *extra: str) -> None:
    from spectrn.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(["render", *BASE, *extra, "-o", str(out)])
    assert e.value.code == 0


def _docs(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for f in sorted(folder.glob("*.yaml")):
        text = f.read_text()
        out += [(text, d) for d in yaml.safe_load_all(text) if d]
    return out


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    if obj["kind"] in ("Deployment", "Job"):
        return obj["spec"]["template"]["spec"]  # type: ignore[no-any-return]
    return None


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("rendered")
    for name, extra in CONFIGS.items():
        _render(root / name, *extra)
    pinned = [
        "--set",
        f"image=public.ecr.aws/neuron/vllm@{DIGEST}",
        "--set",
        f"spectrn_image={REGISTRY}/spectrn@{DIGEST}",
    ]
    _render(root / "digest", *pinned)
    _compile_jobs(root / "compile")
    return root


def _compile_jobs(out: Path) -> None:
    """The Jobs `spectrn compile` applies (printed by --dry-run, which needs no cluster)."""
    import io
    from contextlib import redirect_stdout

    from spectrn.cli.main import main

    buf = io.StringIO()
    with redirect_stdout(buf), pytest.raises(SystemExit) as e:
        main(["compile", "--dry-run", "--set", "s3.bucket=my-models", "--drafts", "qwen3-1.7b", "--windows", "7"])
    assert e.value.code == 0
    out.mkdir()
    (out / "compile.yaml").write_text(buf.getvalue())


# ---- checkov -----------------------------------------------------------------------------------


def _checkov() -> str | None:
    for candidate in (os.environ.get("SPECTRN_CHECKOV"), str(ROOT / ".venv-checkov" / "bin" / "checkov")):
        if candidate and Path(candidate).is_file():
            return candidate
    return shutil.which("checkov")


def _scan(folder: Path) -> list[dict[str, Any]]:
    exe = _checkov()
    if exe is None:
        tier_missing(
            "*** checkov is NOT INSTALLED: the manifest security scan did NOT run. "
            "Install it with `make checkov` (cached in .venv-checkov) or set SPECTRN_CHECKOV. ***",
            "SPECTRN_REQUIRE_CHECKOV",
        )
    proc = subprocess.run(
        [exe, "-d", str(folder), "--framework", "kubernetes", "-o", "json", "--quiet", "--compact", "--skip-download"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "BC_SKIP_MAPPING": "TRUE"},
    )
    assert proc.stdout.strip(), proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    reports = data if isinstance(data, list) else [data]
    failed: list[dict[str, Any]] = []
    for report in reports:
        if "results" not in report:  # an empty report ({"passed": 0, ...}) when nothing failed
            continue
        assert report["summary"]["parsing_errors"] == 0
        failed += report["results"]["failed_checks"]
    return failed


def _finding(f: dict[str, Any], root: Path) -> tuple[str, str, str, str]:
    """(config, check id, kind, name): graph checks name a Pod as Pod.<ns>.<name>.<labels...>."""
    config = Path(f["file_path"].lstrip("/")).parts[0] if not Path(f["file_path"]).is_absolute() else ""
    if not config:
        config = Path(f["file_abs_path"]).relative_to(root).parts[0]
    kind, _ns, name = f["resource"].split(".")[:3]
    return config, f["check_id"], kind, name


def _allowed(entry: dict[str, Any], finding: tuple[str, str, str, str]) -> bool:
    config, check, kind, name = finding
    return (
        entry["check"] == check
        and kind in entry["kinds"]
        and any(fnmatch.fnmatch(name, p) for p in entry["names"])
        and (entry["configs"] == ["*"] or config in entry["configs"])
    )


def test_checkov_findings_are_all_justified_and_the_allowlist_is_current(rendered: Path) -> None:
    allow = yaml.safe_load(ALLOWLIST.read_text())["findings"]
    assert all(len(e["why"]) > 60 for e in allow), "every accepted finding needs a real justification"
    findings = {_finding(f, rendered) for f in _scan(rendered)}
    assert findings, "checkov reported nothing at all: is it scanning the folder?"
    unexplained = sorted(f for f in findings if not any(_allowed(e, f) for e in allow))
    assert not unexplained, f"checkov findings missing from {ALLOWLIST.name}: {unexplained}"
    unused = [e["check"] for e in allow if not any(_allowed(e, f) for f in findings)]
    assert not unused, f"allow-list entries that match nothing any more (remove them): {unused}"
    # the restricted workloads have none of the root / writable-root findings
    root_checks = {"CKV_K8S_22", "CKV_K8S_23", "CKV_K8S_40", "CKV_K8S_16", "CKV_K8S_20", "CKV_K8S_28"}
    load_jobs = ("spectrn-loadgen-", "spectrn-llmperf-")
    assert not [f for f in findings if f[1] in root_checks and (f[0] == "sim" or f[3].startswith(load_jobs))]


def test_pinning_images_by_digest_clears_the_digest_finding(rendered: Path) -> None:
    findings = {_finding(f, rendered) for f in _scan(rendered)}
    assert not [f for f in findings if f[0] == "digest" and f[1] in ("CKV_K8S_43", "CKV_K8S_15")]
    assert [f for f in findings if f[0] == "default" and f[1] == "CKV_K8S_43"]  # the control


# ---- Pod Security Standards ----------------------------------------------------------------------

RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
BASELINE_CAPS = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}


def baseline_violations(spec: dict[str, Any]) -> list[str]:
    out = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            out.append(key)
    out += [f"hostPath volume {v['name']}" for v in spec.get("volumes") or [] if "hostPath" in v]
    for c in (spec.get("initContainers") or []) + spec["containers"]:
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            out.append(f"{c['name']}: privileged")
        added = set((sc.get("capabilities") or {}).get("add") or [])
        if added - BASELINE_CAPS:
            out.append(f"{c['name']}: adds {sorted(added - BASELINE_CAPS)}")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            out.append(f"{c['name']}: hostPort")
        if sc.get("procMount", "Default") != "Default":
            out.append(f"{c['name']}: procMount")
    return out


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    out = baseline_violations(spec)
    pod_sc = spec.get("securityContext") or {}
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume {v['name']}: {sorted(kinds)}")
    for c in (spec.get("initContainers") or []) + spec["containers"]:
        sc = c.get("securityContext") or {}
        name = c["name"]
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name}: allowPrivilegeEscalation must be false")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            out.append(f"{name}: capabilities must drop ALL")
        if set((sc.get("capabilities") or {}).get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"{name}: adds capabilities")
        if sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True:
            out.append(f"{name}: runAsNonRoot must be true")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            out.append(f"{name}: runAsUser 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name}: seccompProfile must be RuntimeDefault")
    return out


def test_the_checker_catches_violations() -> None:
    """The rule checks themselves, on a pod that breaks each rule once."""
    bad = {
        "hostNetwork": True,
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
        "containers": [{"name": "c", "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}}],
    }
    found = restricted_violations(bad)
    for needle in ("hostNetwork", "hostPath", "privileged", "SYS_ADMIN", "allowPrivilegeEscalation", "drop ALL"):
        assert any(needle in v for v in found), needle
    assert any("runAsNonRoot" in v for v in found) and any("seccompProfile" in v for v in found)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_pod_security_levels(rendered: Path, config: str) -> None:
    pods = 0
    for text, obj in _docs(rendered / config):
        if obj["kind"] == "Namespace":  # the simulator's namespace can enforce restricted: nothing needs more
            labels = obj["metadata"]["labels"]
            assert labels["pod-security.kubernetes.io/enforce"] == ("restricted" if config == "sim" else "baseline")
            assert labels["pod-security.kubernetes.io/warn"] == "restricted"
        spec = _pod_spec(obj)
        if spec is None:
            continue
        pods += 1
        neuron = obj["kind"] == "Deployment" and config != "sim"
        level = "baseline" if neuron else "restricted"
        assert f"# Pod Security Standards level: {level}" in text, (config, obj["metadata"]["name"])
        violations = baseline_violations(spec) if neuron else restricted_violations(spec)
        assert violations == [], (config, obj["metadata"]["name"], violations)
        # the least a baseline pod still does
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
        assert (spec.get("securityContext") or {}).get("seccompProfile", {}).get("type") == "RuntimeDefault"
    assert pods == 3


def test_compile_jobs_are_pod_security_baseline(rendered: Path) -> None:
    jobs = [(text, d) for text, d in _docs(rendered / "compile") if d["kind"] == "Job"]
    assert len(jobs) == 2  # baseline + one speculative configuration
    for text, job in jobs:
        assert "# Pod Security Standards level: baseline" in text
        spec = _pod_spec(job)
        assert spec is not None and baseline_violations(spec) == []
        for c in spec["containers"]:
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_load_pod_has_no_api_access_and_nothing_renders_rbac(rendered: Path) -> None:
    for config in CONFIGS:
        docs = [d for _, d in _docs(rendered / config)]
        assert not [d for d in docs if d["kind"] in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")]
        for d in docs:
            if d["kind"] == "ServiceAccount":
                assert d.get("automountServiceAccountToken") is False, d["metadata"]["name"]
            spec = _pod_spec(d)
            if spec is not None:
                assert spec["automountServiceAccountToken"] is False
                assert spec.get("enableServiceLinks") is False


# ---- credentials ---------------------------------------------------------------------------------


def _assert_clean(text: str, where: str) -> None:
    for name, value in PLANTED.items():
        assert value not in text, f"planted {name} leaked into {where}"
    for pattern in SECRET_PATTERNS:
        m = pattern.search(text)
        assert m is None, f"secret-like {m.group(0)!r} in {where}"


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["bench", "--endpoint", f"baseline=http://bench:{PLANTED['password']}@127.0.0.1:9/v1"], 4),
        (["bench", "--endpoint", f"baseline=http://127.0.0.1:9/v1?token={PLANTED['token']}"], 4),
        (["bench", "--endpoint", f"baseline=http://127.0.0.1:9/v1?api_key={PLANTED['hf']}"], 4),
        (["bench", "--endpoint", f"Authorization: Bearer {PLANTED['token']}"], 2),
        (["render", "--set", f"password: {PLANTED['password']}"], 2),
        (["render", "--run-id", PLANTED["aws_key"]], 2),
        (["render", "--set", f"aws_secret_access_key={PLANTED['aws_secret']}"], 2),
        (["render", "--draft", PLANTED["hf"]], 2),
        (["analyze", f"results/{PLANTED['hf']}"], 5),
        ([PLANTED["hf"]], 2),
    ],
    ids=["url-userinfo", "url-token", "url-api-key", "bearer-header", "set-password", "aws-key-as-run-id",
         "aws-secret-as-set", "hf-token-as-draft", "hf-token-in-a-path", "usage-error-echoing-a-command"],
)  # fmt: skip
def test_credentials_in_input_are_masked_in_error_output(argv: list[str], code: int, capsys) -> None:
    got, out, err = run_cli(argv, capsys)
    assert got == code, err
    kinds = ("ConfigError:", "EndpointError:", "AnalysisError:", "Usage error:")
    assert [line for line in err.splitlines() if line.startswith(kinds)], err
    _assert_clean(out + err, "the terminal")
    assert "***" in err  # masked, not just dropped by luck


def test_no_credentials_in_rendered_manifests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", PLANTED["hf"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", PLANTED["aws_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", PLANTED["aws_secret"])
    hub = ["--set", "model_source=hub", "--set", "hf_token_secret={name: hf-token, key: token}"]
    _render(tmp_path / "hub", *hub)
    text = "".join(f.read_text() for f in (tmp_path / "hub").glob("*.yaml"))
    _assert_clean(text, "rendered manifests")
    # the token reaches vLLM only by reference to a Secret the user created
    refs = [
        e
        for _, d in _docs(tmp_path / "hub")
        if _pod_spec(d)
        for c in _pod_spec(d)["containers"]  # type: ignore[index]
        for e in c.get("env") or []
        if e["name"] == "HF_TOKEN"
    ]
    assert refs and all(e["valueFrom"]["secretKeyRef"] == {"name": "hf-token", "key": "token"} for e in refs)
    assert not [d for _, d in _docs(tmp_path / "hub") if d["kind"] == "Secret"]


def test_no_credentials_in_a_run_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A bench whose endpoint URL carries a password, with tokens in the environment: nothing reaches disk."""
    monkeypatch.setenv("HF_TOKEN", PLANTED["hf"])
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", PLANTED["aws_key"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", PLANTED["aws_secret"])
    with FaultyServer(Behaviour(status_every=5)) as a, FaultyServer(Behaviour()) as b:
        with_password = a.url.replace("http://", f"http://bench:{PLANTED['password']}@")
        endpoints = {"baseline": with_password, "speculative": b.url}
        code, out, err = run_cli([*bench_argv(endpoints, tmp_path / "results", "sec"), "--requests", "10"], capsys)
    assert code == 0, err
    _assert_clean(out + err, "the terminal")
    run_dir = tmp_path / "results" / "sec"
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {"run.json", "requests.jsonl", "summary.json", "metrics.emf.jsonl"} <= {p.name for p in files}
    for p in files:
        _assert_clean(p.read_text(encoding="utf-8", errors="replace"), str(p.relative_to(run_dir)))
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["endpoints"]["baseline"].startswith("http://bench:***@127.0.0.1:")


# ---- IAM -----------------------------------------------------------------------------------------


def test_iam_policy_is_scoped_to_spectrns_namespace_region_and_dashboards(capsys) -> None:
    sets = ["--set", "cloudwatch.namespace=TeamA/Spec", "--set", "cloudwatch.dashboard_prefix=team-a"]
    code, out, err = run_cli(["render", "--iam-policy", *sets, "--set", "cloudwatch.region=eu-west-1"], capsys)
    assert code == 0, err
    policy = json.loads(out)
    statements = policy["Statement"]
    actions = {a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert actions == {"cloudwatch:PutMetricData", "cloudwatch:PutDashboard", "cloudwatch:GetDashboard"}
    assert all(s["Effect"] == "Allow" and "*" not in str(s["Action"]) for s in statements)
    put = next(s for s in statements if s["Action"] == "cloudwatch:PutMetricData")
    # PutMetricData has no resource-level permissions: the conditions are what scope it
    scope = {"cloudwatch:namespace": "TeamA/Spec", "aws:RequestedRegion": "eu-west-1"}
    assert put["Condition"]["StringEquals"] == scope
    dash = next(s for s in statements if s is not put)
    resources = [dash["Resource"]] if isinstance(dash["Resource"], str) else dash["Resource"]
    assert resources and all(re.fullmatch(r"arn:aws:cloudwatch::[*0-9]+:dashboard/team-a-\*", r) for r in resources)
    assert "s3:" not in out and "iam:" not in out and '"*"' not in json.dumps([s.get("Action") for s in statements])


def test_s3_policy_is_scoped_to_the_bucket_prefixes(capsys) -> None:
    sets = ["--set", "s3.bucket=team-models", "--set", "s3.models_prefix=llm/weights/"]
    code, out, err = run_cli(["render", "--s3-policy", *sets, "--set", "s3.artifacts_prefix=neuron"], capsys)
    assert code == 0, err
    statements = json.loads(out)["Statement"]
    grants = {
        (a, r)
        for s in statements
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
        for r in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])
    }
    assert all(s["Effect"] == "Allow" and "Condition" not in s for s in statements)
    assert grants == {
        ("s3:ListBucket", "arn:aws:s3:::team-models"),
        ("s3:GetObject", "arn:aws:s3:::team-models/llm/weights/*"),
        ("s3:GetObject", "arn:aws:s3:::team-models/neuron/*"),
        ("s3:PutObject", "arn:aws:s3:::team-models/neuron/*"),
        ("s3:AbortMultipartUpload", "arn:aws:s3:::team-models/neuron/*"),
        ("s3:DeleteObject", "arn:aws:s3:::team-models/neuron/*"),
    }  # weights are read-only; nothing outside the two prefixes; no s3:* (the published sample used S3FullAccess)
