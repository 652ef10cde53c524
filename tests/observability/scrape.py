"""Reading a Prometheus scrape in tests."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """Sum of the samples called ``name`` whose labels include ``labels`` (0 when none)."""
    return sum(
        v
        for (n, ls), v in samples.items()
        if n == name and set(labels.items()) <= set(dict(ls).items())
    )


def families(text: str) -> Mapping[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text)}


def local() -> Samples:
    """The event metrics of this machine's metrics directory (no database gauges)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    from maas_domain.observability.exposition import metrics_dir

    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry, path=str(metrics_dir()))
    return parse(generate_latest(registry).decode())
