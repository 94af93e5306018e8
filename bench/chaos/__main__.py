"""`python -m bench.chaos --seed N`: replay one seeded storm and print its report."""

import sys

from .cli import main

sys.exit(main())
