"""Talks HTTP to a MAAS region: one typed method per operation, typed errors, the MAAS status
vocabulary. Nothing else sends HTTP to MAAS; it imports nothing of the project (the product
builds its clients in ``maas_domain/site_client.py``).

The simulator (``maas_simulator``) speaks the same wire format from the other side and shares
only the vocabulary in ``status``.
"""
