from harness.fake_api.server import main

main()
