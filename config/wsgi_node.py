"""WSGI application for the node listener (``gunicorn config.wsgi_node``): the same Django
project, routed by ``config/node_urls.py`` only, so a node network that reaches this listener
reaches no admin page or admin API. Pair it with ``MAASCP_SEPARATE_NODE_LISTENER=true`` so the
main listener stops serving the node routes (docs/security.md)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

_django = get_wsgi_application()


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    environ["maascp.listener"] = "node"
    return _django(environ, start_response)
