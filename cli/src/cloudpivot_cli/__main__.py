from cloudpivot_cli.main import main

raise SystemExit(main())
