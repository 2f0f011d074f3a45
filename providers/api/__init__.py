"""Judges behind an HTTP API (Gemini, OpenAI and OpenAI-compatible servers) and their batch
modes."""
