"""The fake API's old home: `python -m harness.testing.fake_api` and
`from harness.testing.fake_api import FakeServer` still work; the server is `harness.fake_api`."""
