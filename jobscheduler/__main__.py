from jobscheduler.cli import main

raise SystemExit(main())
