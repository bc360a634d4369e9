"""The layout's rules, checked on the code itself: no import cycle (function-level imports included), each
external system behind one module, modules of one job, nothing in src/ that exists only for tests."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "spectrn"
MAX_LINES = 600
# modules allowed above MAX_LINES, each because it holds one job
ONE_JOB: dict[str, str] = {}


def modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Every spectrn module ``path`` imports, at any depth (function-level imports count too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            if name in known:
                found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    g: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps = imports_of(path, known) - {name}
        # importing a package's module implies its __init__, which is a face, not an edge back
        g[name] = {d for d in deps if not name.startswith(d + ".")}
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_in_src() -> None:
    assert cycles(graph()) == []


def test_cycle_detection_sees_function_level_imports(tmp_path: Path) -> None:
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    code = "def f():\n    from spectrn.x import y\n"
    (tmp_path / "m.py").write_text(code)
    assert imports_of(tmp_path / "m.py", {"spectrn.x", "spectrn.x.y"}) == {"spectrn.x", "spectrn.x.y"}


def _external_importers(top: str) -> set[str]:
    out = set()
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == top for a in node.names):
                out.add(name)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == top:
                out.add(name)
    return out


def test_each_external_system_has_one_module() -> None:
    assert _external_importers("boto3") | _external_importers("botocore") == {"spectrn.publish.aws"}
    assert _external_importers("kubernetes") == {"spectrn.kube.client"}


def test_modules_hold_one_job() -> None:
    too_long = {}
    for path in SRC.rglob("*.py"):
        rel = str(path.relative_to(SRC))
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_LINES and rel not in ONE_JOB:
            too_long[rel] = n
    assert too_long == {}, f"split these by job, or say in ONE_JOB why each is one job: {too_long}"


def test_cli_wiring_runs_one_way() -> None:
    g = graph()
    for name, deps in g.items():
        if name.startswith("spectrn.cli.") and name != "spectrn.cli.main":
            assert "spectrn.cli.main" not in deps, f"{name} imports the app: wiring must run one way"


# the terminal's writers: only the CLI holds them; the core reports through spectrn.events and return values.
# rich's renderables (rich.table, rich.text) are values the CLI prints, so the report may build them.
TERMINAL_MODULES = ("typer", "click", "logging", "rich.console", "rich.print", "rich.progress", "rich.live",
                    "rich.status", "rich.prompt", "rich.logging")  # fmt: skip


def _is_terminal_module(name: str) -> bool:
    return name == "rich" or any(name == m or name.startswith(m + ".") for m in TERMINAL_MODULES)


TERMINAL_STREAMS = ("stdout", "stderr", "__stdout__", "__stderr__")


def terminal_writes(source: str) -> list[str]:
    """Every place ``source`` prints or reaches a terminal writer: ``print(...)``, ``sys.stdout``/``sys.stderr``,
    an import of a terminal library, ``os.write`` to fd 1 or 2."""
    found = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append(f"{line}: print()")
        elif isinstance(node, ast.Attribute) and node.attr in TERMINAL_STREAMS:
            found.append(f"{line}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] if node.module != "rich" else [f"rich.{a.name}" for a in node.names]
            if any(_is_terminal_module(n) for n in names):
                found.append(f"{line}: from {node.module} import")
            if node.module == "sys" and any(a.name in TERMINAL_STREAMS for a in node.names):
                found.append(f"{line}: from sys import stdout/stderr")
        elif isinstance(node, ast.Import):
            found += [f"{line}: import {a.name}" for a in node.names if _is_terminal_module(a.name)]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "write"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "os"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in (1, 2)
        ):
            found.append(f"{line}: os.write to a terminal fd")
    return found


def test_only_the_cli_prints() -> None:
    """The core never writes to the terminal (docs/architecture.md): progress goes through ``spectrn.events``,
    results are returned and shown by ``cli/``. Code inside string constants (a probe script rendered into a
    manifest) is data, not a call, and is not counted."""
    bad = {}
    for path in SRC.rglob("*.py"):
        rel = str(path.relative_to(SRC))
        if rel.startswith("cli/") or rel == "__main__.py":
            continue
        found = terminal_writes(path.read_text(encoding="utf-8"))
        if found:
            bad[rel] = found
    assert bad == {}, f"only src/spectrn/cli may write to the terminal: {bad}"


def test_terminal_check_sees_every_writer() -> None:
    planted = {
        "print('x')": "print()",
        "import sys\nsys.stderr.write('x')": ".stderr",
        "from sys import stdout": "from sys import stdout/stderr",
        "from rich.console import Console": "from rich.console import",
        "import logging": "import logging",
        "from rich import print": "from rich import",
        "import rich": "import rich",
        "import os\nos.write(2, b'x')": "os.write to a terminal fd",
    }
    for code, what in planted.items():
        assert any(what in f for f in terminal_writes(code)), code
    assert terminal_writes("CODE = \"print('ready')\"\nfh.write('x')\nfrom rich.table import Table\n") == []


def test_nothing_in_src_exists_only_for_tests() -> None:
    g = graph()
    imported = {d for deps in g.values() for d in deps}
    entry = {"spectrn", "spectrn.__main__", "spectrn.cli.main"}
    orphans = sorted(n for n in g if n not in imported and n not in entry and not n.endswith("__init__"))
    # package faces (spectrn.sim, spectrn.deploy, ...) are imported by their modules' users
    orphans = [n for n in orphans if not (SRC.parent / n.replace(".", "/") / "__init__.py").exists()]
    assert orphans == [], f"modules no product module imports (test-only code belongs in tests/doubles): {orphans}"


# Import layers, lowest first: a module may import its own rank or lower. Every top-level name has a rank (the
# test below checks it), finer keys ("package.module") where one module of a package sits lower than the rest.
RANK = {
    "errors": 0,
    "sanitize": 0,
    "names": 1, "paths": 1, "events": 1, "windows": 1, "analyze.slo": 1, "labels": 1, "intervals": 1,
    "configuration": 2, "dialects": 2,
    "run": 3,
    # what a run is made of, below everything that runs one: the cluster API, the simulated server, the traffic
    # definitions, the IAM policy the publisher needs (render writes it into the service account's role)
    "kube": 4, "sim": 4, "loadgen.arrivals": 4, "loadgen.prompts": 4, "loadgen.workloads": 4,
    "loadgen.synthetic": 4, "publish.iam": 4, "publish.limits": 4,
    "analyze": 5, "runtimes": 5,
    "loadgen": 6, "publish": 6, "twin": 6, "sweep": 6,
    "render": 7, "report": 7,
    "deploy": 8,
    "finish": 9, "bench": 9, "bench.local": 6,
    "sweep.orchestrate": 10, "sweep.runners": 10, "capacity": 10,
    "cli": 11, "__main__": 11,
}  # fmt: skip


def rank_of(name: str) -> int | None:
    parts = name.split(".")[1:]
    for n in (2, 1):
        key = ".".join(parts[:n])
        if key in RANK:
            return RANK[key]
    return None


def test_every_module_has_a_layer() -> None:
    unranked = sorted(n for n in graph() if n != "spectrn" and rank_of(n) is None)
    assert unranked == [], f"give each top-level package a rank in RANK: {unranked}"


def test_layers_do_not_reach_up() -> None:
    """The pipeline's lower stages never import a higher one (RANK): the contracts (run/) and the spec import no
    stage; analysis imports no output stage; publish never imports the report; sweep analysis (recommend,
    predict) is below the report that shows it, sweep orchestration above finish, which it calls per cell; only
    cli/ is on top. The SLO language (``analyze.slo``) is pure: the spec parses SLOs with it at load."""
    bad = defaultdict(list)
    for name, deps in graph().items():
        mine = rank_of(name)
        for d in deps:
            theirs = rank_of(d)
            if mine is not None and theirs is not None and theirs > mine:
                bad[name].append(d)
    assert dict(bad) == {}
