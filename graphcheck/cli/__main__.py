"""``python -m graphcheck.cli``: the ``graphcheck`` command."""

import sys

from graphcheck.cli import main

sys.exit(main())
