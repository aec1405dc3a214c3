"""Entry point for `python -m agents`."""

import sys

from agents.cli import main

sys.exit(main())
