"""Imports every command module so each registers itself on the app."""

from spectrn.cli import init_cmd  # noqa: F401
from spectrn.cli import bench_cmd  # noqa: F401
from spectrn.cli import render_cmd  # noqa: F401
from spectrn.cli import config_ref_cmd  # noqa: F401
from spectrn.cli import sim_cmd  # noqa: F401
from spectrn.cli import deploy_cmd  # noqa: F401
from spectrn.cli import publish_cmd  # noqa: F401
from spectrn.cli import report_cmd  # noqa: F401
from spectrn.cli import sweep_cmd  # noqa: F401
