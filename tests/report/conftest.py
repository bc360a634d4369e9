"""Report tests reuse the synthetic run folders of tests/publish (runfactory.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "publish"))
