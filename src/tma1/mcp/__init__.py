"""`tma1 mcp`: a Model Context Protocol server (stdio) over the running tma1's HTTP API.

This package is `tma1.mcp`; the SDK is the top-level `mcp`. Modules here import the SDK
with absolute imports only, and this `__init__` imports nothing, so `tma1` stays importable
without the SDK being loaded.
"""
