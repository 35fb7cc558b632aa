import sys

from amp_lint.verify.command import main

sys.exit(main())
