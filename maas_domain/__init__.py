"""The MAAS domain core: sites, profiles, policy, RoCE assignments, credentials references,
SKUs, nodes, the audit log, API tokens and the secrets backend.

Everything the onboarding, decommission and reconciliation apps share lives here, so that each
concept has one home: site policy is resolved in ``policy``, every privileged change is written
through ``audit``, secrets only pass through ``secrets``.
"""
