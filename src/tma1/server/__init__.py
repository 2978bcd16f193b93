"""The HTTP server: hook ingest, read-only APIs and the dashboard."""
