"""``python -m engine.hooks AGENT [--db URL] [--budget TOKENS]``: the command the installed hooks run."""

import sys

from engine.hooks.handler import main

sys.exit(main())
