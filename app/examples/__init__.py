"""Runnable quick starts, one per model family whose tokenizer is bundled.

``python -m app.examples FAMILY`` tokenizes a realistic output of that family (reasoning,
a sentence, one tool call, in the family's own markup) with the family's bundled
tokenizer, streams it a few tokens per chunk through the derender protocol and prints
each delta. With ``--url`` it streams through a running server (started with the flags
the family row names); without, through an app built in this process with those flags.
"""
