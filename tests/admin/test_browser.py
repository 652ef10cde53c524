"""The operators' pages in a real browser (headless Debian Chromium through Playwright) against
Django's live server, a real Celery worker on Redis, PostgreSQL and the MAAS simulator.

One journey, as an operator lives it: log in, create a site, store its credentials, probe it,
add a profile, start an onboarding and watch it complete, start one that fails (injected curtin
fault), retry it from its page and watch it complete, look at a batch and the audit log.

Every main page is screenshotted at 1440 px wide and must not scroll sideways (its layout
width is measured, not eyeballed). ``MAASCP_SCREENSHOTS=1`` keeps the PNGs in
docs/screenshots/ (otherwise they go to the test's temporary folder).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from devtools.demo import demo_ca_pem
from maas_domain.models import AuditLog, Sku
from maas_simulator.node import NodeSide
from onboarding.models import Onboarding
from tests.support.maas import API_KEY, Sim, make_sim

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CHROMIUM = os.environ.get("MAASCP_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
WIDTH = 1440  # an operator's laptop; no page may scroll sideways at this width
PASSWORD = "operator-pass-1"


def _skip_reason() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (uv sync installs the dev group)"
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        return f"{CHROMIUM} missing and scripts/ensure-browser could not install chromium"
    return None


@pytest.fixture
def browser_page(live_server: Any) -> Iterator[Any]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; Django's ORM (the live server
    # and our assertions) is synchronous. Allowed here only, for this test module.
    old = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = browser.new_context(viewport={"width": WIDTH, "height": 1000})
            page = context.new_page()
            page.set_default_timeout(30_000)
            # what the Content-Security-Policy blocked (docs/security.md, T20): nothing may be,
            # but Redoc's footer logo, which it fetches from its vendor's CDN (kept out: every
            # asset of ours is local)
            blocked: list[str] = []

            def violation(message: Any) -> None:
                text = message.text
                if "Security Policy" in text and "https://cdn.redoc.ly/" not in text:
                    blocked.append(text)

            page.on("console", violation)
            yield page
            context.close()
            browser.close()
            assert not blocked, f"the Content-Security-Policy blocked: {blocked}"
    finally:
        if old is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = old


@pytest.fixture
def world(worker: None, live_server: Any, settings: Any) -> Iterator[Sim]:
    settings.NODE_API_URL = live_server.url
    sim = make_sim({"users": []})
    sim.model.node_side = NodeSide()
    get_user_model().objects.create_user(
        "operator", password=PASSWORD, is_staff=True, is_superuser=True
    )
    Sku.objects.create(code="gpu-8x", name="8x H100", gpu_model="H100", gpu_count=8)
    yield sim
    sim.server.stop()


# Every table cell of the page, measured: its text must fit its box (nothing overflows the
# cell) and the cell must be inside what the window and every clipping ancestor show (a column
# pushed under a scrolling container's edge, or under the filter panel, is hidden though the
# page itself is no wider than the window: Django's change list scrolls its table sideways).
CLIPPED_CELLS = """() => {
  const found = [];
  for (const cell of document.querySelectorAll('table td, table th')) {
    const box = cell.getBoundingClientRect();
    if (!cell.offsetParent || box.width === 0 || box.height === 0) continue;
    let right = window.innerWidth, sr_only = false;
    for (let up = cell.parentElement; up; up = up.parentElement) {
      const around = up.getBoundingClientRect();
      if (around.width <= 1 || around.height <= 1) sr_only = true;  // for screen readers
      if (getComputedStyle(up).overflowX !== 'visible') right = Math.min(right, around.right);
    }
    if (sr_only) continue;
    const text = (cell.innerText || '').trim().replace(/\\s+/g, ' ').slice(0, 60);
    const column = cell.className || cell.cellIndex;
    if (cell.scrollWidth > cell.clientWidth + 1)
      found.push(`${column}: text ${cell.scrollWidth}px in a ${cell.clientWidth}px cell: `
                 + `"${text}"`);
    else if (box.right > right + 1)
      found.push(`${column}: ends at ${Math.round(box.right)}px, shown up to `
                 + `${Math.round(right)}px: "${text}"`);
  }
  return found;
}"""


def shot(page: Any, name: str, folder: Path | None = None) -> None:
    """A full-page screenshot, and the page must be readable at 1440 px: nothing wider than
    the viewport (a table or a long value that does not wrap would push it out), and no table
    cell clipped or hidden (``CLIPPED_CELLS``)."""
    folder = SHOTS if os.environ.get("MAASCP_SCREENSHOTS") else (folder or _tmp[-1])
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
    window = int(page.viewport_size["width"])  # 1440, or a laptop's where a test says so
    width = page.evaluate("document.documentElement.scrollWidth")
    widest = page.evaluate(
        """() => { let w = null; for (const el of document.querySelectorAll('body *')) {
             const r = el.getBoundingClientRect();
             if (r.right > window.innerWidth + 1 && getComputedStyle(el).position !== 'fixed')
               { w = el.tagName + '#' + el.id + '.' + el.className; break; } } return w; }"""
    )
    assert width <= window, f"{name}: the page is {width}px wide at {window}px ({widest} overflows)"
    clipped = page.evaluate(CLIPPED_CELLS)
    assert not clipped, f"{name}: cells clipped or hidden at {window}px:\n" + "\n".join(clipped)


_tmp: list[Path] = []  # the running test's folder (set below)


@pytest.fixture(autouse=True)
def _shots_folder(tmp_path: Path) -> None:
    _tmp.append(tmp_path / "screenshots")


def fleet_counts(page: Any, live_server: Any) -> int:
    """Every count on the fleet page equals the API's answer to the same question (its own
    filters, through a token), and links to a list of that many rows; how many were checked."""
    from rest_framework.test import APIClient

    from tests.admin.test_fleet import api_count
    from tests.support.tokens import bearer_token

    api = APIClient()
    token = bearer_token(get_user_model().objects.get(username="operator"), scope="read")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    cells = page.locator("#fleet [data-count][data-n]").evaluate_all(
        """els => els.map(e => ({site: e.closest('[data-site]').dataset.site,
              key: e.dataset.count, n: Number(e.dataset.n),
              href: e.querySelector('a').getAttribute('href')}))"""
    )
    for cell in cells:
        site = None if cell["site"] == "all" else int(cell["site"])
        assert cell["n"] == api_count(api, cell["key"], site), cell
    assert any(c["n"] for c in cells) and len(cells) > 10
    return len(cells)


def wait_for_state(page: Any, url: str, states: tuple[str, ...], timeout: float = 90) -> str:
    """Reload the workflow page (as an operator would) until its badge shows one of ``states``."""
    deadline = time.monotonic() + timeout
    while True:
        page.goto(url)
        state = page.locator("#wf-state .wf-badge").get_attribute("class") or ""
        for s in states:
            if f"wf-badge-{s}" in state:
                return s
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} still {state} after {timeout}s")
        time.sleep(1)


def start_onboarding(page: Any, base: str, hostname: str, ipmi: str) -> str:
    page.goto(f"{base}/admin/onboarding/onboarding/add/")
    page.select_option("#id_site", label="dc1")
    page.select_option("#id_profile", index=1)
    page.select_option("#id_sku", index=1)
    page.fill("#id_hostname", hostname)
    page.fill("#id_ipmi_ip", ipmi)
    page.click("#start-submit")
    page.wait_for_url("**/onboarding/onboarding/*/change/")
    assert "started for" in page.inner_text(".messagelist")
    return str(page.url)


def test_the_api_viewers_render_under_the_policy(browser_page: Any, live_server: Any) -> None:
    """Swagger UI and Redoc run their scripts (files of this origin: the split Swagger view) and
    Redoc its worker under the policy; the fixture fails on anything it blocked."""
    page, base = browser_page, live_server.url
    get_user_model().objects.create_user("reader", password=PASSWORD, is_superuser=True,
                                         is_staff=True)  # fmt: skip
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", "reader")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    page.goto(f"{base}/api/v1/docs/")
    page.wait_for_selector(".swagger-ui .info .title")
    assert "MAAS" in page.inner_text(".swagger-ui .info .title")
    page.goto(f"{base}/api/v1/redoc/")
    page.wait_for_selector("redoc h1")
    assert "MAAS" in page.inner_text("redoc h1")


def test_operator_journey(browser_page: Any, world: Sim, live_server: Any) -> None:
    page, sim, base = browser_page, world, live_server.url

    # log in
    page.goto(f"{base}/admin/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")

    # create a site
    page.goto(f"{base}/admin/maas_domain/maassite/add/")
    page.fill("#id_name", "dc1")
    page.fill("#id_maas_url", sim.url)
    page.fill("#id_pxe_subnet", "10.20.0.0/16")
    page.fill("#id_policy", '{"max_concurrent_workflows": 10, "deploy_retry_limit": 1}')
    page.fill("#id_ca_bundle_pem", demo_ca_pem())
    page.click("input[name=_continue]")
    page.wait_for_selector("#probe-now")
    assert "Never probed" in page.inner_text("#probe-checks")

    # write-only credentials: the page shows which fields are set, never a value
    page.click("#set-credentials")
    page.fill("#id_maas_api_key", API_KEY)
    page.fill("#id_ipmi_username", "maas")
    page.fill("#id_ipmi_password", "ipmi-pass-value")
    page.click("#store-credentials")
    page.wait_for_selector("#probe-now")
    html = page.content()
    assert API_KEY not in html and "ipmi-pass-value" not in html
    assert "username, password" in page.inner_text("#credential-metadata")

    # a profile, then probe (the probe checks boot resources per active profile)
    page.goto(f"{base}/admin/maas_domain/siteprofile/add/")
    page.select_option("#id_site", label="dc1")
    page.fill("#id_name", "h100")
    page.click("input[name=_save]")
    page.wait_for_selector(".messagelist")
    page.goto(f"{base}/admin/maas_domain/maassite/")
    page.click("text=dc1")
    page.click("#probe-now")
    page.wait_for_selector(".messagelist")
    assert "all 8 checks passed" in page.inner_text(".messagelist")
    assert "healthy" in page.inner_text("#content-main h2")
    shot(page, "site")
    page.goto(f"{base}/admin/maas_domain/maassite/")
    shot(page, "sites")

    # an onboarding against the simulator, watched to completion
    sim.add(hostname="unnamed-node", status="new", power_address="10.10.7.31")
    url = start_onboarding(page, base, "c07u31", "10.10.7.31")
    assert wait_for_state(page, url, ("succeeded", "failed")) == "succeeded"
    timeline = page.inner_text("#wf-timeline")
    assert "stage.completed" in timeline and "workflow.succeeded" in timeline
    page.wait_for_selector("#wf-diagnostics[data-loaded='1']")
    assert "Deployed" in page.inner_text("#diag-machine")
    assert "Installation finished" in page.inner_text("#diag-install")
    assert page.locator("#wf-versions").inner_text().count("\n") >= 1
    shot(page, "onboarding-succeeded")

    # one fails with an injected fault; its page says why and offers only allowed verbs
    sim.add(
        hostname="c07u40",
        status="ready",
        power_address="10.10.7.40",
        faults={"deploy_curtin_failure": [1]},
    )
    url = start_onboarding(page, base, "c07u40", "10.10.7.40")
    assert wait_for_state(page, url, ("succeeded", "failed")) == "failed"
    assert "curtin" in page.inner_text("#wf-why")
    verbs_offered = page.locator("#wf-verbs [data-verb]").evaluate_all(
        "els => els.map(e => e.dataset.verb)"
    )
    assert "retry" in verbs_offered and "cancel" not in verbs_offered
    page.wait_for_selector("#wf-diagnostics[data-loaded='1']")
    shot(page, "onboarding-failed")

    # the destructive path shows the plan first (and we back out)
    page.click("[data-verb='restart-clean']")
    page.wait_for_selector("#confirm-submit")
    assert "nothing has changed yet" in page.inner_text("#content-main")
    shot(page, "confirm-restart-clean")
    page.click("text=No, take me back")

    # retry from its page, with a reason, and watch it complete
    page.fill("#id_reason", "curtin mirror fixed")
    page.click("[data-verb='retry']")
    page.wait_for_selector(".messagelist")
    assert "applied by operator" in page.inner_text(".messagelist")
    assert wait_for_state(page, url, ("succeeded", "failed")) == "succeeded"
    retried = page.locator("#wf-timeline tr[data-kind='operator.retry']").inner_text()
    assert "curtin mirror fixed" in retried and "operator" in retried
    shot(page, "onboarding-retried")
    wf = Onboarding.objects.get(hostname="c07u40")
    assert (wf.state, wf.attempt) == ("succeeded", 2)

    # a batch with one failure: the batch page lists it with its reason
    from onboarding.batches import onboarding_start_batch

    site_id = wf.site_id
    sim.add(hostname="b01", status="ready", power_address="10.10.8.1")
    sim.add(
        hostname="b02",
        status="ready",
        power_address="10.10.8.2",
        faults={"deploy_curtin_failure": [1]},
    )
    sim.add(hostname="b03", status="ready", power_address="10.10.8.3")
    batch = onboarding_start_batch(
        actor=get_user_model().objects.get(username="operator"),
        site_id=site_id,
        profile_id=wf.profile_id,
        sku_id=wf.sku_id,
        rows=[{"hostname": f"b0{i}", "ipmi_ip": f"10.10.8.{i}"} for i in (1, 2, 3)],
    )
    deadline = time.monotonic() + 90
    while Onboarding.objects.filter(batch=batch, state__in=("succeeded", "failed")).count() < 3:
        assert time.monotonic() < deadline, "batch did not settle"
        time.sleep(0.5)
    page.goto(f"{base}/admin/onboarding/onboardingbatch/{batch.pk}/change/")
    assert "b02" in page.inner_text("#batch-failed")
    assert "2" in page.inner_text("#batch-counts tr[data-state='succeeded']")
    # every onboarding of it ended: the page says so and offers no cancel
    assert page.inner_text("#batch-state").startswith("Finished")
    assert page.locator("#batch-actions").count() == 0
    shot(page, "batch")

    page.goto(f"{base}/admin/onboarding/onboarding/")
    assert page.locator("#result_list tbody tr").count() == 5
    failed_reason = Onboarding.objects.get(hostname="b02").reason
    assert failed_reason in page.inner_text("#result_list")  # the whole reason, wrapped
    shot(page, "onboardings")
    page.goto(f"{base}/admin/onboarding/onboarding/?attention=operator")
    assert "b02" in page.inner_text("#result_list")

    # a storage cleanup of the first node: the start page confirms what will happen first
    node = Onboarding.objects.get(hostname="c07u31").node
    page.goto(f"{base}/admin/decommission/decommission/add/")
    page.select_option("#id_node", value=str(node.pk))
    page.select_option("#id_mode", value="storage_cleanup")
    page.fill("#id_reason", "tenant left")
    page.click("#start-submit")
    page.wait_for_selector("#confirm-submit")
    assert "nothing has changed yet" in page.inner_text("#content-main")
    shot(page, "decommission-confirm")
    page.click("#confirm-submit")
    page.wait_for_url("**/decommission/decommission/*/change/")
    assert wait_for_state(page, page.url, ("succeeded", "failed", "manual_intervention")) == (
        "succeeded"
    )
    assert "release" in page.inner_text("#wf-timeline")
    shot(page, "decommission-succeeded")

    # the node's page: state, SKU, its workflows, one timeline oldest first, MAAS diagnostics
    # whose event times are what MAAS stamped, in real time (never minutes ahead)
    page.goto(f"{base}/admin/maas_domain/node/{node.pk}/change/")
    assert "gpu-8x" in page.inner_text("#node-sku")
    workflows = page.inner_text("#node-workflows")
    assert "onboarding" in workflows and "decommission" in workflows
    ats = page.locator("#node-timeline tbody tr td:first-child").all_inner_texts()
    assert ats == sorted(ats) and len(ats) > 10
    page.wait_for_selector("#wf-diagnostics[data-loaded='1']")
    stamps = page.locator("#diag-events tbody tr td:first-child").all_inner_texts()
    assert stamps, page.inner_text("#wf-diagnostics")
    now = datetime.now(UTC)
    assert all(datetime.fromisoformat(s) <= now for s in stamps), (stamps, now)
    shot(page, "node")

    # drift: a machine nobody onboarded shows up in MAAS; a reconcile reports it, we acknowledge
    from reconciliation.models import DriftRecord
    from reconciliation.services import reconcile_request

    sim.add(hostname="stray-01", status="ready", power_address="10.10.9.9")
    reconcile_request(site=wf.site, trigger="api")
    deadline = time.monotonic() + 60
    while not DriftRecord.objects.filter(kind="unknown_machine", hostname="stray-01").exists():
        assert time.monotonic() < deadline, "no drift reported"
        time.sleep(0.5)
    # the fleet page (the admin's home) counts it, open and not yet acknowledged, and every
    # number on it is the API's for the same question
    page.goto(f"{base}/admin/")
    fleet_counts(page, live_server)
    shot(page, "fleet")
    page.goto(f"{base}/admin/reconciliation/driftrecord/?kind=unknown_machine")  # open: default
    page.locator("#result_list tbody tr").filter(has_text="stray-01").locator(
        "input.action-select"
    ).check()
    page.select_option("select[name=action]", value="acknowledge")
    page.click("button[name=index]")
    page.wait_for_selector("#reason-form")  # a reason and an expiry first
    shot(page, "drift-acknowledge")
    page.fill("#id_reason", "stray from the rack-7 swap")
    page.fill("#id_expires_in_hours", "48")
    page.click("#reason-submit")
    page.wait_for_selector(".messagelist")
    assert "acknowledge: 1 drift record(s) by operator" in page.inner_text(".messagelist").lower()
    assert "stray-01" not in page.inner_text("#changelist")  # no longer open
    page.goto(f"{base}/admin/reconciliation/driftrecord/?state=all")
    assert "stray-01" in page.inner_text("#result_list")
    shot(page, "drift")
    acked = DriftRecord.objects.get(hostname="stray-01")
    assert acked.state == "acknowledged" and acked.resolution_reason.startswith("stray from")
    assert acked.acknowledged_until is not None

    # everything the operator did is in the audit log under their name
    page.goto(f"{base}/admin/maas_domain/auditlog/?actor_name=operator")
    shot(page, "audit")
    actions = set(AuditLog.objects.filter(actor_name="operator").values_list("action", flat=True))
    assert {
        "maas_site.create",
        "maas_site.credentials.write",
        "maas_profile.create",
        "maas_site.probe",
        "onboarding.start",
        "onboarding.retry",
        "decommission.start.storage_cleanup",
        "drift.acknowledge",
    } <= actions
