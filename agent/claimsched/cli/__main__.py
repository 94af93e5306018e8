"""`python -m claimsched.cli`: the `claimsched` command."""

import sys

from . import main

sys.exit(main())
