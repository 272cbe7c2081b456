"""Compiler plugins: code that rewrites kernels which call its marker, on every target.

A plugin has a name, a marker (the name of a `kernelkit.lang.markers.Marker` that kernels
call, which the frontend turns into an `intrinsic` operation), hooks at named stages, and
a key that is part of every cache key of a kernel it ran on, as is a fingerprint of its
code. It runs only for modules that contain its marker. The stages, in the order the
driver reaches them:

- `after_frontend(module)`: the typed IR as the frontend made it (markers still there);
- `after_generic_passes(module)`: the target-neutral IR: device functions inlined into
  the kernel and the IR simplified by the generic passes, but none of a target's passes
  run yet (the CPU's barrier splitting and loop versioning), so a plugin sees the same
  module for every target;
- `before_lowering(module)`: the typed IR after every pass, the target's too, before
  LLVM lowering;
- `in_llvm_pipeline(llvm_module, target)`: the LLVM module, before it is optimized.

A target knows nothing about plugins: the driver runs them. Plugins register with
`register_plugin(plugin)` or under the entry-point group `kernelkit.plugins` (loaded the
first time plugins are looked up)."""
from __future__ import annotations

import functools
import linecache
from importlib.metadata import entry_points

from ..errors import CompileError
from ..ir.definitions import INTRINSIC
from ..ir.function import Module
from .cache import code_fingerprint


class Plugin:
    """Subclass and override the hooks a plugin needs. A plugin with several markers
    names them all in `markers` (`marker` is the first)."""

    name: str = "plugin"
    marker: str = ""
    work_groups_in_ir: bool = False
    """Whether all a plugin's output does with work-groups shows in its IR (it builds
    nothing for one group shape other than through group and local ids, local memory and
    barriers, and its host code reads nothing of the groups): the driver then judges its
    kernels by `analysis.work_groups`, as kernels without plugins, and a CPU may run those
    that do not observe their groups in groups of its own shape. Else every kernel the
    plugin ran on counts as observing them."""

    @property
    def markers(self) -> tuple[str, ...]:
        return (self.marker,)

    def after_frontend(self, module: Module) -> None:
        pass

    def after_generic_passes(self, module: Module) -> None:
        pass

    def before_lowering(self, module: Module) -> None:
        pass

    def in_llvm_pipeline(self, llvm_module, target) -> None:
        pass

    def cache_key(self) -> str:
        """Changes whenever the plugin's output would (a version, its options)."""
        return self.name

    def fingerprint(self) -> str:
        """A digest of the plugin's code, also part of the cache key, so that editing it
        needs no new version: by default, of the source files of the package (or module
        file) its class is defined in."""
        return code_fingerprint(type(self))


_registry: dict[str, Plugin] = {}


def register_plugin(plugin: Plugin) -> Plugin:
    _registry[plugin.name] = plugin
    return plugin


def unregister_plugin(name: str) -> None:
    _registry.pop(name, None)


@functools.lru_cache(maxsize=1)
def _load_entry_points() -> None:
    for entry in sorted(entry_points(group="kernelkit.plugins"), key=lambda e: e.name):
        plugin = entry.load()
        register_plugin(plugin() if isinstance(plugin, type) else plugin)


def registered_plugins() -> list[Plugin]:
    _load_entry_points()
    return list(_registry.values())


def plugins_for(module: Module) -> list[Plugin]:
    """The plugins whose markers the module calls, by name; a marker no plugin handles
    is a CompileError at the call."""
    markers = {}
    for function in module.functions.values():
        for op in function.ops():
            if op.definition is INTRINSIC:
                markers.setdefault(op.attrs["name"], (function, op))
    if not markers:   # most kernels: no need to look for installed plugins
        return []
    by_marker = {marker: plugin for plugin in registered_plugins()
                 for marker in plugin.markers}
    active = []
    for marker, (function, op) in markers.items():
        if marker not in by_marker:
            loc = op.loc
            raise CompileError(
                f"'{marker}' is a plugin's marker, but no registered plugin handles it",
                kernel=module.kernel.name, function=function.name,
                file=loc.file if loc else None, line=loc.line if loc else None,
                source_line=linecache.getline(loc.file, loc.line) if loc else None,
                hint="register the plugin (kernelkit.compiler.plugins.register_plugin, or "
                     "the 'kernelkit.plugins' entry points) before compiling")
        if by_marker[marker] not in active:
            active.append(by_marker[marker])
    return sorted(active, key=lambda plugin: plugin.name)
