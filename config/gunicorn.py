"""gunicorn settings every API and node listener uses (``gunicorn -c python:config.gunicorn``):
Dockerfile, docker-compose.yml, ``make run`` and the benchmarks start it with this file.

``limit_request_line``: gunicorn's largest. Django answers a path and query string past
``maas_domain.api.query.MAX_TARGET`` (4096 bytes) with the API's JSON 414; only a request line
past this limit gets gunicorn's own plain-text 414 (docs/api.md, "Limits").
"""

limit_request_line = 8190
