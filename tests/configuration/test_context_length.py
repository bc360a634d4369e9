"""The context rule: a request's input plus its output tokens must fit max_model_len, whatever max_tokens is on
its own (vLLM refuses a prompt whose input + max_tokens exceeds the model length, so a run would fail mid-way)."""

from __future__ import annotations

import pytest

from spectrn.errors import ConfigError


@pytest.mark.parametrize(
    ("max_model_len", "input_tokens", "max_tokens", "fits"),
    [
        (2048, 2000, 600, False),  # max_tokens alone fits: the case the old rule let through
        (2048, 1448, 600, True),  # exactly full: input + output == max_model_len
        (2048, 1449, 600, False),  # one token over
        (1024, 1, 1024, False),  # max_tokens == max_model_len leaves no room for any input
        (1024, 1, 1023, True),
    ],
)
def test_input_plus_output_must_fit_the_model_length(make_cfg, max_model_len, input_tokens, max_tokens, fits):
    overrides = {"max_model_len": max_model_len, "bench__input_tokens": input_tokens, "bench__max_tokens": max_tokens}
    if fits:
        cfg = make_cfg(**overrides)
        assert cfg.bench.input_tokens + cfg.bench.max_tokens <= cfg.max_model_len
        return
    with pytest.raises(ConfigError) as caught:
        make_cfg(**overrides)
    assert f"input_tokens {input_tokens} + max_tokens {max_tokens} exceeds max_model_len {max_model_len}" in str(
        caught.value
    )


def test_without_a_target_input_length_the_sum_is_not_refused(make_cfg):
    """No input_tokens: prompts keep their own length, so the sum is unknown and not refused here."""
    cfg = make_cfg(max_model_len=2048, bench__max_tokens=600)
    assert cfg.bench.input_tokens is None
