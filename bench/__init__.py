"""Benchmarks: run each from the repository's root as `python -m bench.NAME` (bench/harness.py)."""
