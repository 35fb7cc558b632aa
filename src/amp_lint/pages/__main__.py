"""`python -m amp_lint.pages [DIR]`: regenerate docs/rules/ and docs/autocast-ops.md."""

import sys

from amp_lint.pages.rule_pages import main

if __name__ == "__main__":
    sys.exit(main())
