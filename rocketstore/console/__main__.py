from rocketstore.console.startup import main

raise SystemExit(main())
