"""What ``RealKube`` makes of a kubeconfig or a pod's service account, and the requests and errors a user
sees from each call (the mutation audit of ``spectrn.kube.client``).

Kubeconfig files are written here in the format of the Kubernetes docs, with a fake token; the connection
settings and every error message, reason and hint are written out by hand. Requests are read back from the
local API server double as sent on the wire."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles.mock_apiserver import MockApiServer
from spectrn.kube.api import KubeApiError
from spectrn.kube.client import RealKube, connect

CONFIG_FIX = (
    "fix the file, or pass --kubeconfig with a valid one (e.g. from `aws eks update-kubeconfig --name CLUSTER`)"
)
LOAD_HINT = "point --kubeconfig at a valid file, pick a context with --context, or run inside a pod"

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: one
  cluster:
    server: https://one.example:6443
- name: two
  cluster:
    server: https://two.example:6443
contexts:
- name: first
  context:
    cluster: one
    user: dev
- name: second
  context:
    cluster: two
    user: dev
current-context: first
users:
- name: dev
  user:
    token: fake-token-for-tests
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty home (no ~/.kube/config), no KUBECONFIG, not in a pod; the client's default file is ~/.kube/config."""
    import kubernetes.config.kube_config as kc

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(var, raising=False)
    # the client reads KUBECONFIG once, when imported: set its default as a process started now would have it
    monkeypatch.setattr(kc, "KUBE_CONFIG_DEFAULT_LOCATION", "~/.kube/config")
    return home


def write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def env_kubeconfig(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """KUBECONFIG as the process found it at start."""
    import kubernetes.config.kube_config as kc

    monkeypatch.setenv("KUBECONFIG", path)
    monkeypatch.setattr(kc, "KUBE_CONFIG_DEFAULT_LOCATION", path)


@pytest.fixture
def pod(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Inside a pod: the service host in the environment and a mounted service account (token and CA)."""
    import kubernetes.config.incluster_config as ic

    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("fake-sa-token")
    (sa / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(ic, "SERVICE_TOKEN_FILENAME", str(sa / "token"))
    monkeypatch.setattr(ic, "SERVICE_CERT_FILENAME", str(sa / "ca.crt"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    return sa


def settings(kube: RealKube) -> tuple[str, str]:
    return kube.context, kube.host


# ---- which configuration is loaded ---------------------------------------------------------------


def test_a_kubeconfig_file_uses_its_current_context(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    assert settings(RealKube(kubeconfig=path)) == ("first", "https://one.example:6443")


def test_a_named_context_picks_its_cluster(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    assert settings(RealKube(kubeconfig=path, context="second")) == ("second", "https://two.example:6443")


def test_connect_passes_the_kubeconfig_and_the_context(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    kube = connect(kubeconfig=path, context="second")
    assert isinstance(kube, RealKube)
    assert settings(kube) == ("second", "https://two.example:6443")


def test_the_kubeconfig_from_the_environment_is_read_without_a_path(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_kubeconfig(monkeypatch, write(tmp_path / "env.yaml", KUBECONFIG))
    assert settings(RealKube()) == ("first", "https://one.example:6443")
    assert settings(RealKube(context="second")) == ("second", "https://two.example:6443")


def test_a_path_given_wins_over_the_environment_and_the_home_file(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = KUBECONFIG.replace("one.example", "other.example").replace("two.example", "other.example")
    write(home / ".kube" / "config", other)
    env_kubeconfig(monkeypatch, write(tmp_path / "env.yaml", other))
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    assert settings(RealKube(kubeconfig=path)) == ("first", "https://one.example:6443")


def test_inside_a_pod_without_a_kubeconfig_the_service_account_is_used(pod: Path) -> None:
    kube = RealKube()
    assert settings(kube) == ("in-cluster", "https://10.96.0.1:443")
    assert kube._api.configuration.ssl_ca_cert == str(pod / "ca.crt")


def test_inside_a_pod_a_home_kubeconfig_wins(pod: Path, home: Path) -> None:
    write(home / ".kube" / "config", KUBECONFIG)
    assert settings(RealKube()) == ("first", "https://one.example:6443")


def test_inside_a_pod_a_kubeconfig_path_or_a_context_wins(
    pod: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    assert settings(RealKube(kubeconfig=path)) == ("first", "https://one.example:6443")
    env_kubeconfig(monkeypatch, path)
    assert settings(RealKube(context="second")) == ("second", "https://two.example:6443")


def test_a_given_api_client_is_used_as_is_and_names_its_context() -> None:
    from kubernetes import client

    cfg = client.Configuration()
    cfg.host = "http://127.0.0.1:1"
    api = client.ApiClient(cfg)
    try:
        assert settings(RealKube(api_client=api)) == ("custom", "http://127.0.0.1:1")
        assert settings(RealKube(api_client=api, context="kind-spectrn")) == ("kind-spectrn", "http://127.0.0.1:1")
    finally:
        api.close()


# ---- configuration errors ------------------------------------------------------------------------


def test_a_missing_kubeconfig_path_is_named(home: Path, tmp_path: Path) -> None:
    path = str(tmp_path / "nope.yaml")
    with pytest.raises(KubeApiError) as err:
        RealKube(kubeconfig=path)
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        f"kubeconfig {path} not found",
        "ConfigError",
        "check the --kubeconfig path, or create it (e.g. `aws eks update-kubeconfig --name CLUSTER`)",
    )


def test_no_kubeconfig_at_all_names_the_default_file(home: Path) -> None:
    with pytest.raises(KubeApiError) as err:
        RealKube()
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        "cannot load the Kubernetes configuration from kubeconfig ~/.kube/config: "
        "Invalid kube-config file. No configuration found.",
        "ConfigError",
        LOAD_HINT,
    )


def test_an_unknown_context_is_a_configuration_error(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    with pytest.raises(KubeApiError) as err:
        RealKube(kubeconfig=path, context="third")
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        f"cannot load the Kubernetes configuration from kubeconfig {path}: "
        f"Invalid kube-config file. Expected object with name third in {path}/contexts list",
        "ConfigError",
        LOAD_HINT,
    )


def test_a_long_configuration_error_is_cut_to_300_characters(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    name = "c" * 400
    with pytest.raises(KubeApiError) as err:
        RealKube(kubeconfig=path, context=name)
    detail = f"Invalid kube-config file. Expected object with name {name}"[:300]
    assert err.value.message == f"cannot load the Kubernetes configuration from kubeconfig {path}: {detail}"


def test_a_pod_without_a_service_account_token_says_so(pod: Path) -> None:
    (pod / "token").unlink()
    with pytest.raises(KubeApiError) as err:
        RealKube()
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        "cannot load the Kubernetes configuration from the in-cluster service account: "
        "Service token file does not exist.",
        "ConfigError",
        LOAD_HINT,
    )


def test_a_kubeconfig_that_is_not_yaml_names_the_file_and_the_place(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", "clusters: [a\n")
    with pytest.raises(KubeApiError) as err:
        RealKube(kubeconfig=path)
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        f'kubeconfig {path} is not valid YAML: while parsing a flow sequence in "{path}", line 1, column 11 '
        f"expected ',' or ']', but got '<stream end>' in \"{path}\", line 2, column 1",
        "ConfigError",
        CONFIG_FIX,
    )


def test_a_kubeconfig_from_the_environment_is_named_in_errors(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "env.yaml", "clusters: [a\n")
    env_kubeconfig(monkeypatch, path)
    with pytest.raises(KubeApiError) as err:
        RealKube()
    assert err.value.message.startswith(f"kubeconfig {path} is not valid YAML: while parsing a flow sequence")


def test_a_kubeconfig_of_the_wrong_shape_names_the_python_error(home: Path, tmp_path: Path) -> None:
    path = write(tmp_path / "kc.yaml", "just some words\n")
    with pytest.raises(KubeApiError) as err:
        RealKube(kubeconfig=path)
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        f"kubeconfig {path} is not a valid kubeconfig: TypeError: 'str' object does not support item assignment",
        "ConfigError",
        CONFIG_FIX,
    )


def test_a_missing_credential_program_is_not_reported_as_a_missing_kubeconfig(home: Path, tmp_path: Path) -> None:
    """The file exists: the program its user entry runs for a token does not."""
    text = KUBECONFIG.replace(
        "    token: fake-token-for-tests\n",
        "    auth-provider:\n      name: gcp\n      config:\n        cmd-path: /nonexistent/bin/gcloud\n"
        "        cmd-args: config config-helper --format=json\n",
    )
    path = write(tmp_path / "kc.yaml", text)
    with pytest.raises(KubeApiError) as err:
        RealKube(kubeconfig=path)
    e = err.value
    assert (e.message, e.reason, e.hint) == (
        f"kubeconfig {path} is not a valid kubeconfig: FileNotFoundError: "
        "[Errno 2] No such file or directory: '/nonexistent/bin/gcloud'",
        "ConfigError",
        CONFIG_FIX,
    )


def test_loading_leaves_the_clients_process_wide_default_alone(home: Path, tmp_path: Path) -> None:
    """Each ``RealKube`` keeps its settings to itself: another client built later in the process (another
    context, or the kind helper's) must not inherit them."""
    from kubernetes import client

    before = client.Configuration.get_default().host
    path = write(tmp_path / "kc.yaml", KUBECONFIG)
    assert RealKube(kubeconfig=path, context="second").host == "https://two.example:6443"
    assert client.Configuration.get_default().host == before != "https://two.example:6443"
