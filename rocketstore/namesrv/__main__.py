from rocketstore.namesrv.startup import main

raise SystemExit(main())
