"""Config bounds, the rules tying fields together, prices and warnings, pinned at their boundaries with the exact
message a user reads (the field, where its value came from, the fix) (``spectrn.configuration``)."""

from __future__ import annotations

from typing import Any

import pytest

from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.pricing import Price, builtin_price, price_of
from spectrn.configuration.sources import build_config
from spectrn.errors import ConfigError


def cfg(**overrides: Any) -> SpectrnConfig:
    return build_config({}, overrides, environ={})


def refused(**overrides: Any) -> tuple[str, str | None]:
    with pytest.raises(ConfigError) as e:
        build_config({}, overrides, environ={})
    return e.value.message, e.value.hint


def test_the_defaults_a_user_starts_from() -> None:
    c = cfg()
    assert (c.target, c.draft, c.num_speculative_tokens, c.instance_type) == (
        "qwen3-32b",
        "qwen3-1.7b",
        7,
        "trn2.48xlarge",
    )
    assert (c.max_model_len, c.max_num_seqs, c.tensor_parallel_size, c.resources.neuron_devices, c.lnc) == (
        1024, 4, 32, 8, 2
    )  # fmt: skip
    assert (c.bench.requests, c.bench.warmup, c.bench.max_tokens, c.bench.concurrency) == (32, 2, 600, [4])
    assert (c.pricing.instance_hourly_usd, c.pricing.region, c.pricing.instances_per_service) == (None, None, 0.5)
    assert c.hourly_usd == 44.70
    assert cfg(**{"pricing.instance_hourly_usd": 30.0}).hourly_usd == 30.0


@pytest.mark.parametrize("window", [1, 32])
def test_windows_at_the_bounds_are_accepted(window: int) -> None:
    assert cfg(num_speculative_tokens=window).num_speculative_tokens == window


@pytest.mark.parametrize("window", [0, 33])
def test_windows_beyond_the_bounds_name_the_flag_and_the_tuned_range(window: int) -> None:
    with pytest.raises(ConfigError) as e:
        build_config(
            {}, {"num_speculative_tokens": window}, environ={}, sources={"num_speculative_tokens": "flag --window"}
        )
    assert (e.value.message, e.value.hint) == (
        f"--window: {window} is outside 1..32 (config key num_speculative_tokens)",
        "use a window between 5 and 15",
    )


def test_the_context_must_hold_the_prompt_and_the_output() -> None:
    # max_model_len 1024: 100 + 924 fits exactly; 101 + 924 = 1025 does not
    assert cfg(**{"bench.input_tokens": 100, "bench.max_tokens": 924}).bench.max_tokens == 924
    message, _ = refused(**{"bench.input_tokens": 101, "bench.max_tokens": 924})
    assert message == (
        "bench.max_tokens: input_tokens 101 + max_tokens 924 exceeds max_model_len 1024; lower one or raise "
        "max_model_len (bench.max_tokens from --set bench.max_tokens; bench.input_tokens from --set bench.input_tokens)"
    )


def test_devices_beyond_the_instance_chips_are_refused() -> None:
    assert refused(**{"resources.neuron_devices": 17}) == (
        "resources.neuron_devices: 17 exceeds the 16 chips of trn2.48xlarge; request at most 16 (from --set "
        "resources.neuron_devices)",
        "request at most 16 devices or pick a larger instance_type",
    )


def test_tensor_parallelism_must_equal_the_logical_cores() -> None:
    # 4 devices x 8 cores / LNC 2 = 16 logical cores
    assert cfg(**{"resources.neuron_devices": 4, "tensor_parallel_size": 16}).tensor_parallel_size == 16
    assert refused(**{"resources.neuron_devices": 4, "tensor_parallel_size": 32}) == (
        "tensor_parallel_size: 32 does not fit the requested cores: 4 devices x 8 cores / LNC 2 = 16 logical cores "
        "on trn2.48xlarge; set tensor_parallel_size: 16 or change resources.neuron_devices (tensor_parallel_size "
        "from --set tensor_parallel_size; resources.neuron_devices from --set resources.neuron_devices)",
        "set tensor_parallel_size: 16 or change resources.neuron_devices",
    )
    # LNC 1: 4 x 8 / 1 = 32
    assert cfg(**{"resources.neuron_devices": 4, "logical_neuron_cores": 1, "tensor_parallel_size": 32}).lnc == 1


def test_an_lnc_the_instance_does_not_offer_is_refused() -> None:
    message, _ = refused(logical_neuron_cores=3)
    assert message == (
        "logical_neuron_cores: 3 is not supported on trn2.48xlarge (options: 1, 2) (from --set logical_neuron_cores)"
    )


def test_a_draft_must_be_smaller_than_the_target() -> None:
    assert refused(draft="qwen3-32b") == (
        "draft: 'qwen3-32b' (32.8B) is not smaller than target 'qwen3-32b' (32.8B); pick a smaller draft such as "
        "qwen3-1.7b (from --set draft)",
        "pick a smaller draft such as qwen3-1.7b",
    )


def test_the_two_services_need_two_names() -> None:
    assert refused(speculative_name="qwen-vllm") == (
        "speculative_name: must differ from baseline_name (from --set speculative_name)",
        "give the two services different names",
    )


def test_a_region_without_a_built_in_price_needs_a_price() -> None:
    assert refused(**{"pricing.region": "eu-west-1"}) == (
        "pricing.region: no built-in price for trn2.48xlarge in 'eu-west-1' (the built-in prices are on-demand list "
        "prices for us-east-2) (from --set pricing.region)",
        "set pricing.instance_hourly_usd to the hourly price of trn2.48xlarge in eu-west-1 "
        "(https://aws.amazon.com/ec2/pricing/on-demand/)",
    )
    assert cfg(**{"pricing.region": "us-east-2"}).hourly_usd == 44.70
    priced = cfg(**{"pricing.region": "eu-west-1", "pricing.instance_hourly_usd": 50.0})
    assert priced.hourly_usd == 50.0


@pytest.mark.parametrize(
    ("key", "ok", "bad", "rule"),
    [
        ("pricing.instance_hourly_usd", 10000.0, 10000.5, "less than or equal to 10000"),
        ("pricing.instance_hourly_usd", 0.01, 0.0, "greater than 0"),
        ("pricing.instances_per_service", 1024.0, 1025.0, "less than or equal to 1024"),
        ("pricing.instances_per_service", 0.01, 0.0, "greater than 0"),
    ],
    ids=["usd-max", "usd-positive", "instances-max", "instances-positive"],  # no spaces: a failure's id names it
)
def test_price_bounds(key: str, ok: float, bad: float, rule: str) -> None:
    assert cfg(**{key: ok}) is not None
    message, _ = refused(**{key: bad})
    assert message == f"{key}: Input should be {rule} (from --set {key})"


def test_s3_prefixes_may_not_nest_but_may_share_a_name_start() -> None:
    assert cfg(**{"s3.models_prefix": "a", "s3.artifacts_prefix": "ab"}).s3.artifacts_prefix == "ab"
    message, hint = refused(**{"s3.models_prefix": "/a/b/", "s3.artifacts_prefix": "a"})
    assert message.startswith("s3.artifacts_prefix: 'a' overlaps s3.models_prefix 'a/b': the pods may write")
    assert hint == "use two separate folders, e.g. models and compiled"
    message, _ = refused(**{"s3.models_prefix": "a", "s3.artifacts_prefix": "a/compiled"})
    assert message.startswith("s3.artifacts_prefix: 'a/compiled' overlaps s3.models_prefix 'a'")
    assert refused(**{"s3.artifacts_prefix": "/"}) == (
        "s3.artifacts_prefix: empty: the IAM policy would then cover the whole bucket (from --set s3.artifacts_prefix)",
        "give s3.artifacts_prefix a folder name such as compiled",
    )
    _, hint = refused(**{"s3.models_prefix": ""})
    assert hint == "give s3.models_prefix a folder name such as models"


def test_warnings_for_windows_outside_the_tuned_range_and_services_that_need_two_nodes() -> None:
    assert not any(w.startswith("num_speculative_tokens") for w in cfg(num_speculative_tokens=5).warnings())
    assert not any(w.startswith("num_speculative_tokens") for w in cfg(num_speculative_tokens=15).warnings())
    (w,) = [w for w in cfg(num_speculative_tokens=16).warnings() if w.startswith("num_speculative_tokens")]
    assert w == ("num_speculative_tokens: 16 is outside the tuned range 5..15 of the published experiment; sweep "
                 "windows to confirm it pays")  # fmt: skip
    two = cfg(**{"resources.neuron_devices": 16, "tensor_parallel_size": 64})
    assert ("resources.neuron_devices: two services of 16 devices do not fit one trn2.48xlarge; they will need two "
            "nodes") in two.warnings()  # fmt: skip
    assert not any(w.startswith("resources.neuron_devices") for w in cfg().warnings())  # 2 x 8 = 16 chips: one node


def test_artifact_keys_name_the_setup_and_the_compiled_shape() -> None:
    c = cfg()
    spec, base = c.artifact_key(True), c.artifact_key(False)
    assert spec.startswith("qwen3-32b-sd-qwen3-1p7b-k7-tp32-s1024-b4-") and len(spec.rsplit("-", 1)[1]) == 12
    assert base.startswith("qwen3-32b-base-tp32-s1024-b4-")
    assert cfg(num_speculative_tokens=5).artifact_key(False) == base  # the window does not change the baseline
    assert cfg(num_speculative_tokens=5).artifact_key(True) != spec
    assert cfg(max_num_seqs=8).artifact_key(False).startswith("qwen3-32b-base-tp32-s1024-b8-")


def test_prices_say_where_they_come_from() -> None:
    built_in = price_of("trn2.48xlarge", None, None, 44.70)
    assert built_in == Price(44.70, "built-in", "us-east-2", "2026-11-30", "aws.amazon.com/ec2/pricing/on-demand/")
    assert built_in.text() == (
        "$44.70/h (built-in on-demand list price, us-east-2, as of 2026-11-30, aws.amazon.com/ec2/pricing/on-demand/)"
    )
    assert price_of("trn2.48xlarge", None, "us-east-2", 44.70) == built_in
    assert price_of("trn2.48xlarge", None, "eu-west-1", 44.70) is None
    assert builtin_price("trn2.48xlarge", 44.70, "eu-west-1") is None
    own = price_of("trn2.48xlarge", 30.5, "eu-west-1", 44.70)
    assert own == Price(30.5, "config", "eu-west-1", None, None)
    assert own.text() == "$30.50/h (pricing.instance_hourly_usd, set in the run's config)"
