"""Benchmarks: side-by-side comparisons in one run, printed as tables and saved as PNG plots."""
