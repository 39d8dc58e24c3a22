from rocketstore.broker.startup import main

raise SystemExit(main())
