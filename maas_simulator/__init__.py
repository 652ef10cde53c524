"""A MAAS 2.0 region simulator: a real HTTP server on loopback with the real wire format.

``model`` holds the machines and MAAS's state machine on a scaled clock, ``api`` speaks the
REST API (OAuth1 PLAINTEXT, ``op=`` dispatch, multipart bodies, MAAS's error texts), ``server``
runs it with a control endpoint under ``/_sim/`` for faults, counters and the clock. See
docs/simulator.md. It shares only the status vocabulary with our client, on purpose: the client
is tested against an independent implementation of the wire format.
"""
