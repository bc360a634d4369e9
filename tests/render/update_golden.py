"""Rewrite tests/render/golden/ from the current manifests (`make golden`); the tests themselves never write.

Run it only after reviewing why the golden test failed, then read `git diff tests/render/golden` (printed
by `make golden`) before committing."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from test_render_golden import CASES, GOLDEN, render_case  # noqa: E402


def main() -> None:
    GOLDEN.mkdir(exist_ok=True)
    expected = {f"{name}.yaml" for name in CASES}
    for stale in sorted(p for p in GOLDEN.glob("*.yaml") if p.name not in expected):
        stale.unlink()
        print(f"removed {stale.relative_to(HERE.parent.parent)}")
    for name in sorted(CASES):
        path = GOLDEN / f"{name}.yaml"
        text = render_case(name)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(HERE.parent.parent)}")


if __name__ == "__main__":
    main()
