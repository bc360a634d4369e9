"""Imports every command module so each registers itself on the app."""

from spectrn.cli import init_cmd  # noqa: F401
