"""The shared marker engine: a format's markers by id and text, read once per chunk."""
