"""The Content-Security-Policy in Chromium: the main pages, an htmx action and the
Swagger UI at /api/docs/ all work under it, and the browser reports no violation."""

import os

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from cases import services  # noqa: E402
from cases.models import ProposalStatus  # noqa: E402
from tests.factories import make_case  # noqa: E402
from tests.web import test_browser as browser_tests  # noqa: E402

pytestmark = browser_tests.pytestmark

# Every violation the page sees, from the DOM event (scripts, styles, images, connections).
RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(`${e.effectiveDirective} blocked ${e.blockedURI || "inline"} at ${e.sourceFile}:${e.lineNumber}`);
});
"""


def _watch(page) -> list[str]:
    console: list[str] = []
    page.context.add_init_script(RECORD_VIOLATIONS)
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
    return console


def _violations(page, console: list[str]) -> list[str]:
    seen = page.evaluate("window.__cspViolations || []")
    return seen + [line for line in console if "Content Security Policy" in line or line.startswith("pageerror")]


def test_pages_and_an_htmx_action_work_under_the_csp_with_no_violation(new_page, analyst, supervisor, agent):
    case = make_case(actor=analyst, title="Card charged twice for one purchase")
    proposal = services.proposal_create(actor=agent, case=case, kind="risk_level", payload={"risk_level": "high"},
                                        rationale="Money at stake.")
    page = new_page()
    console = _watch(page)
    browser_tests.log_in(page, "supervisor")

    for path, heading in [("/", "Case queue"), ("/review/", None), ("/audit/", None), ("/runs/", None),
                          ("/threads/", None), ("/memory/", None), (f"/cases/{case.reference}/", None)]:
        response = page.goto(path)
        assert response.status == 200, path
        policy = response.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy, path
        if heading:
            assert page.get_by_role("heading", name=heading).is_visible()
        assert _violations(page, console) == [], path

    # An htmx action on the case page: approve the proposal; the card is swapped in place.
    browser_tests.mark_document(page)
    page.locator(f"#proposal-{proposal.pk}").get_by_role("button", name="Approve and apply").click()
    page.locator(f"#proposal-{proposal.pk} .badge", has_text="Applied").wait_for()
    page.locator("#case-runs, #agents [hx-trigger]").first.wait_for(state="attached")
    assert browser_tests.still_same_document(page)
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.APPLIED
    assert _violations(page, console) == []


def test_the_swagger_ui_renders_under_the_csp_with_no_violation(new_page, analyst):
    page = new_page()
    console = _watch(page)
    browser_tests.log_in(page, "analyst")
    response = page.goto("/api/docs/")
    assert "'nonce-" in response.headers["content-security-policy"]
    page.locator(".swagger-ui .info .title", has_text="Arbiter API").wait_for()
    page.locator(".opblock-tag", has_text="cases").first.wait_for()
    assert _violations(page, console) == []


def test_the_django_admin_works_under_the_csp_with_no_violation(new_page, tenant):
    from accounts.models import Role
    from tests.factories import UserFactory

    UserFactory(username="root", tenant=tenant, role=Role.ADMIN, is_staff=True, is_superuser=True)
    page = new_page()
    console = _watch(page)
    page.goto("/admin/login/")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill("pw-for-tests")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/admin/")
    for path in ("/admin/", "/admin/cases/case/", "/admin/accounts/user/add/"):
        assert page.goto(path).status == 200, path
        assert _violations(page, console) == [], path
