"""Personas and helpers shared by the whole suite: analyst, supervisor, auditor,
outsider (another tenant), agent."""

import os
import socket

import pytest
from django.db import connection

from accounts.models import Role
from core.actors import Actor
from tests import db_template
from tests.factories import TenantFactory, UserFactory, make_case

pytest_plugins = ["tests.longest_first"]  # the slow phase starts its longest tests first


# The fixtures that open the database to a test (pytest-django blocks it for every other test).
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback",
                               "live_server"})


def uses_the_database(item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(
        DATABASE_FIXTURES.intersection(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config, items):
    """PostgreSQL-only tests are skipped, visibly, when the suite runs on SQLite. In the PostgreSQL
    pass two kinds of test are skipped, visibly, because they would repeat the SQLite pass's work
    exactly; they run once, in the SQLite pass:
    - `engine_independent` tests: their processes run on a SQLite database of their own, or on none;
    - tests that are not `slow` and use no database (no `django_db` mark, no database fixture):
      pytest-django refuses them any query, and they start no process, so the engine cannot change
      their result (the classifier's training, the signal rules, the import and code shape...)."""
    is_postgres = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))
    if not is_postgres:
        skip = pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL=postgres://... (.ci/run does)")
        for item in items:
            if "postgres" in item.keywords:
                item.add_marker(skip)
        return
    independent = pytest.mark.skip(reason="does not depend on the database engine (its processes use a SQLite "
                                          "database of their own, or none): runs once, in the SQLite pass")
    no_database = pytest.mark.skip(reason="uses no database and starts no process: runs once, in the SQLite pass")
    for item in items:
        if "engine_independent" in item.keywords:
            item.add_marker(independent)
        elif not ({"slow", "postgres"} & set(item.keywords)) and not uses_the_database(item):
            item.add_marker(no_database)


@pytest.fixture(scope="session")
def django_db_setup(django_test_environment, django_db_blocker, django_db_modify_db_settings):
    """Replaces pytest-django's: the test database is a copy of a template migrated once (and kept
    between runs until a migration changes), not a database migrated per worker (tests/db_template.py)."""
    with django_db_blocker.unblock():
        names = db_template.setup_test_database()
    yield
    with django_db_blocker.unblock():
        db_template.teardown_test_database(names)


@pytest.fixture(autouse=True)
def _isolated_settings(settings, tmp_path):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.CELERY_TASK_ALWAYS_EAGER = False


@pytest.fixture(scope="session", autouse=True)
def shipped_classifier():
    """The offline analyst's trained classifier, as `make run` prepares it: its artifact lives in a
    folder shared by every xdist worker and kept between runs (config/settings_test.py), so the
    suite trains it at most once — the first worker trains under the training lock, the others wait
    and load it — and only again when its data or training code change. Steps never train it."""
    from analyst import classifier

    result = classifier.classifier_train()
    return result.artifact


@pytest.fixture
def tenant(db):
    return TenantFactory(name="Acme Consumer Affairs", slug="acme")


@pytest.fixture
def other_tenant(db):
    return TenantFactory(name="Other Regulator", slug="other")


@pytest.fixture
def analyst(tenant):
    return UserFactory(username="analyst", tenant=tenant, role=Role.ANALYST)


@pytest.fixture
def analyst_b(tenant):
    return UserFactory(username="analyst_b", tenant=tenant, role=Role.ANALYST)


@pytest.fixture
def supervisor(tenant):
    return UserFactory(username="supervisor", tenant=tenant, role=Role.SUPERVISOR)


@pytest.fixture
def supervisor_b(tenant):
    return UserFactory(username="supervisor_b", tenant=tenant, role=Role.SUPERVISOR)


@pytest.fixture
def auditor(tenant):
    return UserFactory(username="auditor", tenant=tenant, role=Role.AUDITOR)


@pytest.fixture
def admin_user(tenant):
    return UserFactory(username="admin", tenant=tenant, role=Role.ADMIN, is_staff=True)


@pytest.fixture
def outsider(other_tenant):
    return UserFactory(username="outsider", tenant=other_tenant, role=Role.SUPERVISOR)


@pytest.fixture
def agent():
    return Actor.agent("risk_assessor", "1.0")


@pytest.fixture
def case(analyst):
    return make_case(actor=analyst)


@pytest.fixture
def is_postgres():
    return connection.vendor == "postgresql"


# No network in tests: webhook hosts resolve through this table, never through DNS. A test adds
# names to it (`dns["internal.example"] = ["10.0.0.5"]`); a name not in it does not resolve.
PUBLIC_TEST_ADDRESS = "93.184.215.14"


@pytest.fixture(autouse=True)
def dns(monkeypatch):
    table = {"localhost": ["127.0.0.1", "::1"], "hooks.example.org": [PUBLIC_TEST_ADDRESS],
             "x.example": [PUBLIC_TEST_ADDRESS]}

    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        answer = table[host]
        return list(answer() if callable(answer) else answer)

    monkeypatch.setattr("integrations.webhook_address.resolve_host", resolve)
    return table
