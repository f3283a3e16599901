"""What several benches run, beside the data they read (bench/datasets/): a collection's quality
evaluation, the synthetic vaults and texts, the end-to-end vault's setup. A bench script imports
these, never another bench script (tests/test_bench_package.py holds it to that)."""
