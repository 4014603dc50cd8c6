"""Arbiter settings. Every value comes from the environment; bad values stop the process loudly.

The defaults run everything on one machine with no service installed: SQLite, Celery's
filesystem transport, and the file email backend (see README). One module per concern, each
setting assigned once, in the module of its concern; `.env.example` documents every variable:

    base        paths, DEBUG, secret key, apps, middleware, templates, database, passwords, static files
    security    HTTPS, cookies, HSTS, proxy header, CSP, login lockout, client address behind proxies
    operations  logs, health probes, metrics, cache, the outbox, worker and beat heartbeats, outages
    audit       the audit ledger's keys and anchors
    cases       evidence, e-mail and notice dispatch, deadlines, PDF extraction
    runs        the run engine: budgets, leases, heartbeats, durability, retention, graph/provider names
    agents      model providers, contexts and redaction, triage, the offline analyst, conversations
    api         the REST API, its schema, webhooks, CORS
    celery      the broker, task defaults, beat's schedule
"""

from config.settings.agents import *  # noqa: F403
from config.settings.api import *  # noqa: F403
from config.settings.audit import *  # noqa: F403
from config.settings.base import *  # noqa: F403
from config.settings.cases import *  # noqa: F403
from config.settings.celery import *  # noqa: F403
from config.settings.operations import *  # noqa: F403
from config.settings.runs import *  # noqa: F403
from config.settings.security import *  # noqa: F403
