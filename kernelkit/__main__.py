"""kernelkit's command line.

    python -m kernelkit cache info     where the kernel cache is, how many entries, size
    python -m kernelkit cache clear    remove every entry
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelkit",
                                     description="kernelkit's command line tools")
    commands = parser.add_subparsers(dest="command", required=True)
    cache = commands.add_parser("cache", help="show or clear the disk cache of compiled kernels")
    cache.add_argument("action", choices=("info", "clear"))
    args = parser.parse_args(argv)
    if args.command == "cache":
        return cache_command(args.action)
    return 2


def cache_command(action: str) -> int:
    from .compiler.cache import cache_directory, disk_cache
    if action == "clear":
        removed = disk_cache.clear()
        print(f"removed {removed} entr{'y' if removed == 1 else 'ies'} from {cache_directory()}")
        return 0
    entries = disk_cache.entries()
    size = sum(path.stat().st_size for path in entries)
    print(f"directory: {cache_directory()}")
    print(f"entries:   {len(entries)}")
    print(f"size:      {size / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
