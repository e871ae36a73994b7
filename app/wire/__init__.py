"""The wire: vLLM's derender protocol, how bodies are read and checked, errors, its documents."""
