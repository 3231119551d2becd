"""`python -m netc`: the netc command (netc/cli.py)."""
import sys

from .cli import main

sys.exit(main())
