"""Shared fixtures: API clients for each kind of caller, and a clean secrets backend cache."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from maas_domain.secrets import get_backend
from tests.support import fastflush, live
from tests.support.flows import flow, flow_site, node_side, sweeper, worker  # noqa: F401 (fixtures)
from tests.support.maas import maas, sim, sleeps  # noqa: F401 (fixtures)
from tests.support.openbao import openbao, unsealed  # noqa: F401 (fixtures)
from tests.support.recorder import recorder  # noqa: F401 (fixture)
from tests.support.redisserver import private_redis  # noqa: F401 (fixture)
from tests.support.stages import bench  # noqa: F401 (fixture)
from tests.support.tokens import bearer_token
from tests.support.workers import embedded_broker, workers  # noqa: F401 (fixtures)

live.install()  # the live test server sets TCP_NODELAY (tests/support/live.py)
fastflush.install()  # DELETE, not TRUNCATE, between transactional tests (its docstring)
# Password hashing at production strength costs ~1s per user; tests do not need it.
settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Rate-limit counters in this process's memory (the live server runs in it too), cleared for each
# test; tests/test_throttling.py also runs them against Redis.
settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> None:
    from django.core.cache import cache

    from onboarding import fetchcheck
    from onboarding.stages.storage_pxe import forget_subnets

    cache.clear()
    fetchcheck.forget()  # a URL fetchable in one test may be made to fail in the next
    forget_subnets()  # the same for a site's subnets (keyed by site and URL, but still)


def _client_for(user: Any | None) -> APIClient:
    client = APIClient()
    if user is not None:
        raw = bearer_token(user, scope="admin")
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


@pytest.fixture
def admin_user(db: None) -> Any:
    return get_user_model().objects.create_user(
        "ops-admin", password="not-used-here", is_staff=True, is_superuser=True
    )


@pytest.fixture
def api(admin_user: Any) -> APIClient:
    """A staff API client authenticated with a bearer token."""
    return _client_for(admin_user)


@pytest.fixture
def user_api(db: None) -> APIClient:
    """An authenticated client whose user is not staff."""
    user = get_user_model().objects.create_user("plain-user", password="not-used-here")
    return _client_for(user)


@pytest.fixture
def anon_api() -> APIClient:
    return APIClient()


@pytest.fixture(autouse=True)
def _fresh_secrets_backend() -> Iterator[None]:
    get_backend.cache_clear()
    yield
    get_backend.cache_clear()


@pytest.fixture(autouse=True, scope="session")
def _own_metric_files() -> Iterator[None]:
    """Metric files are per process (prometheus_client multiprocess mode): remove this test
    process's at the end so that runs do not pile them up (parallel runs keep theirs)."""
    yield
    import os

    from maas_domain.observability.exposition import metrics_dir

    for path in metrics_dir().glob(f"*_{os.getpid()}.db"):
        path.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> None:
    """The test database as pytest-django makes it, with what its migrations seeded kept for
    every flush to restore (tests/support/fastflush.py)."""
    with django_db_blocker.unblock():
        fastflush.snapshot()


# The tests that take tens of seconds each (whole stacks started as processes, fuzzing, kill -9
# drills; `pytest --durations=40` lists them). They run first, an equal part at the head of each
# xdist worker's share (worksteal hands each worker a contiguous share of this order), so a
# parallel run does not end with one worker alone on a long test. (Safe for database tests that
# run after them: every flush restores what the migrations seeded.)
HEAVY = (
    "tests/api/test_fuzz.py",
    "tests/api/test_fuzz_checks.py::test_scripts_fuzz_prints_its_seed_on_a_passing_run_too",
    "tests/test_readme.py",
    "tests/test_embedded_smoke.py",
    "tests/onboarding/test_durability.py",
    "tests/test_engine_budget.py",
    "tests/test_benchmarks_run.py",
    "tests/maas/test_simulator.py::test_ten_thousand",
    "tests/test_regions_workers.py",
    "tests/admin/test_browser.py",
    "tests/onboarding/test_hardware_fleet.py",
    "tests/onboarding/test_sealed_vault.py",
    "tests/decommission/test_recovery.py::test_kill_9",
    "tests/test_slow_clients.py",
    "tests/test_compose.py",
)


@pytest.hookimpl(trylast=True)  # after pytest-django has put database tests in its order
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    heavy = [item for item in items if item.nodeid.startswith(HEAVY)]
    if not heavy or len(heavy) == len(items):
        return
    light = [item for item in items if not item.nodeid.startswith(HEAVY)]
    count = max(int(getattr(config, "workerinput", {}).get("workercount", 1)), 1)
    share = len(items) // count
    ordered: list[pytest.Item] = []
    taken = 0
    for n in range(count):
        ordered += heavy[n::count]
        if n < count - 1:  # light tests up to where the next worker's share starts
            fill = max((n + 1) * share - len(ordered), 0)
            ordered += light[taken : taken + fill]
            taken += fill
    items[:] = ordered + light[taken:]
