"""Imports every command module so each registers itself on the app."""

from spectrn.cli import (
    bench_cmd,  # noqa: F401
    config_ref_cmd,  # noqa: F401
    deploy_cmd,  # noqa: F401
    init_cmd,  # noqa: F401
    publish_cmd,  # noqa: F401
    render_cmd,  # noqa: F401
    report_cmd,  # noqa: F401
    sim_cmd,  # noqa: F401
    sweep_cmd,  # noqa: F401
)
