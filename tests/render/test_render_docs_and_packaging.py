"""README's configuration reference stays generated; `spectrn --help` stays light; the wheel ships the
manifests and prompts and renders from outside the source tree."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from spectrn.cli.config_ref_cmd import END, START, splice
from spectrn.configuration.reference import config_reference_markdown
from spectrn.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("kubernetes", "boto3", "botocore", "matplotlib", "aiohttp", "numpy", "jinja2")


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SPECTRN_")}


def test_readme_config_reference_is_current():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert START in text and END in text
    assert splice(text, config_reference_markdown()) == text, (
        "README.md's configuration reference is stale: run `spectrn config-reference --write README.md`"
    )


def test_splice_replaces_only_between_markers():
    text = f"intro\n{START}\nold table\n{END}\noutro\n"
    assert splice(text, "| new |") == f"intro\n{START}\n| new |\n{END}\noutro\n"
    with pytest.raises(ConfigError, match="markers"):
        splice("no markers here", "| t |")


def test_check_flag_fails_on_a_stale_file(cli, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{START}\n| stale |\n{END}\n", encoding="utf-8")
    code, _, err = cli("config-reference", "--check", str(readme))
    assert code == 2 and "stale" in err
    code, out, _ = cli("config-reference", "--write", str(readme))
    assert code == 0 and "updated" in out
    assert cli("config-reference", "--check", str(readme))[0] == 0
    assert "`bench.concurrency`" in readme.read_text(encoding="utf-8")


def test_help_imports_no_heavy_library():
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "spectrn", "--help"],
        capture_output=True,
        text=True,
        env=_clean_env(),
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "render" in proc.stdout
    imported = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines() if "|" in line}
    assert not imported & set(HEAVY), f"--help imported {sorted(imported & set(HEAVY))}"


@pytest.mark.slow
def test_wheel_ships_data_and_renders_outside_the_tree(tmp_path):
    dist = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if build.returncode != 0 and "hatchling" in build.stderr and "No matching distribution" in build.stderr:
        pytest.skip("cannot fetch the hatchling build backend")
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = dist.glob("spectrn-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        z.extractall(tmp_path / "site")
    expected_templates = {f"spectrn/manifests/{p.name}" for p in (ROOT / "manifests").glob("*.j2")}
    assert expected_templates and expected_templates <= names
    expected_prompts = {f"spectrn/prompts/{p.name}" for p in (ROOT / "prompts").glob("*.yaml")}
    assert expected_prompts <= names

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**_clean_env(), "PYTHONPATH": str(tmp_path / "site")}
    code = (
        "import spectrn, spectrn.paths as p; from spectrn.cli.main import main; "
        "print(spectrn.__file__, p.data_dir('manifests'), file=__import__('sys').stderr); main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "render", "--job", "--run-id", "wheel", "--set", "spectrn_image_preloaded=true"],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    site = str(tmp_path / "site")
    first = proc.stderr.splitlines()[0]
    assert first.startswith(site) and f"{site}/spectrn/manifests" in first  # not the source checkout
    assert "kind: Job" in proc.stdout and "name: qwen-sd-vllm" in proc.stdout
