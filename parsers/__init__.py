"""Reasoning and tool-call parsers, by vLLM's names. Knows nothing of HTTP."""
