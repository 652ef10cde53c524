"""Onboarding workflows: take a machine from an IPMI address to an enrolled, active GPU node.

Will own node_onboardings, node_onboarding_events and onboarding batches, the onboarding stages
(preflight, discover, commission, storage/PXE preflight, payload, deploy, hardware sync,
enrollment, completion gates) and the node-facing enrollment endpoint. Built in issue 4.
"""
