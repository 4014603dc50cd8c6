"""The traffic of a working day for `bench/load.py` (locust, headless): people who log in and then
read the queue, open cases, look at the review inbox and call the API's lists, with about 5% of
requests writing (evidence added to a case through the page's form) and a few logging in again.

Each simulated person is one of the demo users of the acme tenant (`manage.py seed_demo`), with a
session of its own. Every answer that is not the expected one counts as a failure: a 4xx/5xx, a
login that does not reach the queue, a write that is refused."""

from __future__ import annotations

import itertools
import random
import re

from locust import HttpUser, between, task

PASSWORD = "arbiter-demo"
# Who works a queue on a weekday: mostly analysts, a supervisor, now and then the auditor.
ROLES = itertools.cycle(["analyst", "analyst_b", "analyst", "supervisor", "analyst_b", "auditor"])
WRITERS = {"analyst", "analyst_b", "supervisor"}
CLOSED = {"decided", "closed"}
_TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


class Person(HttpUser):
    # A person reads a page for a moment before the next click (0.5–2 s: a busy one).
    wait_time = between(0.5, 2.0)

    def on_start(self) -> None:
        self.username = next(ROLES)
        self.references: list[str] = []
        self.open_references: list[str] = []
        self.log_in()
        with self.client.get("/api/v1/cases/", name="/api/v1/cases/", catch_response=True) as response:
            if response.status_code != 200:
                response.failure(f"case list answered {response.status_code}")
                return
            rows = response.json()["results"]
            self.references = [row["reference"] for row in rows]
            # Evidence is added to cases still being worked (a decided or closed case refuses it).
            self.open_references = [row["reference"] for row in rows if row["status"] not in CLOSED]

    def log_in(self) -> None:
        self.client.cookies.clear()
        page = self.client.get("/accounts/login/", name="login page")
        token = _TOKEN.search(page.text)
        with self.client.post("/accounts/login/", name="login", catch_response=True, allow_redirects=False,
                              data={"username": self.username, "password": PASSWORD,
                                    "csrfmiddlewaretoken": token.group(1) if token else ""},
                              headers={"Referer": f"{self.host}/accounts/login/"}) as response:
            if response.status_code != 302:
                response.failure(f"login for {self.username} answered {response.status_code}, not a redirect")

    def _reference(self) -> str | None:
        return random.choice(self.references) if self.references else None

    @task(30)
    def queue(self) -> None:
        self.client.get("/", name="queue")

    @task(6)
    def queue_filtered(self) -> None:
        self.client.get("/?status=triaged", name="queue (filtered)")

    @task(25)
    def case_page(self) -> None:
        reference = self._reference()
        if reference:
            self.client.get(f"/cases/{reference}/", name="case page")

    @task(10)
    def review_inbox(self) -> None:
        self.client.get("/review/", name="review inbox")

    @task(12)
    def api_case_list(self) -> None:
        self.client.get("/api/v1/cases/", name="/api/v1/cases/")

    @task(8)
    def api_case_detail(self) -> None:
        reference = self._reference()
        if reference:
            self.client.get(f"/api/v1/cases/{reference}/", name="/api/v1/cases/<ref>/")

    @task(5)
    def add_evidence(self) -> None:
        reference = random.choice(self.open_references) if self.open_references else None
        if not reference or self.username not in WRITERS:
            return self.case_page()  # the auditor reads instead
        token = self.client.cookies.get("csrftoken", "")
        with self.client.post(f"/cases/{reference}/evidence/text/", name="add evidence (write)",
                              catch_response=True, allow_redirects=False,
                              data={"title": "Call note", "text": "The consumer called to ask for news.",
                                    "source": "phone", "csrfmiddlewaretoken": token},
                              headers={"Referer": f"{self.host}/cases/{reference}/"}) as response:
            if response.status_code not in (200, 302, 303):
                response.failure(f"adding evidence answered {response.status_code}")

    @task(3)
    def log_in_again(self) -> None:
        self.log_in()
