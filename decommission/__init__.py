"""Decommission workflows: reimage, full decommission and storage cleanup.

Will own node_decommissions and node_decommission_events, allocation drain/force-release, the
release-with-erase stage and its abort / mark-fixed / no-erase fallback. Reimage reuses the
onboarding deploy stages. See docs/decommission.md.
"""
