from jobscheduler.cli.main import main

raise SystemExit(main())
