"""Test doubles: fake Kubernetes API, CloudWatch sinks, exact-schedule reference server, synthetic run folders."""
