"""Local audio-language judges on transformers."""
