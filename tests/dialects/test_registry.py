"""A dialect or a speculation method is added in one place: registering it makes the config accept it, render its
flags, the simulator play its profile and the analysis use its window semantics; before that, every one refuses."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

import spectrn.dialects as dialects
from spectrn.analyze.semantics import choose
from spectrn.configuration.sources import build_config
from spectrn.dialects.base import Dialect, ServerProfile, Setup
from spectrn.dialects.methods import METHODS, SpeculationMethod, register_method
from spectrn.errors import ConfigError, SimError
from spectrn.render.server import sim_args, speculative_config, vllm_args
from spectrn.run.records import RunMeta
from spectrn.sim.profiles import get_profile
from spectrn.sim.settings import SimSettings

FAKE_IMAGE = "registry.example.com/fake-vllm:1.0"
FAKE_PROFILE = ServerProfile(
    name="fake-profile",
    description="a server that exists only in this test",
    window="upstream",
    vllm_version="9.9.9",
    token_ids=True,
    continuous_usage=True,
    metrics="v1",
    spec_counters_move=True,
    errors="v1",
    text_holdback_rate=0.0,
)


class FakeServer(Dialect):
    def config_flags(self, setup: Setup, speculative: bool) -> list[str]:
        return ["--fake-neuron-config", json.dumps({"speculative": speculative})]


FAKE = FakeServer(
    key="fake-server-1",
    vllm_dialect="fake-server",
    releases=("1",),
    label="vllm_dialect 'fake-server'",
    image=FAKE_IMAGE,
    window="upstream",
    modes=("fused",),
    modes_source="the fake server runs fused speculation only",
    profile=FAKE_PROFILE,
    sim_profile="fake-profile",
)
CONFIG: dict[str, Any] = {"vllm_dialect": "fake-server", "plugin_release": "1", "speculation_mode": "fused"}


@pytest.fixture
def fake_registered() -> Iterator[None]:
    dialects.register(FAKE)
    try:
        yield
    finally:
        dialects.unregister(FAKE.key)


def test_an_unregistered_dialect_is_refused_everywhere() -> None:
    with pytest.raises(ConfigError, match="vllm_dialect: Input should be 'legacy-neuron' or 'vllm-neuron'"):
        build_config(CONFIG)
    with pytest.raises(SimError, match="unknown server profile 'fake-profile'"):
        get_profile("fake-profile")
    assert dialects.semantics_of("fake-server", "1") == "nxdi"  # what an unknown recorded dialect reads as


def test_a_registered_dialect_reaches_config_render_simulator_and_semantics(fake_registered: None) -> None:
    cfg = build_config(CONFIG)
    assert cfg.server_image == FAKE_IMAGE
    assert cfg.sim_profile_choice == "fake-profile"
    assert cfg.nxdi_speculation is False

    spec_args = vllm_args(cfg, speculative=True)
    base_args = vllm_args(cfg, speculative=False)
    assert spec_args[spec_args.index("--fake-neuron-config") + 1] == '{"speculative": true}'
    assert base_args[base_args.index("--fake-neuron-config") + 1] == '{"speculative": false}'
    assert "--override-neuron-config" not in spec_args and "--additional-config" not in spec_args
    # the base Dialect's --speculative-config shape: no method for draft-model speculation
    assert speculative_config(cfg) == {
        "model": f"{cfg.s3.mount_path}/{cfg.s3.models_prefix}/{cfg.draft_spec.hf_id}",
        "num_speculative_tokens": cfg.num_speculative_tokens,
        "max_model_len": cfg.max_model_len,
    }
    sim = sim_args(cfg, speculative=True)
    assert sim[sim.index("--profile") + 1] == "fake-profile"
    assert SimSettings(profile="fake-profile").server_profile.vllm_version == "9.9.9"

    meta = RunMeta(run_id="r", spectrn_version="0", started_at=0.0, config=cfg)
    chosen = choose(meta, None)
    assert (chosen.semantics, chosen.source) == ("upstream", "config")


def test_a_registered_dialect_keeps_its_mode_list(fake_registered: None) -> None:
    with pytest.raises(ConfigError, match="'eagle' is not supported by vllm_dialect 'fake-server'"):
        build_config({**CONFIG, "speculation_mode": "eagle"})
    with pytest.raises(ConfigError, match="plugin_release: 'current' is not a release of vllm_dialect 'fake-server'"):
        build_config({**CONFIG, "plugin_release": "current"})


def test_a_registered_method_is_accepted_where_a_dialect_runs_it(fake_registered: None) -> None:
    method = SpeculationMethod("lookahead-test", "a method without a draft model", uses_draft_model=False)
    with pytest.raises(ConfigError, match="speculation_mode: Input should be 'fused', 'vanilla', 'eagle' or 'medusa'"):
        build_config({**CONFIG, "speculation_mode": "lookahead-test"})
    register_method(method)
    dialects.register(replace(FAKE, modes=("fused", "lookahead-test")))
    try:
        cfg = build_config({**CONFIG, "speculation_mode": "lookahead-test"})
        assert cfg.uses_draft_model is False
        assert speculative_config(cfg) is None
        assert "--speculative-config" not in vllm_args(cfg, speculative=True)
        # without a draft model, labels, run ids and artifact keys name the method (not another method's name)
        assert cfg.draft_label == "lookahead-test"
        assert cfg.artifact_key(True).startswith(f"{cfg.target.replace('.', 'p')}-sd-lookahead-test-k")
        # the legacy fork does not list it: refused with the fork's mode list
        with pytest.raises(ConfigError, match="'lookahead-test' is not supported by vllm_dialect 'legacy-neuron'"):
            build_config({"speculation_mode": "lookahead-test"})
    finally:
        METHODS.pop(method.name, None)
