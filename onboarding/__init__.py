"""Onboarding workflows: take a machine from an IPMI address to an enrolled, active GPU node:
the kind's stages, the first-boot payload, batches with canary and failure budget, the operator
API and admin pages, and the node-facing enrollment endpoints (docs/onboarding.md).
"""
