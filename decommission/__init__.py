"""Decommission workflows: reimage, full decommission and storage cleanup, with allocation
drain or force-release, release with erase and its fail-closed fallback; a reimage runs a child
onboarding (docs/decommission.md).
"""
