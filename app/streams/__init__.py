"""Derendering one-shot outputs and streamed chunks, with the sessions a stream keeps."""
