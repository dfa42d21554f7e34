"""`python -m agentify ARGS`: the same as `agentify ARGS`."""

import sys

from agentify.cli import main

sys.exit(main())
