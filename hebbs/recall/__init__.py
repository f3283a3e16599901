"""Recall strategies, their fusion and the composite score (docs/architecture.md)."""
