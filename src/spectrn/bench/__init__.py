"""The two ways to run a bench: local (this machine drives the endpoints) and in-cluster (a load Job does)."""
