"""Importers: other benchmarks' releases turned into the dataset folder format
(`harness import NAME SRC --out DIR`)."""
