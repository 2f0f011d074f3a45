"""Asking models: prompts rendered from templates, the call path (cache, claims, retries,
batch jobs), parsing answers, and what calls cost."""
