"""The package as users and the load image install it: the wheel in a fresh venv, every command run from there.

``make test`` installs ``.[dev]``, whose test tools pull in packages spectrn never declared (click, once): no
other test can see a dependency that only the dev extras provide. Here the wheel is built from the checkout and
installed three ways, each in a new virtual environment that shares nothing with the test venv:

- ``plain``: ``pip install spectrn-*.whl``, no extras, as a user does; then every entry point runs from it;
- ``image``: the same venv plus exactly the extras the Dockerfile installs (read from the Dockerfile), then
  ``pip check`` and the image's own command line (ENTRYPOINT + CMD, bound to loopback);
- ``lowest``: every declared dependency at the lowest version its bound allows (uv's ``lowest-direct``
  resolution over the declared requirements), so a lower bound that lies fails here.

Commands run as child processes with the venv's own ``spectrn`` script, in an empty working folder, with no
``SPECTRN_*`` or ``PYTHONPATH`` from the caller. The simulator runs at time scale 0.05 (figures rescaled).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--time-scale", "0.05", "--max-tokens", "16", "--prompts", "all"]


@dataclass
class Venv:
    path: Path
    work: Path

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("SPECTRN_", "PYTHON", "VIRTUAL_ENV"))}
        keep.update({"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb", "PATH": f"{self.bin}:{keep.get('PATH', '')}"})
        keep.update({"AWS_DEFAULT_REGION": "us-east-2", "AWS_EC2_METADATA_DISABLED": "true"})
        keep["KUBECONFIG"] = str(self.work / "no-such-kubeconfig")  # never the caller's cluster
        return keep

    def run(self, *args: str, timeout: float = 300, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.bin / "spectrn"), *args],
            cwd=self.work,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if ok:
            assert done.returncode == 0, f"spectrn {shlex.join(args)} -> {done.returncode}\n{done.stderr[-4000:]}"
        return done

    def python(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / "python"), *args], env=self.env(), capture_output=True, text=True, timeout=timeout
        )


def _sh(*cmd: str, timeout: float = 900, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    assert done.returncode == 0, f"{shlex.join(cmd)} -> {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _new_venv(path: Path) -> None:
    base = getattr(sys, "_base_executable", sys.executable)
    _sh(base, "-m", "venv", str(path))


def dockerfile_extras() -> str:
    """The extras the image installs: ``pip install "${wheel}[sim]"`` in the Dockerfile -> ``[sim]``."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    found = re.findall(r'pip install "\$\{wheel\}(\[[a-z,]+\])?"', text)
    assert len(found) == 1, "the Dockerfile installs spectrn's wheel once"
    return found[0]


def dockerfile_command() -> list[str]:
    """ENTRYPOINT + CMD of the image (exec form)."""
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    entry = json.loads(re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M).group(1))  # type: ignore[union-attr]
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", text, re.M).group(1))  # type: ignore[union-attr]
    return [*entry, *cmd]


def declared_requirements(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist without extras markers: exactly what a plain install resolves."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")
            and "extra ==" not in line]  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    _sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT))
    (found,) = out.glob("spectrn-*.whl")
    return found


@pytest.fixture(scope="module")
def plain(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    root = tmp_path_factory.mktemp("plain")
    venv = Venv(root / "venv", root / "work")
    venv.work.mkdir()
    _new_venv(venv.path)
    _sh(str(venv.bin / "python"), "-m", "pip", "install", "-q", str(wheel))
    return venv


@pytest.fixture(scope="module")
def sim_server(plain: Venv) -> Iterator[str]:
    """The simulator served from the plain install (`spectrn sim serve`), for the load generator."""
    from spectrn.runtimes.launch import free_port

    port = free_port()
    log = plain.work / "sim-serve.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [str(plain.bin / "spectrn"), "sim", "serve", "--host", "127.0.0.1", "--port", str(port), "--speculative",
             "--time-scale", "0.05"],
            cwd=plain.work, env=plain.env(), stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_health(url, proc, log)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _wait_health(url: str, proc: subprocess.Popen[bytes], log: Path, budget: float = 60) -> None:
    end = time.monotonic() + budget
    while time.monotonic() < end:
        if proc.poll() is not None:
            pytest.fail(f"the server exited with {proc.returncode}: {log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:  # noqa: S310 - loopback
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"{url}/health did not answer within {budget} s")


# ---- the plain install: every entry point ----------------------------------------------------------------------


def test_pip_check_passes(plain: Venv) -> None:
    done = plain.python("-m", "pip", "check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_plain_install_holds_no_test_tool(plain: Venv) -> None:
    """The install under test is what a user gets: none of the dev extras' packages."""
    done = plain.python("-c", "import importlib.util as u; print([m for m in ('pytest','moto','hypothesis','openai',"
                        "'httpx','uvloop') if u.find_spec(m)])")  # fmt: skip
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_render_and_render_job(plain: Venv) -> None:
    docs = [d for d in yaml.safe_load_all(plain.run("render", "--set", "s3.bucket=my-models").stdout) if d]
    assert {d["kind"] for d in docs} >= {"Deployment", "Service", "ConfigMap"}
    out = plain.run("render", "--job", "--set", "s3.bucket=my-models", "--set", "spectrn_image_preloaded=true").stdout
    assert "Job" in {d["kind"] for d in yaml.safe_load_all(out) if d}


def test_deploy_dry_run_without_a_cluster(plain: Venv) -> None:
    done = plain.run("deploy", "--dry-run", "--set", "s3.bucket=my-models", ok=False)
    assert "Traceback" not in done.stderr, done.stderr
    assert "kind: Deployment" in done.stdout and "cluster not reachable" in done.stderr


@pytest.fixture(scope="module")
def local_run(plain: Venv) -> Path:
    """``bench --local`` on the simulator: starts the pair, benches, analyses, writes the report."""
    plain.run("bench", "--local", "--requests", "6", "--concurrency", "1,2", *TINY, "--out-dir", "res",
              "--run-id", "r-plain")  # fmt: skip
    return plain.work / "res" / "r-plain"


def test_bench_local_writes_every_output(local_run: Path) -> None:
    summary = json.loads((local_run / "summary.json").read_text())
    assert len(summary["levels"]) == 2 and summary["verdict"]["clean"]
    assert (local_run / "report" / "index.html").stat().st_size > 0
    assert (local_run / "metrics.emf.jsonl").stat().st_size > 0
    assert list((local_run / "speculative").glob("*_summary.json"))


def test_analyze_report_compare_publish_emf(plain: Venv, local_run: Path) -> None:
    plain.run("analyze", str(local_run), "-o", "json")
    plain.run("report", str(local_run))
    assert "speedups: A = r-plain" in plain.run("compare", str(local_run), str(local_run)).stdout
    plain.run("publish", str(local_run), "--emf")


def test_twin_calibrate_and_predict(plain: Venv, local_run: Path) -> None:
    plain.run("twin", "calibrate", str(local_run), "--out-file", "twin.yaml")
    out = plain.run("twin", "predict", "twin.yaml", "--windows", "3,7", "--concurrency", "1,4", "--samples", "20",
                    "-o", "json").stdout  # fmt: skip
    assert json.loads(out)["cells"]


def test_loadgen_against_a_simulator(plain: Venv, sim_server: str) -> None:
    """The load pod's entry point, against a server spectrn did not start."""
    plain.run("loadgen", "-e", f"speculative={sim_server}", "--set", "bench.requests=4", "--set",
              "bench.max_tokens=16", "--set", "bench.concurrency=[2]", "--run-id", "r-lg", "--out-dir", "lg",
              "--analyze", "--quiet")  # fmt: skip
    assert (plain.work / "lg" / "r-lg" / "summary.json").exists()


def test_sweep_local_one_cell(plain: Venv) -> None:
    plain.run("sweep", "--local", "--windows", "5", "--requests", "4", "--concurrency", "2", "--time-scale", "0.05",
              "--max-tokens", "16", "--out-dir", "sw", "--no-report", timeout=600)  # fmt: skip
    (sweep,) = (plain.work / "sw").iterdir()
    assert (sweep / "analysis.json").exists()


# ---- the image's install: the Dockerfile's extras and its command line ---------------------------------------


@pytest.fixture(scope="module")
def image(plain: Venv, wheel: Path) -> Venv:
    extras = dockerfile_extras()
    _sh(str(plain.bin / "python"), "-m", "pip", "install", "-q", f"{wheel}{extras}")
    return plain


def test_the_image_extras_install_cleanly(image: Venv) -> None:
    assert dockerfile_extras() == "[sim]"
    done = image.python("-m", "pip", "check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert image.python("-c", "import uvloop").returncode == 0


def test_the_image_command_line_serves(image: Venv) -> None:
    """ENTRYPOINT + CMD as the Dockerfile gives them, with the address moved to loopback for the test."""
    from spectrn.runtimes.launch import free_port

    argv = dockerfile_command()
    assert argv[:3] == ["spectrn", "sim", "serve"]
    port = free_port()
    argv[argv.index("--host") + 1] = "127.0.0.1"
    argv[argv.index("--port") + 1] = str(port)
    log = image.work / "image-cmd.log"
    with log.open("w") as err:
        proc = subprocess.Popen([str(image.bin / argv[0]), *argv[1:]], cwd=image.work, env=image.env(),
                                stdout=subprocess.DEVNULL, stderr=err)  # fmt: skip
    try:
        _wait_health(f"http://127.0.0.1:{port}", proc, log)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as r:  # noqa: S310
            assert json.load(r)["data"]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# ---- the lowest versions the bounds allow --------------------------------------------------------------------


@pytest.fixture(scope="module")
def lowest(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        pytest.fail(f"uv is not installed beside {sys.executable}: it is a dev dependency (pip install -e '.[dev]')")
    root = tmp_path_factory.mktemp("lowest")
    venv = Venv(root / "venv", root / "work")
    venv.work.mkdir()
    reqs = root / "requirements.txt"
    reqs.write_text("\n".join(declared_requirements(wheel)) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "UV_"))}
    base = getattr(sys, "_base_executable", sys.executable)
    _sh(str(uv), "venv", "-q", "--python", base, str(venv.path), env=env)
    _sh(str(uv), "pip", "install", "-q", "--python", str(venv.bin / "python"), "--resolution", "lowest-direct",
        "-r", str(reqs), env=env)  # fmt: skip
    _sh(str(uv), "pip", "install", "-q", "--python", str(venv.bin / "python"), "--no-deps", str(wheel), env=env)
    return venv


def test_the_lowest_versions_install_at_their_bounds(lowest: Venv, wheel: Path) -> None:
    """Each direct dependency is installed at exactly its declared lower bound."""
    done = lowest.python("-c", "import importlib.metadata as m, json, sys; print(json.dumps({n: m.version(n) for n in "
                         "sys.argv[1:]}))", *[r.split(">=")[0].split(";")[0].strip()
                                               for r in declared_requirements(wheel)])  # fmt: skip
    from packaging.version import Version

    installed = json.loads(done.stdout)
    for req in declared_requirements(wheel):
        name, _, bound = req.split(";")[0].partition(">=")
        assert Version(installed[name.strip()]) == Version(bound.strip().split(",")[0]), (req, installed[name.strip()])


def test_the_lowest_versions_run_the_main_job(lowest: Venv) -> None:
    lowest.run("render", "--set", "s3.bucket=my-models")
    lowest.run("bench", "--local", "--requests", "4", "--concurrency", "2", *TINY, "--out-dir", "res",
               "--run-id", "r-low")  # fmt: skip
    run = lowest.work / "res" / "r-low"
    assert (run / "report" / "index.html").exists()
    lowest.run("compare", str(run), str(run))
    lowest.run("publish", str(run), "--emf")
