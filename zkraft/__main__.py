"""`python3 -m zkraft ...`: the same as the `zkraft` console script."""

import sys

from zkraft.cli import main

if __name__ == "__main__":
    sys.exit(main())
