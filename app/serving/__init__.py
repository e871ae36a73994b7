"""The running server: its ASGI app, CLI and settings, start-up, metrics, auth and limits."""
