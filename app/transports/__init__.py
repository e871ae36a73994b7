"""The transports a chunk arrives by (HTTP, WebSocket, batch frames) and their client."""
