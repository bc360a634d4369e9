"""Real vLLM tier tests (a package, so the servers stop when this folder is done)."""
