"""`python -m memory.cli`: the `memory` command."""

from memory.cli import main

main()
