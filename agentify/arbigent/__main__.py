"""`python -m agentify.arbigent ARGS`: the same as `agentify arbigent ARGS`."""

import sys

from agentify.arbigent.cli import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
