"""Everything that talks to MAAS: the typed client, its errors and the MAAS vocabulary.

Nothing else in the project sends HTTP to MAAS. The simulator (the `maas_simulator` package) speaks
the same wire format from the other side and shares only the vocabulary in ``status``.
"""
