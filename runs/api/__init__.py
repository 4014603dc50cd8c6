"""REST API for runs and memory (DRF); mounted under /api/v1/ by config/urls.py."""
