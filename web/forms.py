"""Browser forms. They check the shape of the input only; the services decide what is allowed
and their Invalid errors are put back on these forms by web.errors.add_to_form."""

from __future__ import annotations

from django import forms

from cases import policy
from cases.models import CASE_TRANSITIONS, TRANSITION_LABELS, CaseStatus, ProposalKind, RiskLevel
from cases.selectors import CASE_SORTS
from reports.filters import NONE_VALUE, DashboardFilters, parse_month
from reports.selectors import DEADLINE_TYPES, DECISION_BUCKETS, DUE_STATES, SLA_MEASURES, QueueFilter

REASON_LABELS = {
    "decide": "Decision and resolution",
    "reopen": "Why reopen",
    "return_to_review": "What still needs review",
}


QUICK_VIEW_CHOICES = [("", "All cases"), ("mine", "My cases"), ("decide", "Needs my decision"),
                      ("overdue", "Overdue"), ("unassigned", "Unassigned")]

# The queue's sortable columns: the value in the URL -> its label. "-x" is descending.
SORT_LABELS = {"created": "Opened", "due": "Due", "updated": "Updated", "received": "Received", "risk": "Risk",
               "status": "Status"}
DEFAULT_SORT = "-created"


def sort_choices() -> list[tuple[str, str]]:
    choices = []
    for name, label in SORT_LABELS.items():
        if name == "due":
            choices += [("due", "Due (soonest first)"), ("-due", "Due (latest first)")]
        elif name in CASE_SORTS:
            choices += [(f"-{name}", f"{label} (newest / highest first)"), (name, f"{label} (oldest / lowest first)")]
    return choices


class CaseFilterForm(forms.Form):
    q = forms.CharField(label="Search", required=False, max_length=200,
                        widget=forms.TextInput(attrs={"type": "search",
                                                      "placeholder": "Words of the reference, title, company, "
                                                                     "product or narrative"}))
    view = forms.ChoiceField(label="View", required=False, choices=QUICK_VIEW_CHOICES)
    status = forms.ChoiceField(label="Status", required=False, choices=[("", "Any status"), *CaseStatus.choices])
    risk_level = forms.ChoiceField(label="Risk", required=False, choices=[("", "Any risk"), *RiskLevel.choices])
    product = forms.CharField(label="Product", required=False, max_length=200)
    company = forms.CharField(label="Company", required=False, max_length=200)
    assignee = forms.TypedChoiceField(label="Assignee", required=False, coerce=int, empty_value=None,
                                      choices=[("", "Anyone")])
    tag = forms.CharField(label="Tag", required=False, max_length=100)
    pending = forms.BooleanField(label="Has pending work", required=False,
                                 help_text="A proposal or notice waiting for a decision or to be sent.")
    sort = forms.ChoiceField(label="Sort by", required=False, choices=[])
    # The dashboard's links (web/views/dashboard.py): kept as hidden fields while filtering on.
    team = forms.CharField(required=False, max_length=100)
    month = forms.CharField(required=False, max_length=7)
    open = forms.BooleanField(required=False)
    deadline = forms.ChoiceField(required=False, choices=[("", ""), *DEADLINE_TYPES.items()])
    due = forms.ChoiceField(required=False, choices=[("", ""), *DUE_STATES.items()])
    sla = forms.ChoiceField(required=False, choices=[("", ""), *[(f"{m}_{o}", f"{m}_{o}") for m in SLA_MEASURES
                                                                   for o in ("met", "missed")]])
    decided_in = forms.ChoiceField(required=False, choices=[("", ""), *[(b[0], b[1]) for b in DECISION_BUCKETS]])

    FILTER_FIELDS = ("q", "view", "status", "risk_level", "product", "company", "assignee", "tag", "pending",
                     "team", "month", "open", "deadline", "due", "sla", "decided_in")
    DASHBOARD_FIELDS = ("team", "month", "open", "deadline", "due", "sla", "decided_in")

    def __init__(self, *args, users=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["assignee"].choices = [("", "Anyone"), *[(u.pk, u.username) for u in users]]
        self.fields["sort"].choices = [("", "Default (newest first)"), *sort_choices()]

    def selector_kwargs(self) -> dict:
        data = self.cleaned_data if self.is_valid() else {
            name: value for name, value in getattr(self, "cleaned_data", {}).items()}
        sort = data.get("sort") or DEFAULT_SORT
        return {
            "search": (data.get("q") or "").strip() or None, "view": data.get("view") or None,
            "status": data.get("status") or None, "risk_level": data.get("risk_level") or None,
            "product": None if data.get("product") == NONE_VALUE else (data.get("product") or "").strip() or None,
            "company": (data.get("company") or "").strip() or None,
            "assignee_id": data.get("assignee"), "tag": (data.get("tag") or "").strip() or None,
            "has_pending_work": bool(data.get("pending")), "sort": sort.lstrip("-"),
        }

    def clean_month(self) -> str:
        month = (self.cleaned_data.get("month") or "").strip()
        if month and parse_month(month) is None:
            raise forms.ValidationError("Give the month as year and month, e.g. 2026-03.")
        return month

    def queue_filter(self) -> QueueFilter:
        """The dashboard's conditions in this URL (web.views.queue applies them to the list)."""
        data = getattr(self, "cleaned_data", {}) if self.is_valid() else {}
        filters = DashboardFilters(team=data.get("team") or None,
                                   product=NONE_VALUE if data.get("product") == NONE_VALUE else None,
                                   month=parse_month(data.get("month") or ""))
        return QueueFilter(filters=filters, open_only=bool(data.get("open")), deadline=data.get("deadline") or None,
                           due=data.get("due") or None, sla=data.get("sla") or None,
                           decided_in=data.get("decided_in") or None)

    def dashboard_values(self) -> dict[str, str]:
        """The dashboard's parameters present in this URL (the queue keeps them as hidden fields)."""
        data = getattr(self, "cleaned_data", {})
        return {name: ("1" if data[name] is True else str(data[name])) for name in self.DASHBOARD_FIELDS
                if data.get(name) not in (None, "", False)}

    @property
    def sort_value(self) -> str:
        """The sort asked for, else the view's own: Overdue lists the most overdue first."""
        data = getattr(self, "cleaned_data", {})
        return data.get("sort") or ("due" if data.get("view") == "overdue" else DEFAULT_SORT)

    @property
    def is_filtered(self) -> bool:
        data = getattr(self, "cleaned_data", {})
        return any(data.get(name) not in (None, "", False) for name in self.FILTER_FIELDS)


class SavedViewForm(forms.Form):
    name = forms.CharField(label="Save these filters as", max_length=80)
    query = forms.CharField(required=False, max_length=2000, widget=forms.HiddenInput)


class CaseCreateForm(forms.Form):
    title = forms.CharField(max_length=300, help_text="A short summary an analyst will recognise in the queue.")
    product = forms.CharField(max_length=200, required=False)
    sub_product = forms.CharField(max_length=200, required=False, label="Sub-product")
    issue = forms.CharField(max_length=300, required=False)
    sub_issue = forms.CharField(max_length=300, required=False, label="Sub-issue")
    company = forms.CharField(max_length=200, required=False, label="Company (respondent)")
    consumer_state = forms.CharField(max_length=10, required=False, label="Consumer's state",
                                     help_text="Two-letter code, e.g. CA.")
    complainant_name = forms.CharField(max_length=200, required=False, label="Complainant's name")
    complainant_email = forms.EmailField(required=False, label="Complainant's email",
                                         help_text="Notices are sent here unless another recipient is given.")
    received_at = forms.DateField(required=False, label="Received on",
                                  widget=forms.DateInput(attrs={"type": "date"}),
                                  help_text="The case reference uses this year.")
    tags = forms.CharField(max_length=200, required=False, help_text="e.g. Servicemember, Older American")
    source = forms.CharField(max_length=100, required=False, help_text="Where the complaint came from.")
    narrative = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 8}),
                                label="Complaint narrative",
                                help_text="Becomes the case's first evidence, exactly as written.")

    def service_kwargs(self) -> dict:
        data = dict(self.cleaned_data)
        return {key: value for key, value in data.items() if value not in ("", None) or key == "title"}


class TransitionForm(forms.Form):
    """One transition button. Carries the case version the person saw, so a change made by
    someone else in the meantime is refused as a conflict instead of being applied blindly."""

    # After a refusal the page shows a fresh form with the current version (see web.case_page).
    carries_seen_state = True

    transition = forms.ChoiceField(choices=[(t, TRANSITION_LABELS[t]) for t in CASE_TRANSITIONS],
                                   widget=forms.HiddenInput)
    expected_version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
    reason = forms.CharField(required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        name = (self.data.get("transition") if self.is_bound else self.initial.get("transition")) or ""
        reason = self.fields["reason"]
        reason.label = REASON_LABELS.get(name, "Reason")
        if name in policy.TRANSITIONS_REQUIRING_REASON:
            reason.required = True
            reason.error_messages["required"] = (f"{TRANSITION_LABELS[name]} needs a reason; "
                                                 f"write one and try again.")


class EvidenceTextForm(forms.Form):
    title = forms.CharField(max_length=300)
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}))
    source = forms.CharField(max_length=200, required=False, help_text="Who or what provided it (optional).")


class EvidenceFileForm(forms.Form):
    title = forms.CharField(max_length=300)
    file = forms.FileField(help_text="Text, CSV, Markdown, JSON, PDF, PNG, JPEG or email (.eml) files.")
    source = forms.CharField(max_length=200, required=False, help_text="Who or what provided it (optional).")


class ProposalCreateForm(forms.Form):
    kind = forms.ChoiceField(label="What to change", choices=ProposalKind.choices,
                             widget=forms.RadioSelect)
    risk_level = forms.ChoiceField(label="New risk level", required=False,
                                   choices=[("", "—"), *[(v, label) for v, label in RiskLevel.choices
                                                         if v != RiskLevel.UNASSESSED]])
    transition = forms.ChoiceField(label="Status change", required=False,
                                   choices=[("", "—"), *[(t, TRANSITION_LABELS[t]) for t in CASE_TRANSITIONS]])
    team = forms.CharField(label="Team", required=False, max_length=100)
    assignee = forms.TypedChoiceField(label="Assignee", required=False, coerce=int, empty_value=None,
                                      choices=[("", "—")])
    rationale = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}),
                                help_text="Why this change: the approver reads this.")

    # Service field names that mean one of this form's fields, depending on the kind.
    PAYLOAD_FIELD = {ProposalKind.RISK_LEVEL: "risk_level", ProposalKind.STATUS_TRANSITION: "transition",
                     ProposalKind.ASSIGNMENT: "assignee"}

    def __init__(self, *args, users=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["assignee"].choices = [("", "—"), *[(u.pk, u.username) for u in users]]

    def clean(self):
        data = super().clean()
        kind = data.get("kind")
        if kind == ProposalKind.RISK_LEVEL and not data.get("risk_level"):
            self.add_error("risk_level", "Choose the risk level you propose.")
        elif kind == ProposalKind.STATUS_TRANSITION and not data.get("transition"):
            self.add_error("transition", "Choose the status change you propose.")
        elif kind == ProposalKind.ASSIGNMENT and not (data.get("team") or "").strip() and not data.get("assignee"):
            self.add_error("team", "Give a team, an assignee, or both.")
        return data

    def payload(self) -> dict:
        data = self.cleaned_data
        if data["kind"] == ProposalKind.RISK_LEVEL:
            return {"risk_level": data["risk_level"]}
        if data["kind"] == ProposalKind.STATUS_TRANSITION:
            return {"transition": data["transition"]}
        return {"team": (data.get("team") or "").strip(), "assignee_id": data.get("assignee")}

    def field_map(self) -> dict[str, str]:
        return {"payload": self.PAYLOAD_FIELD.get(self.data.get("kind"), "kind")}


class DecisionNoteForm(forms.Form):
    """Approve (note optional) or reject (note required) a proposal."""

    note = forms.CharField(required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args, note_required: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["note"].required = note_required
        self.fields["note"].label = "Reason for rejecting" if note_required else "Note (optional)"
        if note_required:
            self.fields["note"].error_messages["required"] = "Say why you reject it; the proposer reads this."


class NoticeForm(forms.Form):
    recipient = forms.EmailField(help_text="Defaults to the complainant's email.")
    subject = forms.CharField(max_length=300)
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 8}))


class NoticeApproveForm(forms.Form):
    """Carries the content hash of the text the approver saw: if the notice changed since, the
    service refuses the approval as stale."""

    # After a refusal the page shows a fresh form with the current hash (see web.case_page).
    carries_seen_state = True

    content_hash = forms.CharField(max_length=64, widget=forms.HiddenInput)
    note = forms.CharField(required=False, max_length=5000, label="Note (optional)",
                           widget=forms.Textarea(attrs={"rows": 2}))


class NoticeRejectForm(forms.Form):
    note = forms.CharField(max_length=5000, label="Reason for rejecting", widget=forms.Textarea(attrs={"rows": 2}),
                           error_messages={"required": "Say why you reject the notice; its drafter reads this."})


class AuditFilterForm(forms.Form):
    scope = forms.ChoiceField(required=False, widget=forms.HiddenInput,
                              choices=[("", "People's decisions"), ("all", "Everything")])
    action = forms.CharField(label="Action", required=False, max_length=100,
                             help_text="An action or the start of one, e.g. cases.notice")
    actor = forms.ChoiceField(label="Who", required=False, choices=[("", "Anyone")])
    actor_type = forms.ChoiceField(label="Kind of actor", required=False,
                                   choices=[("", "Any"), ("user", "People"), ("agent", "Agents"),
                                            ("system", "The system")])
    case = forms.CharField(label="Case", required=False, max_length=40,
                           widget=forms.TextInput(attrs={"placeholder": "CASE-2026-000001"}))
    decision = forms.ChoiceField(label="Decision", required=False, choices=[("", "Any decision")])
    date_from = forms.DateField(label="From", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(label="To", required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self):
        data = super().clean()
        if data.get("date_from") and data.get("date_to") and data["date_from"] > data["date_to"]:
            self.add_error("date_to", "The end date is before the start date.")
        return data


class ThreadCreateForm(forms.Form):
    title = forms.CharField(label="Title", max_length=300,
                            error_messages={"required": "Give the thread a title."})


class DashboardFilterForm(forms.Form):
    """The dashboard's filters; an unknown value is a 400 with the page unfiltered."""

    team = forms.ChoiceField(label="Team", required=False, choices=[])
    product = forms.ChoiceField(label="Product", required=False, choices=[])
    month = forms.CharField(label="Month received", required=False, max_length=7,
                            widget=forms.TextInput(attrs={"type": "month", "placeholder": "2026-03"}),
                            help_text="Year and month, e.g. 2026-03.")

    def __init__(self, *args, teams=(), products=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [("", "Every team"), *[(t or NONE_VALUE, t or "No team") for t in teams]]
        self.fields["product"].choices = [("", "Every product"),
                                          *[(p or NONE_VALUE, p or "No product") for p in products]]

    def clean_month(self) -> str:
        month = (self.cleaned_data.get("month") or "").strip()
        if month and parse_month(month) is None:
            raise forms.ValidationError("Give the month as year and month, e.g. 2026-03.")
        return month

    def filters(self) -> DashboardFilters:
        if not self.is_valid():
            return DashboardFilters()
        data = self.cleaned_data
        return DashboardFilters(team=data.get("team") or None, product=data.get("product") or None,
                                month=parse_month(data.get("month") or ""))
