"""REST API for cases, evidence, proposals, notices, case events and audit events."""
