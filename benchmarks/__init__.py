"""Benchmarks: run with ``make bench``; each prints its figures. Never part of ``make check``."""
