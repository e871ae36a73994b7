"""Tokens and text: tokenizer loading (bundled vocabularies too), detokenization, logprobs."""
