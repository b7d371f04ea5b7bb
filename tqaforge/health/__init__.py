"""Benchmark health."""
