"""The shared workflow layer: states, the abstract workflow and timeline models.

Onboarding and decommission build on these; leases, checkpoints, the sweep and the recovery verbs
are added here (issues 4 and 5) so both workflows get them by reuse.
"""
