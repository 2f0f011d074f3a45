import sys

from harness.fake_api import main

print("note: harness.testing.fake_api is now harness.fake_api", file=sys.stderr)
main()
