"""``RunFolder`` (src/spectrn/run/folder.py) is the only writer of a run folder's files.

Every module but folder.py is parsed; a write (``atomic_write_text``, ``write_text``/``write_bytes``, ``open`` or
``Path.open`` with a writing mode, ``json.dump``, ``shutil.copy*``/``move``, ``os.replace``/``rename``, a
module's own ``write*``/``_write*`` helper) whose
arguments or receiver name a run-folder file, directly (``run_dir / "run.json"``, ``run_dir / REQUESTS``) or through
a local variable assigned from such a path in the same function, is a finding. The known-bad snippets below show
that the check catches each way of writing around ``RunFolder``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "spectrn"
OWNER = SRC / "run" / "folder.py"

# Run-folder file names (and the suffixes of the per-variant llmperf files and the scrapes), and the constants
# folder.py names them by. Generic names (index.html, summary.md) are left out: sweeps and capacity searches write
# files of the same names into their own folders.
NAMES = ("run.json", "requests.jsonl", "acceptance.json", "summary.json", "publish.json", "metrics.emf.jsonl")
SUFFIXES = (".prom", "_summary.json", "_individual_responses.json")
CONSTANTS = {"RUN_JSON", "REQUESTS", "ACCEPTANCE", "SUMMARY", "EMF", "PUBLISH_STATE", "STATE_FILE", "METRICS"}
WRITE_FUNCS = {"atomic_write_text", "write_records", "copyfile", "copy", "copy2", "move", "dump", "rename", "replace"}
WRITE_METHODS = {"write_text", "write_bytes"}


def _names_run_file(node: ast.AST, tainted: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            v = sub.value
            if v in NAMES or v.endswith(SUFFIXES):
                return True
        if isinstance(sub, ast.JoinedStr):  # f"{name}.{tag}.prom", f"{stem}_summary.json"
            tail = sub.values[-1] if sub.values else None
            if isinstance(tail, ast.Constant) and isinstance(tail.value, str) and tail.value.endswith(SUFFIXES):
                return True
        if isinstance(sub, ast.Name) and (sub.id in CONSTANTS or sub.id in tainted):
            return True
        if isinstance(sub, ast.Attribute) and (sub.attr in CONSTANTS or sub.attr in tainted):
            return True
    return False


def _writing_mode(call: ast.Call, position: int) -> bool:
    mode: ast.AST | None = call.args[position] if len(call.args) > position else None
    for kw in call.keywords:
        if kw.arg == "mode":
            mode = kw.value
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")


def _is_write(call: ast.Call) -> bool:
    f = call.func
    if isinstance(f, ast.Name):
        if f.id == "open":
            return _writing_mode(call, 1)
        # a module's own write helper (runner's old ``_write_text(path, text)``) writes what it is given
        helper = f.id.lstrip("_").startswith("write") and not f.id.endswith("_error")  # write_error builds one
        return f.id in WRITE_FUNCS or helper
    if isinstance(f, ast.Attribute):
        if f.attr in WRITE_METHODS:
            return True
        if f.attr == "open":  # Path.open(mode)
            return _writing_mode(call, 0)
        if f.attr in {"copyfile", "copy", "copy2", "move"}:
            return isinstance(f.value, ast.Name) and f.value.id == "shutil"
        if f.attr == "dump":
            return isinstance(f.value, ast.Name) and f.value.id == "json"
        if f.attr in {"replace", "rename"}:  # os.replace/os.rename and Path.replace/rename (not str.replace)
            return not (len(call.args) == 2 and all(isinstance(a, ast.Constant) for a in call.args))
    return False


def run_folder_writes(source: str, where: str) -> list[str]:
    """Each write of a run-folder file in ``source``, as 'where:line: code'."""
    tree = ast.parse(source)
    found = []
    functions = (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
    scopes: list[ast.AST] = [tree, *functions]
    for scope in scopes:
        body = list(ast.walk(scope))
        tainted: set[str] = set()
        for n in body:  # one level of data flow: path = run_dir / "run.json"; later written
            if isinstance(n, ast.Assign) and _names_run_file(n.value, set()):
                for t in n.targets:
                    for leaf in ast.walk(t):
                        if isinstance(leaf, ast.Name):
                            tainted.add(leaf.id)
                        elif isinstance(leaf, ast.Attribute):
                            tainted.add(leaf.attr)
        for n in body:
            if not (isinstance(n, ast.Call) and _is_write(n)):
                continue
            parts: list[ast.AST] = [*n.args, *(k.value for k in n.keywords)]
            if isinstance(n.func, ast.Attribute):
                parts.append(n.func.value)
            if any(_names_run_file(p, tainted) for p in parts):
                found.append(f"{where}:{n.lineno}: {ast.unparse(n)[:100]}")
    return sorted(set(found))


def test_only_run_folder_writes_run_folder_files() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == OWNER:
            continue
        found += run_folder_writes(path.read_text(encoding="utf-8"), str(path.relative_to(SRC)))
    assert not found, "write these through RunFolder (src/spectrn/run/folder.py):\n" + "\n".join(found)


@pytest.mark.parametrize(
    "snippet",
    [
        'def f(run_dir):\n    atomic_write_text(run_dir / "run.json", "{}")',
        "def f(run_dir):\n    with (run_dir / REQUESTS).open('w', encoding='utf-8') as out:\n        out.write('')",
        'def f(run_dir, text):\n    path = run_dir / "acceptance.json"\n    path.write_text(text)',
        "def f(run_dir, text):\n    open(run_dir / 'publish.json', 'a').write(text)",
        "def f(src, run_dir):\n    shutil.copyfile(src, run_dir / 'acceptance.json')",
        'def f(mdir, name, tag, text):\n    _ = atomic_write_text(mdir / f"{name}.{tag}.prom", text)',
        'def f(out_dir, meta):\n    _write_text(out_dir / "run.json", meta.model_dump_json())',
        "def f(run_dir, state):\n    json.dump(state, (run_dir / PUBLISH_STATE).open('w'))",
        "def f(tmp, run_dir):\n    target = run_dir / SUMMARY\n    os.replace(tmp, target)",
    ],
)
def test_the_check_catches_a_direct_write(snippet: str) -> None:
    assert run_folder_writes(snippet, "m.py"), snippet


def test_the_check_leaves_reads_and_other_folders_alone() -> None:
    ok = (
        "def f(run_dir, sweep_dir, text):\n"
        "    raw = (run_dir / 'run.json').read_text()\n"
        "    with (run_dir / REQUESTS).open('r') as f:\n        f.read()\n"
        "    atomic_write_text(sweep_dir / 'analysis.json', text)\n"
        "    name = 'run.json'.replace('.json', '')\n"
    )
    assert run_folder_writes(ok, "m.py") == []
