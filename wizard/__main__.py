from tcpwizard.main import main

raise SystemExit(main())
