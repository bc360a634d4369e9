"""The layout's rules, checked on the code itself: no import cycle (function-level imports included), each
external system behind one module, modules of one job, nothing in src/ that exists only for tests."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "spectrn"
MAX_LINES = 600
# modules allowed above MAX_LINES, each because it holds one job
ONE_JOB = {
    "analyze/summary.py": "records -> Summary: the one-pass accumulators, A/B comparison and findings",
    "loadgen/runner.py": "one benchmark run: schedules, load shapes, limits, the run folder's writes",
    "render/manifests.py": "config -> Kubernetes objects",
    "kube/client.py": "the only kubernetes module: every API call and its error translation",
    "sim/server.py": "the simulator's HTTP protocol",
    "sim/engine.py": "the simulator's engine loop",
    "loadgen/client.py": "one streaming request, measured per chunk, with every protocol check",
}


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
    # only the CLI prints results: the core emits values
    core = [n for n in g if not n.startswith(("spectrn.cli", "spectrn.sim"))]
    assert core


def test_nothing_in_src_exists_only_for_tests() -> None:
    g = graph()
    imported = {d for deps in g.values() for d in deps}
    entry = {"spectrn", "spectrn.__main__", "spectrn.cli.main"}
    orphans = sorted(n for n in g if n not in imported and n not in entry and not n.endswith("__init__"))
    # package faces (spectrn.sim, spectrn.deploy, ...) are imported by their modules' users
    orphans = [n for n in orphans if not (SRC.parent / n.replace(".", "/") / "__init__.py").exists()]
    assert orphans == [], f"modules no product module imports (test-only code belongs in tests/doubles): {orphans}"


def test_layers_do_not_reach_up() -> None:
    """The pipeline's lower stages never import a higher one: the contracts (run/) and the spec import no stage;
    analysis imports no output stage; publish never imports the report; sweep analysis (recommend, predict) is
    below the report that shows it, sweep orchestration above finish, which it calls per cell; only cli/ is on
    top. The SLO language (``analyze.slo``) is pure and imports no stage: the spec parses SLOs with it at load."""
    rank = {"run": 0, "spec": 0, "windows": 0, "names": 0, "errors": 0, "paths": 0, "analyze.slo": 0, "analyze": 1,
            "dialects": 0, "publish": 2,
            "sweep": 2, "report": 3, "finish": 4, "sweep.orchestrate": 5, "sweep.runners": 5, "cli": 9}  # fmt: skip

    def rank_of(name: str) -> int | None:
        parts = name.split(".")[1:]
        for n in (2, 1):
            key = ".".join(parts[:n])
            if key in rank:
                return rank[key]
        return None

    bad = defaultdict(list)
    for name, deps in graph().items():
        mine = rank_of(name)
        for d in deps:
            theirs = rank_of(d)
            if mine is not None and theirs is not None and theirs > mine:
                bad[name].append(d)
    assert dict(bad) == {}
