"""The MAAS REST API 2.0 wire format: requests, responses, resources, form parsing, OAuth and
the permission rules every handler module shares (docs/maas-api.md §1.3, §2, §3.4, §11).

A resource is a path template with actions ``(name, method, op)``; the same table routes requests
and produces the ``describe/`` document real clients (python-libmaas) build themselves from.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from maas_client.status import NodeStatus
from maas_simulator.errors import ApiError, invalid
from maas_simulator.model import Simulator
from maas_simulator.nodes import Machine, Node
from maas_simulator.users import Token, User

S = NodeStatus
MAC = re.compile(r"^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$", re.IGNORECASE)
OAUTH_PARAMS = (
    "oauth_consumer_key",
    "oauth_token",
    "oauth_signature",
    "oauth_signature_method",
    "oauth_timestamp",
    "oauth_nonce",
)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    form: dict[str, list[str]]
    host: str
    user: User | None = None
    params: dict[str, str] = field(default_factory=dict)
    token: Token | None = None  # the token the request was signed with

    def get(self, name: str, default: str | None = None) -> str | None:
        for source in (self.query, self.form):
            if source.get(name):
                return source[name][0]
        return default

    def has(self, name: str) -> bool:
        return name in self.query or name in self.form

    def all(self, name: str) -> list[str]:
        return self.query.get(name, []) + self.form.get(name, [])

    @property
    def data(self) -> dict[str, list[str]]:
        """``request.data``: the body of a POST or PUT (the query string is not part of it)."""
        return self.form


@dataclass
class Response:
    status: int
    body: bytes | list[bytes]  # a list is sent as is, without joining it first
    content_type: str = "application/json; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def length(self) -> int:
        return len(self.body) if isinstance(self.body, bytes) else sum(map(len, self.body))

    @property
    def content(self) -> bytes:
        return self.body if isinstance(self.body, bytes) else b"".join(self.body)


Handler = Callable[[Simulator, Request], Any]


@dataclass
class Action:
    name: str
    method: str
    op: str | None
    fn: Handler
    admin: bool = False  # @admin_method: 403 "This method is reserved for admin users."
    anon: bool = False
    doc: str = ""
    perm: str | None = None  # NodePermission checked on the path's node: 403, empty body


@dataclass
class Resource:
    name: str  # MAAS handler class name, e.g. MachineHandler
    path: str  # e.g. /MAAS/api/2.0/machines/{system_id}/ (what describe/ shows)
    actions: list[Action]
    anon_name: str | None = None
    auth: bool = True  # False: the resource has no authenticated handler (version/)
    aliases: tuple[str, ...] = ()  # other paths MAAS routes to the same handler
    patterns: dict[str, str] = field(default_factory=dict)  # a parameter's regex if not [^/]+

    def __post_init__(self) -> None:
        self.params = re.findall(r"{(\w+)}", self.path)
        self.regexes = [_template(p, self.patterns) for p in (self.path, *self.aliases)]

    def match(self, path: str) -> dict[str, str] | None:
        for regex in self.regexes:
            found = regex.match(path)
            if found:
                return found.groupdict()
        return None

    def allowed_methods(self, anonymous: bool) -> list[str]:
        """piston's ``allowed_methods`` of the handler that serves the request."""
        use_anon = anonymous or not self.auth
        return sorted({a.method for a in self.actions if a.anon == use_anon or not self.auth})


def _template(path: str, patterns: dict[str, str]) -> re.Pattern[str]:
    """A path template (``{name}`` = one path segment unless ``patterns`` says otherwise)."""
    escaped = re.escape(path).replace(r"\{", "{").replace(r"\}", "}")
    return re.compile(
        "^"
        + re.sub(
            r"{(\w+)}",
            lambda m: f"(?P<{m[1]}>{patterns.get(m[1], '[^/]+')})",
            escaped,
        )
        + "$"
    )


def A(name: str, method: str, op: str | None, fn: Handler, **kw: Any) -> Action:
    return Action(name, method, op, fn, **kw)


# -- request parsing ------------------------------------------------------------------------------


def parse_form(content_type: str, body: bytes) -> dict[str, list[str]]:
    """Multipart (with base64 parts decoded, as real clients send) or urlencoded bodies."""
    if not body:
        return {}
    if content_type.startswith("multipart/form-data"):
        message = BytesParser(policy=HTTP).parsebytes(
            b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body
        )
        form: dict[str, list[str]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if not name:
                continue
            payload = part.get_payload(decode=True)
            text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
            form.setdefault(str(name), []).append(text)
        return form
    if content_type.startswith("application/x-www-form-urlencoded"):
        return parse_qs(body.decode(), keep_blank_values=True)
    return {}


def parse_oauth(header: str) -> dict[str, str] | None:
    if not header.lower().startswith("oauth "):
        return None
    params = {}
    for part in header[6:].split(","):
        if "realm" in part or "=" not in part:
            continue
        key, _, value = part.strip().partition("=")
        params[key.strip()] = unquote(value.strip().strip('"'))
    return params


def oauth_error(message: str) -> ApiError:
    """piston's ``send_oauth_error``: 401 with an OAuth challenge header, as HTML."""
    return ApiError(
        401,
        f"Authorization Error: {message}",
        headers={"WWW-Authenticate": 'OAuth realm="OAuth"'},
        content_type="text/html; charset=utf-8",
    )


def authenticate(
    sim: Simulator,
    header: str | None,
    *,
    method: str = "GET",
    url: str = "",
    request_params: list[tuple[str, str]] | None = None,
) -> tuple[User, Token] | None:
    """OAuth1 as MAAS (piston) checks it: PLAINTEXT, or HMAC-SHA1 over the request's base
    string (``method``, ``url`` as the client addressed it, ``request_params``: the query and
    the form fields, multipart ones included, as piston takes them from ``request.REQUEST``).
    Raise 401 with MAAS's texts; None = anonymous.

    Every token has its own consumer (``create_auth_token``): the consumer key names the token,
    whose key and secret must then match.
    """
    params = parse_oauth(header or "")
    if params is None:
        return None
    if not all(p in params for p in OAUTH_PARAMS):
        return None
    found = next(
        (
            (u, t)
            for u in sim.users.values()
            for t in u.all_tokens()
            if t.consumer_key == params["oauth_consumer_key"]
        ),
        None,
    )
    if found is None:
        raise oauth_error("Invalid API key.")
    user, token = found
    if params["oauth_token"] != token.token_key:
        raise oauth_error(f"'Invalid access token: {params['oauth_token']}'")
    if params.get("oauth_version", "1.0") != "1.0":
        raise oauth_error("'OAuth version must be 1.0'")
    method_name = params["oauth_signature_method"]
    if method_name == "HMAC-SHA1":
        base = signature_base_string(method, url, [*params.items(), *(request_params or [])])
        key = f"&{escape(token.token_secret)}".encode()
        expected = base64.b64encode(hmac.new(key, base.encode(), hashlib.sha1).digest()).decode()
        if not hmac.compare_digest(expected, params["oauth_signature"]):
            raise oauth_error(f"'Invalid signature. Expected signature base string: {base}'")
        return user, token
    if method_name != "PLAINTEXT":
        raise oauth_error(
            f"'Signature method {method_name} not supported try one of the following: "
            "PLAINTEXT, HMAC-SHA1'"
        )
    if params["oauth_signature"] != f"&{token.token_secret}":
        # piston's text quotes the expected signature, the token secret itself: not echoed here
        raise oauth_error("'Invalid signature.'")
    return user, token


def escape(value: str) -> str:
    """OAuth's percent-encoding (RFC 5849 3.6: only unreserved characters stay)."""
    return quote(value, safe="~")


def signature_base_string(method: str, url: str, params: list[tuple[str, str]]) -> str:
    """RFC 5849 3.4.1: the method, the URL without query (scheme and host lower case, no default
    port) and every parameter but the signature and the realm, encoded and sorted."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port
    if port is not None and (parts.scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    base_url = f"{parts.scheme.lower()}://{host}{parts.path}"
    pairs = sorted(
        (escape(k), escape(v)) for k, v in params if k not in ("oauth_signature", "realm")
    )
    normalized = "&".join(f"{k}={v}" for k, v in pairs)
    return "&".join(escape(x) for x in (method.upper(), base_url, normalized))


# -- permissions ----------------------------------------------------------------------------------


def has_perm(user: User, perm: str, node: Node) -> bool:
    """MAAS's local authorisation backend (no RBAC) for ``NodePermission`` on a node."""
    owner = getattr(node, "owner", None)
    can_edit = owner is None or owner == user.username or user.is_superuser
    if perm == "view":  # only machines are filtered: another user's is hidden from a user
        return node.node_type != 0 or can_edit
    if perm == "edit":
        return not node.locked and can_edit
    if perm == "lock":
        return can_edit
    if perm == "admin_read":
        return user.is_superuser
    if perm == "admin":
        return not node.locked and user.is_superuser
    raise ValueError(perm)


def require(user: User | None, perm: str, node: Node) -> None:
    """``get_node_or_404``'s permission check: PermissionDenied(), a 403 with an empty body."""
    assert user is not None
    if not has_perm(user, perm, node):
        raise ApiError(403, "")


# -- helpers ------------------------------------------------------------------------------------

HOST_LABEL = re.compile(r"[a-zA-Z0-9-]*$")


def hostname_problem(hostname: str) -> str | None:
    """``validate_hostname``: what is wrong with a hostname (RFCs 952 and 1123 as MAAS reads
    them), or None."""
    if len(hostname) > 255:
        return "Hostname is too long.  Maximum allowed is 255 characters."
    host = hostname.split(".")[0]
    if "_" in host:
        return f"Host label cannot contain underscore: {host!r}."
    for label in hostname.split("."):
        if not label:
            return "DNS name contains an empty label."
        if len(label) > 63:
            return f"Label is too long: {label!r}.  Maximum allowed is 63 characters."
        if label.startswith("-") or label.endswith("-"):
            return f"Label cannot start or end with hyphen: {label!r}."
        if not HOST_LABEL.match(label):
            return f"Label contains disallowed characters: {label!r}."
    return None


def machine_or_404(sim: Simulator, req: Request) -> Machine:
    m = sim.machines.get(req.params["system_id"])
    if m is None:
        raise ApiError(404, "No Machine matches the given query.")
    return m


def node_or_404(sim: Simulator, req: Request) -> Node:
    node = sim.node(req.params["system_id"])
    if node is None:
        raise ApiError(404, "No Node matches the given query.")
    return node


def raw(data: bytes) -> Response:
    return Response(200, data)


def text(status: int, message: str) -> Response:
    return Response(status, message.encode(), "text/plain; charset=utf-8")


def deleted() -> Response:
    """piston's ``rc.DELETED``."""
    return Response(204, b"", "text/plain")


def mandatory(req: Request, name: str, source: dict[str, list[str]] | None = None) -> str:
    """``get_mandatory_param``: a missing parameter is a 400 ``No provided <name>!``."""
    values = (source if source is not None else req.data).get(name)
    if not values:
        raise ApiError(400, f"No provided {name}!")
    return values[0]


def int_param(req: Request, name: str, default: int | None) -> int | None:
    """``get_optional_param(..., Int)``: absent → the default; empty → None (formencode's empty
    value, not the default); a non-integer is a 400 with formencode's text."""
    value = req.get(name)
    if value is None:
        return default
    if value.strip() == "":
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise ApiError(400, f"Invalid {name}: Please enter an integer value") from exc


def invalid_choice(field_name: str, value: str, choices: list[str]) -> ApiError:
    """``compose_invalid_choice_text``: ``'x' is not a valid <field>.  It should be one of:``."""
    listed = ", ".join(f"'{c}'" for c in choices)
    return invalid(
        {field_name: [f"'{value}' is not a valid {field_name}.  It should be one of: {listed}."]}
    )


# -- Django form fields, as MAAS's forms clean them ----------------------------------------------

CHOICE = "Select a valid choice. That choice is not one of the available choices."
REQUIRED = "This field is required."


def form_data(req: Request) -> dict[str, str]:
    """A form's view of the body: the last value of each field, as ``QueryDict.get`` gives
    it to a single-valued field."""
    return {k: v[-1] for k, v in req.data.items() if v}


# How MAAS 3.5 reads a boolean depends on the parser of that one field (docs/maas-api.md §3.7,
# "How MAAS reads each field"); the same text means different things in each.


def checkbox(value: str) -> bool:
    """``BooleanField`` (``CheckboxInput``): only "false" (any case) and "" are false; "0" is
    true, as Django reads it."""
    return value.lower() not in ("false", "")


STRING_BOOL_TRUE = ("true", "t", "yes", "y", "on", "1")
STRING_BOOL_FALSE = ("false", "f", "no", "n", "off", "0")


def string_bool(source: dict[str, list[str]], name: str, default: bool = False) -> bool:
    """``get_optional_param(source, name, default, StringBool)`` (formencode): absent → the
    default; ``true t yes y on 1`` (any case, stripped) → true; ``false f no n off 0`` and the
    empty string → false; anything else → 400 ``Invalid <name>: Value should be 'true' or
    'false'``. ``source`` is what the handler reads (``request.POST``: the body; ``request.GET``:
    the query string)."""
    values = source.get(name)
    if not values:
        return default
    value = values[-1].strip().lower()
    if value in STRING_BOOL_TRUE:
        return True
    if not value or value in STRING_BOOL_FALSE:
        return False
    raise ApiError(400, f"Invalid {name}: Value should be 'true' or 'false'")


def any_value(source: dict[str, list[str]], name: str) -> bool:
    """``get_optional_param(source, name, False, Bool)`` (formencode ``Bool``): any non-empty
    value is true, ``0`` and ``false`` included; absent or empty is false."""
    values = source.get(name)
    return bool(values and values[-1])


def null_boolean(value: str | None) -> bool | None:
    """``NullBooleanField`` (``NullBooleanSelect``): "true"/"True"/"2", "false"/"False"/"3",
    anything else unknown (None)."""
    return {"true": True, "True": True, "2": True, "false": False, "False": False, "3": False}.get(
        value or ""
    )


def whole_number(
    data: dict[str, str],
    name: str,
    errors: dict[str, list[str]],
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int | None:
    """``IntegerField(min_value=…, max_value=…)``: None when absent or blank, else the number
    or an error under ``name`` with Django's text."""
    value = data.get(name, "").strip()
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        errors[name] = ["Enter a whole number."]
        return None
    if minimum is not None and number < minimum:
        errors[name] = [f"Ensure this value is greater than or equal to {minimum}."]
        return None
    if maximum is not None and number > maximum:
        errors[name] = [f"Ensure this value is less than or equal to {maximum}."]
        return None
    return number


def byte_size(
    data: dict[str, str], name: str, errors: dict[str, list[str]], *, minimum: int, maximum: int
) -> int | None:
    """MAAS's ``BytesField``: digits with an optional K/M/G/T/P/E (SI) suffix, then the bounds;
    None when absent or blank."""
    value = data.get(name, "")
    if value == "":
        return None
    if not re.fullmatch(r"-?[0-9]+([KkMmGgTtPpEe])?", value):
        errors[name] = ["Enter a valid value."]
        return None
    units = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15, "e": 10**18}
    suffix = value[-1].lower()
    number = int(value[:-1]) * units[suffix] if suffix in units else int(value)
    if number < minimum:
        errors[name] = [f"Ensure this value is greater than or equal to {minimum}."]
        return None
    if number > maximum:
        errors[name] = [f"Ensure this value is less than or equal to {maximum}."]
        return None
    return number


def ip_field(data: dict[str, str], name: str, errors: dict[str, list[str]]) -> str | None:
    """``GenericIPAddressField``: None when absent or blank."""
    value = data.get(name, "").strip()
    if not value:
        return None
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        errors[name] = ["Enter a valid IPv4 or IPv6 address."]
        return None
