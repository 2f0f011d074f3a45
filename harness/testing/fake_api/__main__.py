from harness.testing.fake_api.server import main

main()
