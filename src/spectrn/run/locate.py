"""What a path that is not a run folder is, and the run folders near it: the wording of the wrong-folder error."""

from __future__ import annotations

from pathlib import Path

RUN_JSON = "run.json"
MAX_LISTED = 8

# Files that say what a spectrn folder is, when it is not a run folder.
KINDS = (
    ("sweep.json", "a sweep folder (sweep.json)"),
    ("repeats.json", "a repeats folder (repeats.json of `bench --repeats`)"),
    ("capacity.json", "a capacity folder (capacity.json)"),
)


def runs_in(folder: Path) -> list[Path]:
    """The run folders directly inside ``folder`` (those holding a run.json), newest first."""
    try:
        found = [p for p in folder.iterdir() if p.is_dir() and (p / RUN_JSON).is_file()]
    except OSError:
        return []
    return sorted(found, key=lambda p: (p / RUN_JSON).stat().st_mtime, reverse=True)


def _listed(runs: list[Path]) -> str:
    names = ", ".join(str(p) for p in runs[:MAX_LISTED])
    more = f" and {len(runs) - MAX_LISTED} more" if len(runs) > MAX_LISTED else ""
    return names + more


def describe_not_a_run(path: Path) -> tuple[str, str]:
    """(what ``path`` is, the fix naming the run folders that exist) for a path that is not a run folder."""
    if not path.exists():
        what = f"{path} does not exist"
        near = runs_in(path.parent) if path.parent.is_dir() else []
        where = f"the run folders in {path.parent}" if near else ""
    elif not path.is_dir():
        what = f"{path} is a file, not a run folder"
        near = runs_in(path.parent)
        where = "the run folders beside it" if near else ""
    else:
        kind = next((text for name, text in KINDS if (path / name).is_file()), None)
        near = runs_in(path)
        if kind is not None:
            what = f"{path} is {kind}, not a run folder"
            where = "its runs" if near else ""
        elif near:
            what = f"{path} is a results folder holding {len(near)} run(s), not a run folder"
            where = "its runs"
        elif path.name == "report" and (path.parent / RUN_JSON).is_file():
            what = f"{path} is a run's report folder"
            return what, f"pass the run folder itself: {path.parent}"
        else:
            what = f"{path} has no {RUN_JSON}, so it is not a run folder written by `spectrn bench`"
            near = runs_in(path.parent)
            where = "the run folders beside it" if near else ""
    if near:
        return what, f"pass one of {where}: {_listed(near)}"
    return what, "pass a run folder written by `spectrn bench`, e.g. results/<run-id>"
