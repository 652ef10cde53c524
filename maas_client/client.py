"""The MAAS client: one typed method per operation the workflows need.

Wire format as real clients send it (docs/maas-api.md §2, §12): OAuth1 PLAINTEXT with an empty
consumer secret, ``op=`` in the query string, multipart bodies with base64 parts, trailing
slashes, JSON answers. Every request has connect and read timeouts, is counted and timed per
operation and outcome, and is logged with site, system_id and the correlation id (never with
parameters: some carry power passwords or user data).

This package imports nothing of the project's: the product builds clients for its sites in
``maas_domain/site_client.py`` (URL, TLS, key, the outbound address rules and the metrics).

Retries: only safe reads (GET) are retried, on ``MaasTransient``, with capped exponential
backoff and full jitter, honouring Retry-After. Mutations are sent once; on a transient failure
the caller gets ``MaasTransient(maybe_applied=...)`` and must read the machine back.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
import random
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

import orjson
import requests

from maas_client import listing, types
from maas_client.errors import (
    MaasBadRequest,
    MaasError,
    MaasServerError,
    MaasTransient,
    classify,
    excerpt,
)
from maas_client.hardware import HardwareReads
from maas_client.stats import STATS, CallStats
from maas_client.transport import Direct
from maas_client.wire import (
    Credentials,
    PlaintextAuth,
    api_root,
    encode_multipart,
    environ_proxies,
    gc_paused,
    is_json,
    server_time,
    shared_adapter,
)

log = logging.getLogger("maas.client")


LARGE_BODY = 1 << 20
READ_CHUNK = 1 << 20
# A 10,000-machine listing is ~71 MB; a bigger answer is a misbehaving or hostile server.
DEFAULT_MAX_BODY = 256 << 20
DEFAULT_DEADLINE = 120.0  # seconds for one request, body included


def _b(value: bool) -> str:
    return "true" if value else "false"


@dataclass(frozen=True)
class _Request:
    """One operation's request, as every attempt of it sends it."""

    operation: str
    method: str
    path: str
    params: list[tuple[str, str]]
    body: bytes | None
    system_id: str
    stream: Callable[[Iterator[bytes]], Any] | None
    headers: dict[str, str]


def _refuse(response: Any, content: bytes, operation: str, system_id: str) -> None:
    """A redirect (never followed) or an error answer as its typed error."""
    status = response.status_code
    if 300 <= status < 400:
        raise MaasServerError(
            f"MAAS answered {status} to {operation} (a redirect, not followed: check the "
            "site's maas_url)",
            operation=operation,
            status=status,
            system_id=system_id,
        )
    if status >= 400:
        raise classify(status, response.headers, content, operation=operation, system_id=system_id)


def _transport_error(exc: Exception, operation: str, system_id: str) -> MaasTransient:
    """A connection error or timeout: transient; maybe applied unless MAAS provably never
    received the request (connection refused, or a connect timeout)."""
    not_sent = isinstance(exc, requests.ConnectTimeout) or (
        isinstance(exc, requests.ConnectionError) and "NewConnectionError" in repr(exc)
    )
    return MaasTransient(
        f"{type(exc).__name__} talking to MAAS for {operation}",
        operation=operation,
        system_id=system_id,
        maybe_applied=not not_sent,
    )


# Called after every HTTP attempt with (site, operation, outcome, status, seconds): the product
# counts it in Prometheus (maas_domain/site_client.py); this package imports nothing of ours.
Observer = Callable[[str, str, str, int | None, float], None]


# What reading an answer of an unexpected shape raises (a missing key, a string where a list
# was due, HTML where JSON was, a number out of range): each becomes one MaasServerError.
_SHAPE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError)
T = TypeVar("T")


def _reading_answers(cls: type[T]) -> type[T]:
    """Every public method of the client: an answer MAAS 3.5 would not send (not JSON, or JSON
    of another shape) is a ``MaasServerError`` naming the operation, never a stray exception a
    caller (a probe, a stage, an API view) would answer with a 500."""
    for klass in reversed(cls.__mro__[:-1]):  # its own methods and its mixins' (hardware.py)
        for name, method in list(vars(klass).items()):
            if name.startswith("_") or not callable(method) or name in ("close",):
                continue
            setattr(cls, name, _checked(name, method))
    return cls


def _checked(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except MaasError:
            raise
        except _SHAPE_ERRORS as exc:
            tb = exc.__traceback__
            if tb is not None and tb.tb_next is None:
                raise  # the call itself was wrong (its arguments): a bug, not MAAS's answer
            raise MaasServerError(
                f"MAAS's answer to {name} is not what MAAS sends "
                f"({type(exc).__name__}: {excerpt(str(exc), 120)})",
                operation=name,
            ) from exc

    return call


@_reading_answers
class MaasClient(HardwareReads):
    """``target_problem(host, port)`` names why an address must not be called (a metadata
    address, docs/security.md) before the first connection; ``maas_domain/site_client.py``
    builds every product client with it."""

    def __init__(
        self,
        url: str,
        api_key: str | None,
        *,
        site: str = "",
        verify_tls: bool = True,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        read_attempts: int = 4,
        backoff_base: float = 0.5,
        backoff_cap: float = 10.0,
        retry_after_cap: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        stats: CallStats = STATS,
        before_mutation: Callable[[str], None] | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        deadline: float = DEFAULT_DEADLINE,
        target_problem: Callable[[str, int | None], str | None] | None = None,
        observe: Observer | None = None,
    ) -> None:
        self.before_mutation = before_mutation
        self.target_problem = target_problem
        self.observe = observe
        self.maas_time: datetime | None = None  # MAAS's clock at its latest answer (Date header)
        self.max_body = max_body
        self.deadline = deadline
        self._target_checked = False
        self.root = api_root(url)
        self.site = site
        self.timeout = (connect_timeout, read_timeout)
        self.read_attempts = max(read_attempts, 1)
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.retry_after_cap = retry_after_cap
        self.sleep = sleep
        self.stats = stats
        self.session = requests.Session()
        self.session.verify = verify_tls
        self.session.headers["Accept"] = "application/json"
        # the process's pools: a workflow step's client reuses the connections of the steps
        # before it (one per site and TLS setting; wire.shared_adapter)
        adapter = shared_adapter()
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)
        self._direct: Direct | None = None
        if api_key is not None:  # None: anonymous (only version/ and describe/ answer)
            auth = PlaintextAuth(Credentials.parse(api_key))
            self.session.auth = auth
            # what requests reads from the environment at every request (the proxies for
            # MAAS's host, a CA bundle), read once: the environment is the process's and
            # every request goes to the one host. With a key, no netrc is ever read.
            self.session.proxies = environ_proxies(self.root)
            if verify_tls is True:
                bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
                self.session.verify = bundle or True
            self.session.trust_env = False
            if not self.session.proxies and self.root.isascii():
                # requests' work per request done once (transport.py); through a proxy, or
                # to a host name IDNA would encode, Session.request as before
                self._direct = Direct(self.session, self.root, auth)

    def close(self) -> None:
        self.session.close()

    # -- transport ------------------------------------------------------------------------------
    def _send(
        self,
        operation: str,
        method: str,
        path: str,
        *,
        op: str | None = None,
        query: Sequence[tuple[str, str]] = (),
        form: Sequence[tuple[str, str]] = (),
        system_id: str = "",
        stream: Callable[[Iterator[bytes]], Any] | None = None,
    ) -> Any:
        """One operation: a safe read retries transient failures (``read_attempts``), a
        mutation is sent once (docs/architecture.md, "Talking to MAAS"). ``stream``: a 2xx JSON
        answer is handed to it as chunks while they arrive (a large listing, ``listing.py``),
        and its result returned, instead of being read whole."""
        params = [("op", op)] if op else []
        params += list(query)
        body, content_type = encode_multipart(form) if method in ("POST", "PUT") else (None, None)
        request = _Request(operation, method, path, params, body, system_id, stream,
                           {"Content-Type": content_type} if content_type else {})  # fmt: skip
        attempts = self.read_attempts if method == "GET" else 1
        self._check_target(operation, system_id)
        if method != "GET" and self.before_mutation is not None:
            self.before_mutation(operation)  # e.g. renew a workflow lease; may raise to stop
        for attempt in range(1, attempts + 1):
            try:
                return self._attempt(request, attempt)
            except MaasTransient as error:
                if attempt == attempts:
                    raise
                self.sleep(self._backoff(attempt, error.retry_after))
        raise AssertionError("unreachable")

    def _attempt(self, request: _Request, attempt: int) -> Any:
        """One HTTP exchange, counted and timed whatever its outcome; MAAS's answer as data,
        or a typed error (``errors.classify``)."""
        operation, system_id, started = request.operation, request.system_id, time.monotonic()
        try:
            response = self._exchange(request)
            self.maas_time = server_time(response) or self.maas_time
            status = response.status_code
            if request.stream is not None and 200 <= status < 300 and status != 204:
                return self._streamed(request, response, started, attempt)
            content = b"".join(self._chunks(response, started, operation, system_id))
            _refuse(response, content, operation, system_id)
        except requests.RequestException as exc:
            error = _transport_error(exc, operation, system_id)
            self._record(operation, error.kind, started, system_id, attempt, None)
            raise error from exc
        except MaasError as error:
            self._record(operation, error.kind, started, system_id, attempt, error.status)
            raise
        self._record(operation, "ok", started, system_id, attempt, status)
        if status == 204 or not content:
            return None
        if is_json(response):
            with gc_paused(len(content) > LARGE_BODY):
                return orjson.loads(content)
        return content

    def _exchange(self, request: _Request) -> Any:
        """The request, straight to the pool when the client can (``transport.py``)."""
        if self._direct is not None:
            return self._direct.send(
                request.method,
                request.path,
                params=request.params,
                body=request.body,
                headers=request.headers,
                timeout=self.timeout,
            )
        return self.session.request(
            request.method,
            self.root + request.path,
            params=request.params,
            data=request.body,
            headers=request.headers,
            timeout=self.timeout,
            stream=True,
            allow_redirects=False,  # MAAS does not redirect API calls; nothing follows
        )

    def _streamed(self, request: _Request, response: Any, started: float, attempt: int) -> Any:
        operation, system_id = request.operation, request.system_id
        assert request.stream is not None
        chunks = self._chunks(response, started, operation, system_id)
        try:
            value = request.stream(chunks) if is_json(response) else listing.not_json(chunks)
        except _SHAPE_ERRORS:  # the answer arrived; its shape is wrong
            self._record(operation, "ok", started, system_id, attempt, response.status_code)
            raise
        finally:
            chunks.close()
            response.close()
        self._record(operation, "ok", started, system_id, attempt, response.status_code)
        return value

    def _check_target(self, operation: str, system_id: str) -> None:
        """Refuse link-local and cloud metadata addresses (unless the deployment allows them)
        before the first connection (docs/security.md)."""
        if self._target_checked or self.target_problem is None:
            return
        parts = urlsplit(self.root)
        problem = self.target_problem(parts.hostname or "", parts.port)
        if problem:
            raise MaasServerError(
                f"refused to call MAAS: {problem} (MAASCP_ALLOW_LINK_LOCAL_TARGETS allows it)",
                operation=operation,
                system_id=system_id,
            )
        self._target_checked = True

    def _chunks(
        self, response: Any, started: float, operation: str, system_id: str
    ) -> Generator[bytes, None, None]:
        """The body in 1 MiB chunks (requests' default is 10 KiB: a 65 MB machine listing
        arrives in 0.05 s instead of 0.2 s), at most ``max_body`` bytes, finished within
        ``deadline`` seconds of the request's start (each read also has the read timeout)."""
        size = 0
        try:
            for chunk in response.iter_content(READ_CHUNK):
                size += len(chunk)
                if size > self.max_body:
                    raise MaasServerError(
                        f"MAAS's answer to {operation} is larger than {self.max_body} bytes",
                        operation=operation,
                        status=response.status_code,
                        system_id=system_id,
                    )
                if time.monotonic() - started > self.deadline:
                    raise MaasTransient(
                        f"MAAS's answer to {operation} exceeded the {self.deadline:g}s deadline",
                        operation=operation,
                        system_id=system_id,
                    )
                yield chunk
        finally:
            response.close()

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap)
        ceiling = min(self.backoff_cap, self.backoff_base * (2 ** (attempt - 1)))
        return random.uniform(0, ceiling)  # noqa: S311 (jitter, not crypto)

    def _record(
        self,
        operation: str,
        outcome: str,
        started: float,
        system_id: str,
        attempt: int,
        status: int | None,
    ) -> None:
        seconds = time.monotonic() - started
        self.stats.record(operation, outcome, seconds)
        if self.observe is not None:
            self.observe(self.site, operation, outcome, status, seconds)
        log.log(
            logging.INFO
            if outcome != "ok" or not operation.startswith(("get", "list"))
            else logging.DEBUG,
            "maas %s %s",
            operation,
            outcome,
            extra={
                "site": self.site,
                "maas_operation": operation,
                "maas_system_id": system_id or None,
                "outcome": outcome,
                "http_status": status,
                "attempt": attempt,
                "duration_ms": round(seconds * 1000, 1),
            },
        )

    # -- site level -----------------------------------------------------------------------------
    def version(self) -> types.Version:
        return types.Version.from_json(self._send("get_version", "GET", "version/"))

    def whoami(self) -> types.User:
        return types.User.from_json(self._send("get_whoami", "GET", "users/", op="whoami"))

    def subnets(self) -> list[types.Subnet]:
        return [types.Subnet.from_json(s) for s in self._send("list_subnets", "GET", "subnets/")]

    def boot_resources(self) -> list[types.BootResource]:
        data = self._send("list_boot_resources", "GET", "boot-resources/")
        return [types.BootResource.from_json(b) for b in data]

    def get_config(self, name: str) -> Any:
        return self._send("get_config", "GET", "maas/", op="get_config", query=[("name", name)])

    # -- machines -------------------------------------------------------------------------------
    def list_machines(
        self,
        *,
        hostnames: Iterable[str] = (),
        mac_addresses: Iterable[str] = (),
        system_ids: Iterable[str] = (),
        statuses: Iterable[str] = (),
    ) -> list[types.Machine]:
        query = (
            [("hostname", h) for h in hostnames]
            + [("mac_address", m) for m in mac_addresses]
            + [("id", s) for s in system_ids]
            + [("status", s) for s in statuses]
        )
        data = self._send("list_machines", "GET", "machines/", query=query)
        with gc_paused(len(data) > 1000):
            return [types.Machine.from_json(m) for m in data]

    def machine_summaries(self) -> list[types.MachineSummary]:
        """Every machine, reduced to the few fields reconciliation compares: one request, parsed
        one machine at a time while the body arrives (``listing.py``: memory holds one chunk and
        one machine, not the whole listing), no typed interfaces. The GC is paused meanwhile: a
        machine's JSON is hundreds of containers, and collecting them as they come costs ~25%."""
        with gc_paused(True):
            data = self._send("list_machines", "GET", "machines/", stream=listing.machine_summaries)
        return data or []

    def get_machine(self, system_id: str) -> types.Machine:
        data = self._send("get_machine", "GET", f"machines/{system_id}/", system_id=system_id)
        return types.Machine.from_json(data)

    def power_addresses(self, system_ids: Iterable[str] = ()) -> dict[str, str]:
        """system_id → BMC address. Other power parameters (passwords) are dropped here."""
        data = self._send(
            "list_power_parameters",
            "GET",
            "machines/",
            op="power_parameters",
            query=[("id", s) for s in system_ids],
        )
        return {sid: str(p.get("power_address", "")) for sid, p in (data or {}).items()}

    def create_machine(
        self,
        *,
        hostname: str,
        mac_addresses: Sequence[str],
        power_parameters: dict[str, str],
        architecture: str = "amd64/generic",
        power_type: str = "ipmi",
        commission: bool = False,
    ) -> types.Machine:
        form = [("hostname", hostname), ("architecture", architecture), ("power_type", power_type)]
        form += [("mac_addresses", m) for m in mac_addresses]
        form += [("power_parameters", json.dumps(power_parameters, sort_keys=True))]
        form += [("commission", _b(commission))]
        data = self._send("create_machine", "POST", "machines/", form=form)
        return types.Machine.from_json(data)

    def update_machine(
        self,
        system_id: str,
        *,
        hostname: str | None = None,
        power_type: str | None = None,
        power_parameters: dict[str, str] | None = None,
    ) -> types.Machine:
        """PUT the machine: hostname and/or power settings (flat ``power_parameters_*`` fields)."""
        form: list[tuple[str, str]] = []
        if hostname:
            form.append(("hostname", hostname))
        if power_type:
            form.append(("power_type", power_type))
        for key, value in sorted((power_parameters or {}).items()):
            form.append((f"power_parameters_{key}", value))
        data = self._send(
            "update_machine", "PUT", f"machines/{system_id}/", form=form, system_id=system_id
        )
        return types.Machine.from_json(data)

    def delete_machine(self, system_id: str) -> None:
        self._send("delete_machine", "DELETE", f"machines/{system_id}/", system_id=system_id)

    def _machine_op(
        self, op: str, system_id: str, form: Sequence[tuple[str, str]] = ()
    ) -> types.Machine:
        data = self._send(
            op, "POST", f"machines/{system_id}/", op=op, form=form, system_id=system_id
        )
        return types.Machine.from_json(data)

    def commission(
        self,
        system_id: str,
        *,
        enable_ssh: bool = False,
        skip_bmc_config: bool = False,
        skip_networking: bool = False,
        skip_storage: bool = False,
        commissioning_scripts: Sequence[str] = (),
        testing_scripts: Sequence[str] = (),
    ) -> types.Machine:
        # CommissionForm's BooleanFields read every value but "false" and "" as true, so "0"
        # would switch each flag on (docs/maas-api.md, "How MAAS reads each field").
        form = [
            ("enable_ssh", _b(enable_ssh)),
            ("skip_bmc_config", _b(skip_bmc_config)),
            ("skip_networking", _b(skip_networking)),
            ("skip_storage", _b(skip_storage)),
        ]
        if commissioning_scripts:
            form.append(("commissioning_scripts", ",".join(commissioning_scripts)))
        if testing_scripts:
            form.append(("testing_scripts", ",".join(testing_scripts)))
        return self._machine_op("commission", system_id, form)

    def test(
        self,
        system_id: str,
        *,
        testing_scripts: Sequence[str],
        parameters: Mapping[str, str] | None = None,
    ) -> types.Machine:
        """Run testing scripts in the machine's ephemeral environment (``op=test``); script
        parameters are sent as ``<script>_<parameter>`` (or a bare name for every script)."""
        form = [("testing_scripts", ",".join(testing_scripts))]
        form += sorted((parameters or {}).items())
        return self._machine_op("test", system_id, form)

    def deploy(
        self,
        system_id: str,
        *,
        distro_series: str,
        user_data: bytes | None = None,
        hwe_kernel: str | None = None,
        enable_hw_sync: bool = False,
        comment: str | None = None,
    ) -> types.Machine:
        form = [("distro_series", distro_series)]
        if user_data is not None:
            form.append(("user_data", base64.b64encode(user_data).decode()))
        if hwe_kernel:
            form.append(("hwe_kernel", hwe_kernel))
        if enable_hw_sync:
            form.append(("enable_hw_sync", "true"))
        if comment:
            form.append(("comment", comment))
        return self._machine_op("deploy", system_id, form)

    def release(
        self,
        system_id: str,
        *,
        erase: bool = False,
        secure_erase: bool = False,
        quick_erase: bool = False,
        force: bool = False,
        scripts: Sequence[str] | None = None,
        comment: str | None = None,
    ) -> types.Machine:
        """``op=release``; ``scripts`` are release scripts by name or tag (MAAS's
        ``ReleaseForm``: a comma-separated list, ``wipe-disks`` added by an erase flag)."""
        form = [
            ("erase", _b(erase)),
            ("secure_erase", _b(secure_erase)),
            ("quick_erase", _b(quick_erase)),
        ]
        if scripts:
            form.append(("scripts", ",".join(scripts)))
        if force:
            form.append(("force", "true"))
        if comment:
            form.append(("comment", comment))
        return self._machine_op("release", system_id, form)

    def allocate(self, system_id: str, *, comment: str | None = None) -> types.Machine:
        """Acquire one Ready machine by system id (``machines op=allocate``)."""
        form = [("system_id", system_id)] + ([("comment", comment)] if comment else [])
        data = self._send(
            "allocate", "POST", "machines/", op="allocate", form=form, system_id=system_id
        )
        return types.Machine.from_json(data)

    def abort(self, system_id: str, *, comment: str | None = None) -> types.Machine:
        return self._machine_op("abort", system_id, [("comment", comment)] if comment else [])

    def mark_broken(self, system_id: str, *, comment: str | None = None) -> types.Machine:
        return self._machine_op("mark_broken", system_id, [("comment", comment)] if comment else [])

    def mark_fixed(self, system_id: str, *, comment: str | None = None) -> types.Machine:
        return self._machine_op("mark_fixed", system_id, [("comment", comment)] if comment else [])

    def power_on(self, system_id: str, *, comment: str | None = None) -> types.Machine:
        return self._machine_op("power_on", system_id, [("comment", comment)] if comment else [])

    def power_off(self, system_id: str, *, stop_mode: str = "hard") -> types.Machine | None:
        data = self._send(
            "power_off",
            "POST",
            f"machines/{system_id}/",
            op="power_off",
            form=[("stop_mode", stop_mode)],
            system_id=system_id,
        )
        return types.Machine.from_json(data) if data else None

    def query_power_state(self, system_id: str) -> str:
        data = self._send(
            "get_power_state",
            "GET",
            f"machines/{system_id}/",
            op="query_power_state",
            system_id=system_id,
        )
        return str(data["state"])

    def set_storage_layout(self, system_id: str, layout: str, **options: str) -> types.Machine:
        form = [("storage_layout", layout), *sorted(options.items())]
        return self._machine_op("set_storage_layout", system_id, form)

    # -- interfaces -----------------------------------------------------------------------------
    def interfaces(self, system_id: str) -> list[types.Interface]:
        data = self._send(
            "list_interfaces", "GET", f"nodes/{system_id}/interfaces/", system_id=system_id
        )
        return [types.Interface.from_json(i) for i in data]

    def link_subnet(
        self,
        system_id: str,
        interface_id: int,
        *,
        mode: str,
        subnet: int | str,
        ip_address: str | None = None,
        default_gateway: bool = False,
        force: bool = False,
    ) -> types.Interface:
        form = [("mode", mode.lower()), ("subnet", str(subnet))]
        if ip_address:
            form.append(("ip_address", ip_address))
        if default_gateway:
            form.append(("default_gateway", "true"))
        if force:
            form.append(("force", "true"))
        data = self._send(
            "link_subnet",
            "POST",
            f"nodes/{system_id}/interfaces/{interface_id}/",
            op="link_subnet",
            form=form,
            system_id=system_id,
        )
        return types.Interface.from_json(data)

    def unlink_subnet(self, system_id: str, interface_id: int, link_id: int) -> types.Interface:
        data = self._send(
            "unlink_subnet",
            "POST",
            f"nodes/{system_id}/interfaces/{interface_id}/",
            op="unlink_subnet",
            form=[("id", str(link_id))],
            system_id=system_id,
        )
        return types.Interface.from_json(data)

    # -- diagnostics ----------------------------------------------------------------------------
    def events(
        self,
        *,
        system_ids: Iterable[str] = (),
        hostnames: Iterable[str] = (),
        level: str = "INFO",
        limit: int = 100,
        before: int | None = None,
        after: int | None = None,
    ) -> types.EventPage:
        query = [("level", level), ("limit", str(limit))]
        query += [("id", s) for s in system_ids] + [("hostname", h) for h in hostnames]
        if before is not None:
            query.append(("before", str(before)))
        if after is not None:
            query.append(("after", str(after)))
        sid = next(iter(system_ids), "") if isinstance(system_ids, list | tuple) else ""
        data = self._send("list_events", "GET", "events/", op="query", query=query, system_id=sid)
        events = tuple(types.Event.from_json(e) for e in data["events"])
        return types.EventPage(
            events=events,
            newest_id=events[0].id if events else None,
            oldest_id=events[-1].id if events else None,
        )

    def script_results(
        self, system_id: str, *, result_type: str | None = None, include_output: bool = False
    ) -> list[types.ScriptSet]:
        query = [("type", result_type)] if result_type else []
        if include_output:
            query.append(("include_output", "1"))
        data = self._send(
            "list_script_results",
            "GET",
            f"nodes/{system_id}/results/",
            query=query,
            system_id=system_id,
        )
        # oldest first, by id: MAAS lists them without an ORDER BY, in the database's order,
        # which changes once rows are deleted (recorded against MAAS 3.5.10: a newer run listed
        # before older ones), and callers take the last as the newest
        return sorted((types.ScriptSet.from_json(s) for s in data), key=lambda s: s.id)

    def installation_output(self, system_id: str) -> str:
        """The curtin install log of the current installation; empty if there is none: MAAS
        answers 400 ``Unknown id "current-installation"`` for a machine never deployed and for
        one released since (a release clears it; docs/maas-api.md §14.4), so an older
        deployment's log is never shown as the current one."""
        try:
            data = self._send(
                "get_installation_output",
                "GET",
                f"nodes/{system_id}/results/current-installation/",
                query=[("include_output", "1")],
                system_id=system_id,
            )
        except MaasBadRequest as exc:
            if "current-installation" in exc.message:
                return ""
            raise
        results = types.ScriptSet.from_json(data).results
        return "\n".join(r.output for r in results)
