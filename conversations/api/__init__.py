"""REST API for threads and messages (DRF); mounted under /api/v1/ by config/urls.py."""
