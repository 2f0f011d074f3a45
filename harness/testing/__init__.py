"""What tests, benchmarks and offline demos use, kept out of the product modules: a fake of
the Gemini and OpenAI APIs (`harness.testing.fake_api`) and tiny randomly initialised models
of the local providers' exact classes (`harness.testing.tiny_models`)."""
