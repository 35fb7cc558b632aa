from amp_lint.cli import main

raise SystemExit(main())
