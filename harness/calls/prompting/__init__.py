"""Prompts: templates in a sandbox, the prompt variants, few-shot examples and joint orders."""
