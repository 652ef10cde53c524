"""Observability: Prometheus metrics (``metrics``: every metric family, and the functions that
record them; ``exposition``: the admin scrape endpoint and the worker metrics port) and the
optional direct Loki push handler (``loki``). See docs/observability.md."""
