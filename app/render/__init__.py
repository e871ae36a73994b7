"""The render side: an OpenAI request to the engine's GenerateRequest.

vLLM's GPU-less tier is one server with two sides; /render turns a chat or
completion request into token ids and sampling parameters, /derender turns the
engine's tokens back. Serving both from one process shares the tokenizer and the
chat template, so the prompt ids derender reads are the ones render produced.
"""
