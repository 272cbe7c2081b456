"""The frontend: a kernel's Python source -> typed SSA IR, for given argument types.

- `specialize`: the entry points (`translate_kernel`, `resolve_deferred`) and the loop that
  translates a function again when a variable's type widens.
- `translate`: `FunctionTranslator`, one function into one IR function; it combines
  - `statements`: statements, control flow and the SSA form they build;
  - `expressions`: expressions, and the typed building blocks over `ir.builder`;
  - `calls`: calls to the language's functions, device functions, markers, references.
- `intrinsics`: the table of the language's functions (`kk.*`, `math.*`, builtins);
  `vectors` and `scalars` add the functions of small vectors and the scalar functions
  of `lang.scalars` (`kk.erfinv`, `kk.smoothstep` ...) to it.
- `values`: what a name can stand for (an IR value, a compile-time Python object, or a
  dataclass argument's fields).
- `source`: reading a function's source, its closure, and naming syntax in errors.

The frontend knows the kernel language but no backend."""
