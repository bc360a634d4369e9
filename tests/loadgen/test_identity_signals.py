"""A server's window semantics come from what real servers expose (/metrics families, whether the spec-decode
counters move, per-position labels), never from the simulator's /sim/identity: a simulator with that endpoint
switched off (so it looks like a real server) gives the same acceptance and semantics as one with it."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from spectrn.cli.main import main
from spectrn.run.folder import RunFolder
from spectrn.run.summary import Summary
from spectrn.sim import SimSettings, run_in_thread

pytestmark = pytest.mark.slow

# What each imitated server does with num_speculative_tokens = k (docs/neuron.md, independent of the code): NxDI
# fused speculation on the Neuron fork and on plugin 0.2.x; k proposals plus a bonus token on the others.
EXPECTED = {"neuron-fork": "nxdi", "vllm-neuron": "nxdi", "vllm-neuron-0.24": "upstream", "upstream": "upstream"}
WINDOW = 5


def _bench(tmp_path: Path, profile: str, identity: bool, *config: str) -> Summary:
    base = run_in_thread(SimSettings(time_scale=0.02, profile=profile, identity_endpoint=identity))
    spec = run_in_thread(
        SimSettings(time_scale=0.02, speculative=True, window=WINDOW, profile=profile, identity_endpoint=identity)
    )
    try:
        if not identity:  # the switch really hides it: the server answers like vLLM's FastAPI app
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(spec.base_url + "/sim/identity")
            assert e.value.code == 404
        out = tmp_path / ("with" if identity else "without")
        argv = ["bench", "--endpoint", f"baseline={base.base_url}", "--endpoint", f"speculative={spec.base_url}",
                "--requests", "24", "--max-tokens", "64", "--prompts", "structured", "--out-dir", str(out),
                "--no-report", "--set", "bench.nonce=false", *config]  # fmt: skip
        with pytest.raises(SystemExit) as ex:
            main(argv)
        assert ex.value.code == 0
    finally:
        base.stop()
        spec.stop()
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return RunFolder.open(run).require_summary()


def _acceptance(s: Summary) -> tuple[object, ...]:
    acc = s.levels[0].variants["speculative"].acceptance
    assert acc is not None
    return acc.source, acc.rate, acc.mean_accepted_length, tuple(acc.per_position)


@pytest.mark.parametrize("profile", list(EXPECTED))
def test_same_acceptance_and_semantics_without_the_identity_endpoint(tmp_path: Path, profile: str) -> None:
    with_id = _bench(tmp_path, profile, True)
    without = _bench(tmp_path, profile, False)
    for s in (with_id, without):
        server = s.provenance.servers["speculative"]
        assert server.window_semantics == EXPECTED[profile], (profile, server)
        if profile != "neuron-fork":  # the fork exposes no per-position labels: its window stays unknown
            assert server.window == WINDOW and server.semantics_source == "server"
    a, b = _acceptance(with_id), _acceptance(without)
    # two runs of the same server differ slightly in how steps share events under a busy machine (timing); the
    # reading itself (source, whether there is a rate, the number of positions) must not differ at all
    assert (a[0], a[1] is None, len(a[3])) == (b[0], b[1] is None, len(b[3]))
    assert b[2] == pytest.approx(a[2], rel=0.03)
    if profile != "neuron-fork":
        # with the window known, the stream's positions are the proposals of the server's semantics
        stream = without.levels[0].variants["speculative"].acceptance.stream  # type: ignore[union-attr]
        assert stream is not None and len(stream.per_position) == (
            WINDOW - 1 if EXPECTED[profile] == "nxdi" else WINDOW
        )
    assert not [f for f in without.findings if f.code == "window_mismatch"], without.findings


LLAMA = """
vllm_dialect: vllm-neuron
plugin_release: "{release}"
speculation_mode: eagle
target: llama-3.1-8b
draft: eagle3-llama-3.1-8b
custom_models:
  llama-3.1-8b: {{hf_id: meta-llama/Llama-3.1-8B-Instruct, params_b: 8, tokenizer: llama3, vocab_size: 128256,
                 architecture: llama}}
  eagle3-llama-3.1-8b: {{hf_id: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, params_b: 0.5, tokenizer: llama3,
                         vocab_size: 128256, architecture: llama, eagle_draft: true}}
"""


@pytest.mark.parametrize(("profile", "release"), [("vllm-neuron", "current"), ("vllm-neuron-0.24", "0.2")])
def test_config_and_server_disagreeing_is_a_finding_and_the_server_wins(
    tmp_path: Path, profile: str, release: str
) -> None:
    """The config names one plugin release, the server shows the other (its counters stay at 0 or move): the
    figures use the server's semantics and a warning names both."""
    config = tmp_path / "spectrn.yaml"
    config.write_text(LLAMA.format(release=release))
    s = _bench(tmp_path, profile, False, "--config", str(config))
    server = s.provenance.servers["speculative"]
    assert server.window_semantics == EXPECTED[profile] and server.semantics_source == "server"
    (finding,) = [f for f in s.findings if f.code == "window_semantics"]
    claimed = "upstream" if release == "current" else "nxdi"
    assert f"says {claimed}" in finding.message and f"server says {EXPECTED[profile]}" in finding.message
    assert f"plugin_release '{release}'" in finding.message
    stream = s.levels[0].variants["speculative"].acceptance.stream  # type: ignore[union-attr]
    assert stream is not None and len(stream.per_position) == (WINDOW - 1 if EXPECTED[profile] == "nxdi" else WINDOW)


def test_a_server_declared_window_beyond_what_spectrn_accepts_is_ignored() -> None:
    from spectrn.loadgen.identity import _positions
    from spectrn.loadgen.metrics import SPEC_ACCEPTED_PER_POS

    def exposition(n: int) -> str:
        lines = [f"# TYPE {SPEC_ACCEPTED_PER_POS} counter"]
        lines += [f'{SPEC_ACCEPTED_PER_POS}_total{{model_name="m",position="{i}"}} 0.0' for i in range(n)]
        return "\n".join(lines) + "\n"

    assert _positions(exposition(7)) == 7
    assert _positions(exposition(32)) == 32
    assert _positions(exposition(30_000)) is None  # a hostile or broken server's count is not a window
