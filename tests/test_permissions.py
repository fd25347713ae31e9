"""Who may open what: every URL pattern of the site x every kind of visitor.

The table ``EXPECTED`` names each URL pattern once. A pattern missing from it
fails the test, so a new URL cannot ship without deciding who may open it.
The admin site is one group with one rule: staff only (everyone else is sent
to the admin sign-in).

Visitors: anonymous; a participant (a session that went through the survey's
entry and consent); another researcher (owns a different study); the owner;
the three invited roles of the study's team (analyst, viewer, rater
coordinator); staff. Researchers outside a study's team get 404, never 403, so
a study's existence is not revealed; a team member whose role lacks the right
gets 403.

Which role may do what is written out here (``ALLOWED``, from issue 27), not
read from surveys.permissions, so a wrong entry there fails this test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest
from django.contrib import admin
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from surveys.models import StudyMembership
from tests.support.researcher import make_user

ROLES = ("anonymous", "participant", "other", "owner", "analyst", "viewer", "rater_coordinator", "staff")
TEAM = ("analyst", "viewer", "rater_coordinator")
RESEARCHERS = ("other", "owner", *TEAM, "staff")

# What each capability of a study page or endpoint is open to, besides staff (issue 27, item 1).
VIEW, EXPORT, RUN, IDENTIFIERS, PAY, MANAGE, RATERS = "view", "export", "run", "identifiers", "pay", "manage", "raters"
ALLOWED = {
    VIEW: {"owner", "analyst", "viewer"},  # dashboard and results
    EXPORT: {"owner", "analyst"},  # exports, the zip, the API
    RUN: {"owner", "analyst"},  # analysis and metrics runs
    IDENTIFIERS: {"owner"},
    PAY: {"owner"},  # Prolific: create, publish, approve, reject, bonuses
    MANAGE: {"owner"},  # launch, preview, import, team, audit trail
    RATERS: {"owner", "rater_coordinator"},
}
LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"


@dataclass(frozen=True)
class Expect:
    """Expected status per role; a (status, location-prefix) pair pins a redirect's target."""

    path: str  # with {slug}, {run} placeholders
    statuses: dict[str, int | tuple[int, str]]
    method: str = "GET"
    data: dict = field(default_factory=dict)
    # POST the data as JSON (endpoints that accept nothing else answer a form with 415).
    json: bool = False
    # Requests that change the visitor's survey session use a copy of the visitor.
    throwaway: bool = False


def team_statuses(capability: str, allowed_status, *, outside=404) -> dict:
    """Per researcher: ``allowed_status`` for a role with the capability (and staff), 403 for a team
    member without it, ``outside`` for a researcher outside the team."""
    statuses = {role: allowed_status if role in ALLOWED[capability] else 403 for role in ("owner", *TEAM)}
    return {**statuses, "other": outside, "staff": allowed_status}


def researcher_page(path: str, capability: str, *, owner=200, method: str = "GET", **overrides) -> Expect:
    """A researcher page: sign-in for visitors, 404 outside the team, 403 for a role without ``capability``."""
    return Expect(path, {"anonymous": (302, LOGIN), "participant": (302, LOGIN), **team_statuses(capability, owner),
                         **overrides}, method=method)


def api_endpoint(path: str, capability: str = EXPORT, *, owner: int = 200, other: int = 404, method: str = "GET",
                 json: bool = False, **overrides) -> Expect:
    """An API endpoint: 403 without credentials, 404 outside the team, 403 for a role without ``capability``."""
    return Expect(path, {"anonymous": 403, "participant": 403, **team_statuses(capability, owner, outside=other),
                         **overrides}, method=method, json=json)


def any_researcher(path: str, status=200) -> Expect:
    """A page of one's own account or of every researcher: sign-in for visitors."""
    return Expect(path, {"anonymous": (302, LOGIN), "participant": (302, LOGIN),
                         **dict.fromkeys(RESEARCHERS, status)})


def public(path: str, status: int = 200, **overrides: int | tuple[int, str]) -> Expect:
    return Expect(path, {**{role: status for role in ROLES}, **overrides})


S = "/studies/{slug}"
A = "/api/studies/{slug}"
P = "/s/{slug}"
# Without a survey session a step shows the "session expired" page (how to re-enter);
# the participant has consented, so the instructions are the step due.
NO_SESSION = 200
AT_INSTRUCTIONS = (303, "/s/{slug}/instructions/")
PARTICIPANT_PID = "c" * 24

EXPECTED: dict[str, Expect] = {
    # sign-in
    "login": public("/accounts/login/", **dict.fromkeys(RESEARCHERS, (302, "/studies/"))),
    # A signed-in researcher who is not staff is told the admin is closed to them (a redirect looped).
    "admin-login": public("/admin/login/", **{**dict.fromkeys(RESEARCHERS, 403), "staff": (302, "/studies/")}),
    # One's own account: any signed-in researcher.
    "password_change": any_researcher("/accounts/password/"),
    "two_factor": any_researcher("/accounts/two-factor/"),
    "favicon": public("/favicon.ico", (301, "/static/favicon.ico")),
    "logout": public("/accounts/logout/", 405),  # logging out is a POST
    # API docs and schema are public: they describe the endpoints, never data.
    "api-schema": public("/api/schema/"),
    "api-docs": public("/api/docs/"),
    # API
    # The list shows the studies whose API one may use (none for a viewer: an empty list).
    "api-study-list": api_endpoint("/api/studies/", other=200, viewer=200, rater_coordinator=200),
    # An empty body is refused before any study is looked at.
    "api-study-load": api_endpoint("/api/studies/load/", method="POST", owner=400, other=400, json=True,
                                   viewer=400, rater_coordinator=400),
    "api-study-detail": api_endpoint(A + "/"),
    "api-participants": api_endpoint(A + "/participants/"),
    "api-ratings": api_endpoint(A + "/ratings/"),
    "api-runs": api_endpoint(A + "/runs/"),
    "api-study-run-detail": api_endpoint(A + "/runs/{run}/"),
    # Without the study in the path, a run one may not read through the API is no run at all.
    "api-run-detail": api_endpoint("/api/runs/{run}/", viewer=404, rater_coordinator=404),
    "api-run-tables": api_endpoint(A + "/runs/{run}/tables/"),
    "api-run-table": api_endpoint(A + "/runs/{run}/tables/filter_flow/"),
    "api-exports": api_endpoint(A + "/exports/"),
    "api-export": api_endpoint(A + "/exports/participants.csv"),
    "api-free-text": api_endpoint(A + "/exports/free-text/"),
    "api-choices": api_endpoint(A + "/exports/choices/"),
    "api-pairwise": api_endpoint(A + "/exports/pairwise/"),
    "api-coverage": api_endpoint(A + "/coverage/"),
    "api-identifiers": api_endpoint(A + "/restricted/identifiers.csv", IDENTIFIERS),
    "api-import-responses": api_endpoint(A + "/imports/responses/", MANAGE, method="POST", owner=400),
    "api-import-gold": api_endpoint(A + "/imports/gold/", MANAGE, method="POST", owner=400),
    "api-metrics-runs": api_endpoint(A + "/metrics/", owner=404),
    "api-predict": api_endpoint(A + "/predict/", RUN, method="POST", owner=400, json=True),
    "api-audit": api_endpoint(A + "/audit/", MANAGE),
    "api-import-judgements": api_endpoint(A + "/imports/judgements/", MANAGE, method="POST", owner=400),
    "api-judges": api_endpoint(A + "/judges/"),
    # The fixture's run has no judge, so even the owner finds no agreement table.
    "api-judge-agreement": api_endpoint(A + "/judges/agreement/", owner=404),
    # researcher pages
    "researcher:study_list": any_researcher("/studies/"),
    # Any researcher may build a new study (they own what they create).
    "researcher:new_study": any_researcher("/new-study/"),
    "researcher:dashboard": researcher_page(S + "/", VIEW),
    "researcher:dashboard_data": researcher_page(S + "/dashboard.json", VIEW),
    "researcher:run_start": researcher_page(S + "/runs/", RUN, method="POST", owner=302),
    "researcher:run_status": researcher_page(S + "/runs/{run}.json", VIEW),
    "researcher:results": researcher_page(S + "/runs/{run}/", VIEW),
    "researcher:table_csv": researcher_page(S + "/runs/{run}/tables/filter_flow.csv", VIEW),
    "researcher:figure_csv": researcher_page(S + "/runs/{run}/figures/rating_means.csv", VIEW),
    "researcher:import": researcher_page(S + "/import/", MANAGE),
    "researcher:exports": researcher_page(S + "/exports/", EXPORT),
    "researcher:free_text": researcher_page(S + "/free-text/", EXPORT),
    "researcher:coverage_csv": researcher_page(S + "/coverage.csv", EXPORT),
    "researcher:metrics": researcher_page(S + "/metrics/", VIEW),
    "researcher:raters": researcher_page(S + "/raters/", RATERS),
    "researcher:participant_delete": researcher_page(S + "/participants/delete/", MANAGE),
    # The fixture has no rater link, so even the owner finds none to revoke.
    "researcher:rater_revoke": researcher_page(S + "/raters/1/revoke/", RATERS, method="POST", owner=404),
    "researcher:team": researcher_page(S + "/team/", MANAGE),
    "audit:page": researcher_page(S + "/audit/", MANAGE),
    "audit:csv": researcher_page(S + "/audit.csv", MANAGE),
    # Prolific: an empty form is refused before Prolific is called; the fixture has no study on Prolific
    # to review or publish.
    "prolific:panel": researcher_page(S + "/prolific/", PAY),
    "prolific:create": researcher_page(S + "/prolific/create/", PAY, method="POST", owner=400),
    "prolific:review": researcher_page(S + "/prolific/review/", PAY, owner=404),
    "prolific:bonuses": researcher_page(S + "/prolific/bonuses/", PAY, owner=404),
    "prolific:action": researcher_page(S + "/prolific/publish/", PAY, method="POST", owner=404),
    # The load balancer's probe: public, touches no database.
    "healthz": public("/healthz", 200),
    # An empty text is refused before any model is touched.
    "researcher:metrics_predict": researcher_page(S + "/metrics/predict/", RUN, method="POST", owner=400),
    # No metrics run exists in this fixture, so even the owner finds no table.
    "researcher:metrics_table_csv": researcher_page(S + "/metrics/1/tables/per_response.csv", VIEW, owner=404),
    "researcher:metrics_start": researcher_page(S + "/metrics/run/", RUN, method="POST", owner=302),
    "judges:page": researcher_page(S + "/judges/", VIEW),
    # An empty form is refused (400) before any run is created; a run spends money, so only the owner starts one.
    "judges:run_start": researcher_page(S + "/judges/run/", MANAGE, method="POST", owner=400),
    "researcher:export_everything": researcher_page(S + "/exports/everything.zip", EXPORT),
    "researcher:export_download": researcher_page(S + "/exports/participants.csv", EXPORT),
    # participant pages: reachable for participants, whoever else is signed in
    "surveys:home": public("/"),
    # Entering with the participant's panel id again is a "welcome back", not a new participant.
    "surveys:entry": Expect(P + "/?PROLIFIC_PID=" + PARTICIPANT_PID + "&STUDY_ID=s&SESSION_ID=t",
                            {role: 303 for role in ROLES}, throwaway=True),
    "surveys:preview": Expect(P + "/preview/", {"anonymous": (302, LOGIN), "participant": (302, LOGIN),
                                               **team_statuses(MANAGE, 303)}, throwaway=True),
    # Without a preview begun in this session, a preview step starts one.
    "surveys:preview_step": Expect(P + "/preview/consent/", {"anonymous": (302, LOGIN), "participant": (302, LOGIN),
                                                            **team_statuses(MANAGE, (303, P + "/preview/"))}),
    "researcher:launch": researcher_page(S + "/launch/", MANAGE),
    "surveys:consent": public(P + "/consent/", 200, participant=AT_INSTRUCTIONS),
    "surveys:instructions": public(P + "/instructions/", NO_SESSION, participant=200),
    "surveys:page": public(P + "/page/", NO_SESSION, participant=AT_INSTRUCTIONS),
    "surveys:demographics": public(P + "/about-you/", NO_SESSION, participant=AT_INSTRUCTIONS),
    # Drafts answer the page's script: 403 without a survey session, 409 when that page is not the
    # participant's current one (this participant is at the instructions).
    "surveys:page_draft": Expect(P + "/page/draft/", {**dict.fromkeys(ROLES, 403), "participant": 409}, "POST"),
    "surveys:demographics_draft": Expect(P + "/about-you/draft/", {**dict.fromkeys(ROLES, 403), "participant": 409},
                                         "POST"),
    "surveys:done": public(P + "/done/", NO_SESSION, participant=AT_INSTRUCTIONS),
    "surveys:exit": public(P + "/exit/", 200),
    "surveys:left": public(P + "/left/"),
    # Without a survey session there is nobody to withdraw; the participant (at the instructions) sees the
    # confirmation page.
    "surveys:withdraw": public(P + "/withdraw/", NO_SESSION, participant=200),
    "surveys:withdrawn": public(P + "/withdrawn/"),
    "surveys:notice": public(P + "/notice/closed/"),
}


# ---------------------------------------------------------------- walking the URLconf


@dataclass(frozen=True)
class Route:
    name: str  # "namespace:name"; unnamed patterns get "<unnamed> <route>"
    route: str
    in_admin: bool


def all_routes(patterns=None, prefix: str = "", namespace: str = "", in_admin: bool = False) -> list[Route]:
    routes = []
    for pattern in patterns if patterns is not None else get_resolver().url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}:{pattern.namespace}".strip(":") if pattern.namespace else namespace
            routes += all_routes(pattern.url_patterns, route, inner, in_admin or pattern.namespace == "admin")
        elif isinstance(pattern, URLPattern):
            name = f"{namespace}:{pattern.name}".strip(":") if pattern.name else f"<unnamed> {route}"
            routes.append(Route(name, route, in_admin))
    return routes


# ---------------------------------------------------------------- visitors


def visitor(role: str, study, users: dict) -> Client:
    client = Client()
    if role == "participant":
        client.get(f"/s/{study.slug}/?PROLIFIC_PID={PARTICIPANT_PID}&STUDY_ID=s&SESSION_ID=t")
        client.post(f"/s/{study.slug}/consent/", {"decision": "accept"})
    elif role in users:
        client.force_login(users[role])
    return client


def fill(template: str, values: dict[str, str]) -> str:
    return template.format(**values)


def outcome(response) -> tuple[int, str]:
    return response.status_code, response.get("Location", "")


def matches(actual: tuple[int, str], expected: int | tuple[int, str], values: dict[str, str]) -> bool:
    if isinstance(expected, int):
        return actual[0] == expected
    status, prefix = expected
    return actual[0] == status and actual[1].startswith(fill(prefix, values))


def request(client: Client, expect: Expect, values: dict[str, str]):
    url = fill(expect.path, values)
    if expect.method == "POST" and expect.json:
        return client.post(url, expect.data, content_type="application/json")
    if expect.method == "POST":
        return client.post(url, expect.data)
    return client.get(url)


# ---------------------------------------------------------------- admin group


def admin_path(route: Route, study) -> str:
    """A concrete path for an admin pattern (object ids point at real rows)."""
    path = route.route
    match = re.match(r"admin/(\w+)/(\w+)/", path)
    model = next((m for m in admin.site._registry if match and (m._meta.app_label, m._meta.model_name) == match.groups()),
                 None)
    object_id = str(model.objects.order_by("pk").values_list("pk", flat=True).first() or 1) if model else "1"
    replacements = {
        "<path:object_id>": object_id, "<path:content_type_id>": str(ContentType.objects.get_for_model(study).pk),
        "(?P<url>.*)": "no-such-admin-page/",
    }
    # The app-list pattern names every app with an admin (it grows with each app that registers one).
    path = re.sub(r"\(\?P<app_label>[^)]*\)", "surveys", path)
    if route.name == "admin:view_on_site":
        replacements["<path:object_id>"] = str(study.pk)
    for placeholder, value in replacements.items():
        path = path.replace(placeholder, value)
    return "/" + path.lstrip("^").rstrip("$").replace("^", "").replace("$", "")


APPEND_ONLY_ADMIN = {"admin:audit_auditevent_add", "admin:audit_auditevent_delete"}


def check_admin_route(route: Route, visitors: dict[str, Client], study) -> list[str]:
    path = admin_path(route, study)
    failures = []
    if route.name == "admin:logout":
        # A POST-only view; admin_view first sends non-staff to the sign-in.
        return [f"{path}: {role} {outcome(client.get(path))}" for role, client in visitors.items()
                if outcome(client.get(path))[0] not in (302, 405)]
    for role, client in visitors.items():
        status, location = outcome(client.get(path))
        if role == "staff":
            # The autocomplete endpoint refuses a request without its query (403), as Django's admin does.
            allowed = (200, 302, 403) if route.name == "admin:autocomplete" else (200, 302, 404)
            if route.name in APPEND_ONLY_ADMIN:
                allowed = (403,)  # the audit trail: not even staff add or delete a row
            if location.startswith(ADMIN_LOGIN) or status not in allowed:
                failures.append(f"{route.name} {path} staff: {status} {location}")
        elif route.name == "admin:login":
            pass  # shadowed by our own sign-in page (the "admin-login" entry)
        elif not (status == 302 and location.startswith(ADMIN_LOGIN)):
            failures.append(f"{route.name} {path} {role}: {status} {location}, expected the admin sign-in")
    return failures


# ---------------------------------------------------------------- the test


@pytest.fixture
def users(owner, other, other_study, staff, study) -> dict:
    staff.is_superuser = True  # staff here means the site's administrators
    staff.save()
    team = {role: make_user(role) for role in TEAM}
    for role, user in team.items():
        StudyMembership.objects.create(study=study, user=user, role=role)
    return {"other": other, "owner": owner, **team, "staff": staff}


@pytest.fixture
def visitors(done_run, users, fresh_cache) -> dict[str, Client]:
    return {role: visitor(role, done_run.study, users) for role in ROLES}


def test_every_url_pattern_has_an_expectation():
    names = {route.name for route in all_routes() if not route.in_admin}
    assert not names - set(EXPECTED), f"add these URL patterns to EXPECTED: {sorted(names - set(EXPECTED))}"
    assert not set(EXPECTED) - names, f"EXPECTED names patterns that no longer exist: {sorted(set(EXPECTED) - names)}"


# One test per visitor (eight of them, each walking every URL) rather than one walk of the whole matrix,
# which took about 20 s on a quiet machine: each visitor's walk stays well under the suite's time limit.
@pytest.mark.parametrize("role", ROLES)
def test_each_visitor_gets_the_expected_answer_from_every_url(role, visitors, users, done_run):
    values = {"slug": done_run.study.slug, "run": str(done_run.pk)}
    failures = []
    for route in all_routes():
        if route.in_admin:
            continue
        expect = EXPECTED.get(route.name)
        if expect is None:
            failures.append(f"{route.name} ({route.route}) has no entry in EXPECTED")
            continue
        client = visitor(role, done_run.study, users) if expect.throwaway else visitors[role]
        actual = outcome(request(client, expect, values))
        if not matches(actual, expect.statuses[role], values):
            failures.append(f"{route.name} {role}: got {actual}, expected {expect.statuses[role]}")
    assert not failures, "\n".join(failures)


def test_each_visitor_gets_the_expected_answer_from_every_admin_url(visitors, done_run):
    failures = []
    for route in all_routes():
        if route.in_admin:
            failures += check_admin_route(route, visitors, done_run.study)
    assert not failures, "\n".join(failures)


def test_participant_pages_stay_reachable_for_a_participant_and_researcher_pages_never(visitors, done_run):
    slug = done_run.study.slug
    participant = visitors["participant"]
    assert participant.get(f"/s/{slug}/instructions/").status_code == 200
    for path in (f"/studies/{slug}/", f"/studies/{slug}/exports/participants.csv", "/studies/"):
        response = participant.get(path)
        assert response.status_code == 302 and response["Location"].startswith(LOGIN)
    assert participant.get(f"/api/studies/{slug}/participants/").status_code == 403
