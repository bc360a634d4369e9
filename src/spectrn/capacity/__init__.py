"""Capacity at an SLO: the highest load each variant carries within the latency targets, and what it costs."""
