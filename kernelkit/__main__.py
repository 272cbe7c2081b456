"""kernelkit's command line.

    python -m kernelkit --version      kernelkit's version
    python -m kernelkit info           versions (kernelkit, Python, llvmlite, numpy), each
                                       installed backend: whether it runs here (why not,
                                       if not) and on what; the disk cache; the
                                       KERNELKIT_ settings in the environment
    python -m kernelkit cache info     where the kernel cache is, how many entries, size
    python -m kernelkit cache clear    remove every entry
    python -m kernelkit opt FILE [-p pass1,pass2{option=value}] [--load my_passes.py]
                             [--target cpu|sm_90]
                                       run passes on a module dumped by KERNELKIT_DUMP
                                       (default: the target's whole pipeline) and print it;
                                       --load imports a file or module registering passes
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from . import __version__
    parser = argparse.ArgumentParser(prog="python -m kernelkit",
                                     description="kernelkit's command line tools")
    parser.add_argument("--version", action="version", version=f"kernelkit {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help="versions, the backends and whether they run here, "
                                     "the disk cache (for a bug report)")
    cache = commands.add_parser("cache", help="show or clear the disk cache of compiled kernels")
    cache.add_argument("action", choices=("info", "clear"))
    opt = commands.add_parser("opt", help="run passes on a dumped module and print it")
    opt.add_argument("file", help="a .kkir file (KERNELKIT_DUMP writes them)")
    opt.add_argument("-p", "--passes", help="pass names separated by commas, each with "
                                            "options if any: 'simplify{speculated_ops=8},dce' "
                                            "(default: the target's whole pipeline, with "
                                            "plugins)")
    opt.add_argument("--load", action="append", default=[], metavar="FILE_OR_MODULE",
                     help="a Python file or module to import first (one that registers "
                          "passes of its own); may be given several times")
    opt.add_argument("--target", default="cpu", help="cpu, or a GPU architecture (sm_90)")
    args = parser.parse_args(argv)
    if args.command == "info":
        return info_command()
    if args.command == "cache":
        return cache_command(args.action)
    return opt_command(args.file, args.passes, args.target, args.load)


def opt_command(file: str, passes: str | None, target_name: str,
                load: list[str] = ()) -> int:
    from .compiler.driver import compile_module
    from .errors import KernelkitError
    from .ir.parser import parse_module
    from .ir.printer import print_module
    from .ir.verifier import verify_module
    from .passes import Pipeline
    from .passes.pipeline import pass_named, split_pipeline
    try:
        for name in load:
            load_passes(name)
        target = target_named(target_name)
        names = split_pipeline(passes) if passes else None
        for name in names or ():
            pass_named(name)
        with open(file) as handle:
            module = parse_module(handle.read(), file)
        if names is None:
            compile_module(module, target)
        else:
            Pipeline(names)(module)
            verify_module(module)
    except (KernelkitError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(print_module(module))
    return 0


def load_passes(name: str) -> None:
    """Import `name`, a Python file or an importable module, for the passes it
    registers."""
    import importlib
    import importlib.util
    from pathlib import Path

    from .errors import KernelkitError
    if not name.endswith(".py"):
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise KernelkitError(f"--load {name}: {error}") from None
        return
    path = Path(name)
    if not path.is_file():
        raise KernelkitError(f"--load {name}: no such file")
    spec = importlib.util.spec_from_file_location(f"kernelkit_loaded_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)


def target_named(name: str):
    """The code generator `--target` names, from the installed backend that has it."""
    from .backend import backend_class, backend_names
    from .errors import KernelkitError
    for backend in backend_names():
        target = backend_class(backend).target_named(name)
        if target is not None:
            return target
    raise KernelkitError(f"no installed backend compiles for the target '{name}' "
                         "(cpu, or a GPU architecture such as sm_90)")


def cache_command(action: str) -> int:
    from .compiler.cache import cache_directory, disk_cache
    if action == "clear":
        removed = disk_cache.clear()
        print(f"removed {removed} entr{'y' if removed == 1 else 'ies'} from {cache_directory()}")
        return 0
    print("\n".join(cache_lines()))
    return 0


def cache_lines() -> list[str]:
    """Where the disk cache is, how many entries it has and their size."""
    from .compiler.cache import cache_directory, disk_cache
    entries = disk_cache.entries()
    size = sum(path.stat().st_size for path in entries)
    return [f"directory: {cache_directory()}",
            f"entries:   {len(entries)}",
            f"size:      {size / 1e6:.2f} MB"]


def info_command() -> int:
    """What a bug report should say about this installation and machine."""
    import os
    import platform

    import llvmlite
    import numpy
    from llvmlite import binding as llvm

    from . import __version__
    from .backend import backend_names
    print(f"kernelkit: {__version__}")
    print(f"python:    {platform.python_version()} ({platform.python_implementation()}, "
          f"{sys.executable})")
    print(f"llvmlite:  {llvmlite.__version__} "
          f"(LLVM {'.'.join(map(str, llvm.llvm_version_info))})")
    print(f"numpy:     {numpy.__version__}")
    print(f"machine:   {platform.system()} {platform.machine()}, "
          f"CPU {llvm.get_host_cpu_name()}")
    settings = sorted(f"{name}={value}" for name, value in os.environ.items()
                      if name.startswith("KERNELKIT_"))
    sections = {"backends": [line for name in backend_names() for line in backend_lines(name)],
                "disk cache": cache_lines(),
                "environment": settings or ["no KERNELKIT_ settings"]}
    for title, lines in sections.items():
        print(f"{title}:")
        for line in lines:
            print(f"  {line}")
    return 0


def backend_lines(name: str) -> list[str]:
    """Whether the backend `name` runs here, and if so its default instance (whose repr
    names its device) and the threads it launches on, where it has threads; if not,
    why not."""
    from .backend import backend_unavailable_reason, make_backend
    try:
        reason = backend_unavailable_reason(name)
        if reason is not None:
            return [f"{name}: cannot run here: {reason}"]
        backend = make_backend(name)
    except Exception as error:  # a broken backend is reported, and so are the others
        return [f"{name}: cannot start: {type(error).__name__}: {error}"]
    lines = [f"{name}: runs here", f"  device:  {backend!r}"]
    threads = getattr(backend, "threads", None)
    if threads is not None:
        lines.append(f"  threads: {threads}")
    return lines


if __name__ == "__main__":
    sys.exit(main())
