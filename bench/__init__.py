"""Benchmarks: run each from the repository's root as `python -m bench NAME` (`python -m bench` lists
them; `python -m bench.bench_NAME` runs the same script). bench/README.md describes the layout."""
