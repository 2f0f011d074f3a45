"""Scorers: similarity models (CLAP family, text embeddings, musicnn tags) and baselines."""
