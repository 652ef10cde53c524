"""maasctl: the operators' command line for the control plane's admin API (docs/cli.md).

It talks only to the HTTP API (never to the database), so every action goes through the same
checks, idempotency keys and audit as any other API client.
"""
