"""`python -m tiered_memory.cli`: the console script."""

from .commands import main

main()
