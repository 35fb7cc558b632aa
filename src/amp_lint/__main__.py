from amp_lint.cli.main import main

raise SystemExit(main())
