"""Write-side operations (one function per state change, each atomic and audited).

Naming: ``<entity>_<action>`` with keyword-only arguments, e.g. ``site_create(actor=…, data=…)``.
Views, admin actions and CLI commands call these; none of them changes rows directly.
"""
