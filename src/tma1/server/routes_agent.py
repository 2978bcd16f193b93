"""Routes the MCP server needs beyond the dashboard's (to be filled in by its issue)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()
