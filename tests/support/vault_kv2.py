"""A KV v2-compatible HTTP test server (no Vault package can be installed here).

It enforces the behaviours listed in docs/vault-kv2.md that our backend relies on: versions
that only grow, check-and-set (``cas=0`` create-only, mismatch is HTTP 400 with Vault's text,
``cas_required``), ``max_versions`` trimming, soft delete / undelete / destroy, metadata, LIST
(an empty list is 404), token auth with per-token path capabilities (403 ``permission denied``
for a bad token or a path the policy does not grant), AppRole login, and a sealed mode (503).
Error bodies are always ``{"errors": [...]}``.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class _Version:
    data: dict[str, Any] | None
    created_time: str
    deletion_time: str = ""
    destroyed: bool = False

    def meta(self, number: int) -> dict[str, Any]:
        return {
            "created_time": self.created_time,
            "custom_metadata": None,
            "deletion_time": self.deletion_time,
            "destroyed": self.destroyed,
            "version": number,
        }


@dataclass
class _Secret:
    versions: dict[int, _Version] = field(default_factory=dict)
    current: int = 0
    max_versions: int = 0
    cas_required: bool = False


@dataclass
class KV2State:
    mount: str = "secret"
    secrets: dict[str, _Secret] = field(default_factory=dict)
    # token -> {path prefix under the mount: set of capabilities}; "*" prefix means everything
    tokens: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    approles: dict[tuple[str, str], str] = field(default_factory=dict)
    max_versions: int = 10
    cas_required: bool = False
    sealed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[tuple[str, str]] = field(default_factory=list)

    def allowed(self, token: str | None, path: str, capability: str) -> bool:
        grants = self.tokens.get(token or "")
        if grants is None:
            return False
        return any(
            (prefix == "*" or path.startswith(prefix)) and capability in caps
            for prefix, caps in grants.items()
        )


class _Handler(BaseHTTPRequestHandler):
    state: KV2State
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # -- plumbing -------------------------------------------------------------------------------
    def _send(self, status: int, body: Any = None) -> None:
        raw = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _error(self, status: int, *messages: str) -> None:
        self._send(status, {"errors": list(messages)})

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return {}
        parsed: dict[str, Any] = json.loads(self.rfile.read(length) or b"{}")
        return parsed

    def _token(self) -> str | None:
        token = self.headers.get("X-Vault-Token")
        auth = self.headers.get("Authorization", "")
        if not token and auth.lower().startswith("bearer "):
            token = auth[7:]
        return token

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("POST")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_LIST(self) -> None:
        self._dispatch("LIST")

    def _dispatch(self, method: str) -> None:
        st = self.state
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path
        if method == "GET" and query.get("list") == "true":
            method = "LIST"
        st.requests.append((method, path))
        if st.sealed:
            return self._error(503, "Vault is sealed")
        if path == "/v1/auth/approle/login" and method == "POST":
            body = self._body()
            token = st.approles.get((body.get("role_id", ""), body.get("secret_id", "")))
            if token is None:
                return self._error(400, "invalid role or secret ID")
            return self._send(
                200,
                {
                    "auth": {
                        "client_token": token,
                        "accessor": secrets.token_hex(8),
                        "policies": ["default"],
                        "lease_duration": 3600,
                        "renewable": True,
                    }
                },
            )
        token = self._token()
        if path == "/v1/auth/token/lookup-self":
            if token not in st.tokens:
                return self._error(403, "permission denied")
            return self._send(200, {"data": {"id": token, "policies": ["default"]}})
        prefix = f"/v1/{st.mount}/"
        if not path.startswith(prefix):
            return self._error(404, f"no handler for route {path!r}")
        kind, _, key = path[len(prefix) :].partition("/")
        with st.lock:
            return self._kv(method, kind, key.strip("/"), query, token)

    # -- KV v2 ----------------------------------------------------------------------------------
    def _kv(
        self, method: str, kind: str, key: str, query: dict[str, str], token: str | None
    ) -> None:
        st = self.state
        secret = st.secrets.get(key)
        if kind == "config":
            if not st.allowed(token, "config", "update" if method == "POST" else "read"):
                return self._error(403, "permission denied")
            if method == "POST":
                body = self._body()
                st.max_versions = int(body.get("max_versions", st.max_versions))
                st.cas_required = bool(body.get("cas_required", st.cas_required))
                return self._send(204)
            return self._send(
                200, {"data": {"max_versions": st.max_versions, "cas_required": st.cas_required}}
            )
        if kind == "data":
            return self._data(method, key, secret, query, token)
        if kind in ("delete", "undelete", "destroy") and method == "POST":
            capability = "update" if kind != "destroy" else "delete"
            if not st.allowed(token, key, capability):
                return self._error(403, "permission denied")
            versions = [int(v) for v in self._body().get("versions", [])]
            if not versions:
                return self._error(400, "no version number provided")
            for number in versions:
                version = secret.versions.get(number) if secret else None
                if version is None:
                    continue
                if kind == "delete":
                    version.deletion_time = version.deletion_time or _now()
                elif kind == "undelete" and not version.destroyed:
                    version.deletion_time = ""
                elif kind == "destroy":
                    version.destroyed, version.data = True, None
            return self._send(204)
        if kind == "metadata":
            return self._metadata(method, key, secret, token)
        return self._error(405, "unsupported operation")

    def _data(
        self,
        method: str,
        key: str,
        secret: _Secret | None,
        query: dict[str, str],
        token: str | None,
    ) -> None:
        st = self.state
        if method == "GET":
            if not st.allowed(token, key, "read"):
                return self._error(403, "permission denied")
            if secret is None or not secret.versions:
                return self._error(404)
            number = int(query.get("version") or 0) or secret.current
            version = secret.versions.get(number)
            if version is None:
                return self._error(404)
            if version.deletion_time or version.destroyed:
                # Vault answers 404 with the metadata (and data null) for deleted versions.
                return self._send(404, {"data": {"data": None, "metadata": version.meta(number)}})
            return self._send(
                200, {"data": {"data": version.data, "metadata": version.meta(number)}}
            )
        if method in ("POST", "PATCH"):
            capability = (
                ("update" if secret and secret.versions else "create")
                if method == "POST"
                else "patch"
            )
            if not st.allowed(token, key, capability):
                return self._error(403, "permission denied")
            body = self._body()
            if method == "PATCH" and (secret is None or not secret.versions):
                return self._error(404)
            if "data" not in body or not isinstance(body["data"], dict):
                return self._error(400, "no data provided")
            options = body.get("options") or {}
            current = secret.current if secret else 0
            cas_required = st.cas_required or (secret.cas_required if secret else False)
            if "cas" in options:
                if int(options["cas"]) != current:
                    return self._error(
                        400, "check-and-set parameter did not match the current version"
                    )
            elif cas_required:
                return self._error(400, "check-and-set parameter required for this call")
            if secret is None:
                secret = st.secrets[key] = _Secret()
            data = body["data"]
            if method == "PATCH":
                base = dict(secret.versions[secret.current].data or {})
                base.update({k: v for k, v in data.items() if v is not None})
                data = base
            secret.current += 1
            secret.versions[secret.current] = _Version(data=data, created_time=_now())
            limit = secret.max_versions or st.max_versions or 10
            for old in sorted(secret.versions)[:-limit]:
                del secret.versions[old]
            return self._send(200, {"data": secret.versions[secret.current].meta(secret.current)})
        if method == "DELETE":
            if not st.allowed(token, key, "delete"):
                return self._error(403, "permission denied")
            if secret and secret.current in secret.versions:
                secret.versions[secret.current].deletion_time = _now()
            return self._send(204)
        return self._error(405, "unsupported operation")

    def _metadata(self, method: str, key: str, secret: _Secret | None, token: str | None) -> None:
        st = self.state
        if method == "LIST":
            if not st.allowed(token, key, "list"):
                return self._error(403, "permission denied")
            base = f"{key}/" if key else ""
            keys = sorted(
                {
                    k[len(base) :].split("/")[0] + ("/" if "/" in k[len(base) :] else "")
                    for k in st.secrets
                    if k.startswith(base)
                }
            )
            if not keys:
                return self._send(404, {"errors": []})
            return self._send(200, {"data": {"keys": keys}})
        if method == "GET":
            if not st.allowed(token, key, "read"):
                return self._error(403, "permission denied")
            if secret is None:
                return self._error(404)
            return self._send(
                200,
                {
                    "data": {
                        "current_version": secret.current,
                        "oldest_version": min(secret.versions, default=0),
                        "max_versions": secret.max_versions,
                        "cas_required": secret.cas_required,
                        "delete_version_after": "0s",
                        "custom_metadata": None,
                        "versions": {
                            str(n): {
                                "created_time": v.created_time,
                                "deletion_time": v.deletion_time,
                                "destroyed": v.destroyed,
                            }
                            for n, v in secret.versions.items()
                        },
                    }
                },
            )
        if method == "POST":
            if not st.allowed(token, key, "update"):
                return self._error(403, "permission denied")
            body = self._body()
            secret = st.secrets.setdefault(key, _Secret())
            secret.max_versions = int(body.get("max_versions", secret.max_versions))
            secret.cas_required = bool(body.get("cas_required", secret.cas_required))
            return self._send(204)
        if method == "DELETE":
            if not st.allowed(token, key, "delete"):
                return self._error(403, "permission denied")
            st.secrets.pop(key, None)
            return self._send(204)
        return self._error(405, "unsupported operation")


class KV2Server:
    """Run the test server on a loopback port in a background thread."""

    ALL = frozenset({"create", "read", "update", "patch", "delete", "list"})

    def __init__(self) -> None:
        self.state = KV2State()
        self.root_token = "root-" + secrets.token_hex(8)
        self.state.tokens[self.root_token] = {"*": set(self.ALL)}
        handler = type("Handler", (_Handler,), {"state": self.state})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add_token(self, grants: dict[str, set[str]]) -> str:
        token = "t-" + secrets.token_hex(8)
        self.state.tokens[token] = grants
        return token

    def add_approle(self, grants: dict[str, set[str]]) -> tuple[str, str, str]:
        token = self.add_token(grants)
        role_id, secret_id = secrets.token_hex(8), secrets.token_hex(8)
        self.state.approles[(role_id, secret_id)] = token
        return role_id, secret_id, token

    def __enter__(self) -> KV2Server:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
