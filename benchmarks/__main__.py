"""`python -m benchmarks scale|quality|all [options]`."""

from __future__ import annotations

import argparse
import os
import sys

# Nothing here may reach a model hub: the model comes from a local package or folder.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main(argv: list[str] | None = None) -> int:
    from . import quality, scale

    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    sub = parser.add_subparsers(dest="which", required=True)
    scale.add_arguments(sub.add_parser("scale", help="throughput, latency, sweep, memory, disk"))
    quality.add_arguments(
        sub.add_parser("quality", help="LoCoMo and LongMemEval_S evidence recall in budgets")
    )
    both = sub.add_parser("all", help="scale, then quality")
    scale.add_arguments(both)
    quality.add_arguments(both, with_out=False)
    args = parser.parse_args(argv)
    if args.which in ("scale", "all"):
        scale.run(args)
    if args.which in ("quality", "all"):
        quality.run_datasets(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
