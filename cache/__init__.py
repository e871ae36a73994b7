"""Session caches: opaque sessions keyed by stream. Knows nothing of parsers."""
