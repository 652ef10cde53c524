"""Onboarding workflows: take a machine from an IPMI address to an enrolled, active GPU node.

Owns node_onboardings (with the database rule of one open onboarding per host) and
node_onboarding_events. Issue 4 adds batches, the stages (preflight, discover, commission,
storage/PXE preflight, payload, deploy, hardware sync, enrollment, completion gates), the API and
the node-facing enrollment endpoint.
"""
