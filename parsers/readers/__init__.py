"""JSON read incrementally, and arguments coerced to a tool's schema, for every family."""
