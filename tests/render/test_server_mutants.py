"""The vLLM server's paths and environment, worked out here from the config: where weights and compiled
artifacts are read and written when the config's folders carry extra slashes, and which model sources get the
Hugging Face token from its Secret."""

from __future__ import annotations

from typing import Any

import pytest

from spectrn.render import server


def test_weights_and_artifacts_paths_join_with_one_slash_whatever_slashes_the_config_carries(make_cfg: Any) -> None:
    # folder names that start and end with letters other than '/': only the slashes go
    s3 = {"mount_path": "/mnt/s3-X/", "models_prefix": "/Xweights-X/", "artifacts_prefix": "/Xneff-X/"}
    cfg = make_cfg({"s3": s3})
    assert server.model_path(cfg, "Qwen/Qwen3-32B") == "/mnt/s3-X/Xweights-X/Qwen/Qwen3-32B"
    assert server.artifacts_path(cfg, False) == f"/mnt/s3-X/Xneff-X/{cfg.artifact_key(False)}"
    assert server.artifacts_path(cfg, True) == f"/mnt/s3-X/Xneff-X/{cfg.artifact_key(True)}"
    assert cfg.artifact_key(True) != cfg.artifact_key(False)


def test_the_plain_config_keeps_its_folders(make_cfg: Any) -> None:
    cfg = make_cfg({"s3": {"mount_path": "/var/mdl", "models_prefix": "models", "artifacts_prefix": "compiled"}})
    assert server.model_path(cfg, "Qwen/Qwen3-1.7B") == "/var/mdl/models/Qwen/Qwen3-1.7B"
    assert server.artifacts_path(cfg, False) == f"/var/mdl/compiled/{cfg.artifact_key(False)}"


def test_with_weights_from_the_hub_the_model_is_its_id(make_cfg: Any) -> None:
    cfg = make_cfg({"model_source": "hub", "s3": {"mount_path": "/mnt/s3/"}})
    assert server.model_path(cfg, "Qwen/Qwen3-32B") == "Qwen/Qwen3-32B"


def _token_env(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in env if e["name"] == "HF_TOKEN"]


@pytest.mark.parametrize("speculative", [False, True])
def test_the_hub_token_comes_from_its_secret_only_when_weights_come_from_the_hub(
    make_cfg: Any, speculative: bool
) -> None:
    secret = {"name": "hf-token", "key": "tok"}
    hub = make_cfg({"model_source": "hub", "hf_token_secret": secret})
    assert _token_env(server.server_env(hub, speculative)) == [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "tok"}}}
    ]
    # weights from the bucket: the pod never needs the token, so it never sees it, even if the config names it
    s3 = make_cfg({"model_source": "s3", "hf_token_secret": secret})
    assert _token_env(server.server_env(s3, speculative)) == []
    # from the hub without a Secret (public weights): no token either
    assert _token_env(server.server_env(make_cfg({"model_source": "hub"}), speculative)) == []
