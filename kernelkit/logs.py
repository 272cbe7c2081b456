"""kernelkit's log, through the standard `logging` module: the logger `kernelkit` and its
children, one per part that logs (`kernelkit.compile`, `kernelkit.cache`,
`kernelkit.backend`).

What is logged: each compile, with the kernel's name and its time (INFO), and the time
of each of its stages (DEBUG); each disk-cache hit and miss (DEBUG), and each damaged
entry rebuilt (INFO); a backend starting (`make_backend`); and a compile that takes
longer than `compiler.driver.SLOW_COMPILE_SECONDS` (WARNING). Launching a compiled
kernel logs nothing, so that its cost does not change whether logging is on or off.

As a library should, kernelkit leaves where the log goes to the application: it adds
only a `NullHandler`, and `logging.getLogger("kernelkit").setLevel(logging.DEBUG)`
with a handler of the application's shows everything. For a quick look without code,
KERNELKIT_LOG=info (or debug, or warning), read once when this module is first imported
(with kernelkit, before anything is compiled), writes the log to stderr from that level
up; the records then stop at that handler instead of going on to the application's
handlers too, which would print each of them twice.

Code that builds a message costing more than a format string checks
`logger.isEnabledFor(level)` first, so that logging costs nothing when it is off."""
from __future__ import annotations

import logging
import os
import warnings

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
"""The values of KERNELKIT_LOG: the least severe level it writes to stderr."""

FORMAT = "[%(name)s] %(levelname)s: %(message)s"

logger = logging.getLogger("kernelkit")
logger.addHandler(logging.NullHandler())


def get_logger(part: str) -> logging.Logger:
    """The logger of one part of kernelkit: `kernelkit.<part>`."""
    return logging.getLogger(f"{logger.name}.{part}")


def level_from_environment(setting: str | None) -> int | None:
    """The level KERNELKIT_LOG's value `setting` asks for, or None for no stderr log
    (unset or empty; a value it does not know, with a warning saying which it knows)."""
    name = (setting or "").strip().lower()
    if not name:
        return None
    if name not in LEVELS:
        warnings.warn(f"KERNELKIT_LOG={setting!r} is not one of {', '.join(LEVELS)}; "
                      "kernelkit logs nothing to stderr", stacklevel=2)
        return None
    return LEVELS[name]


def log_to_stderr(level: int) -> None:
    """Write kernelkit's log from `level` up to stderr (what KERNELKIT_LOG does)."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(FORMAT))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False


_level = level_from_environment(os.environ.get("KERNELKIT_LOG"))
if _level is not None:
    log_to_stderr(_level)
