"""Kept for imports written before diagnostics moved to ``maas_domain.maas.diagnostics``."""

from maas_domain.maas.diagnostics import machine_diagnostics

__all__ = ["machine_diagnostics"]
