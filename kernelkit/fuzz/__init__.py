"""A differential fuzzer for kernelkit: random valid kernels, run on every backend and
compared with a plain-Python reference that executes the same source per work-item
with NumPy scalars.

- `generator`: one seed -> one test case (kernel module source, arguments, geometry).
- `scalars`: the NumPy/Python scalar rules (NEP 50) the generator types expressions by.
- `emulation`: the `kk` and `math` the reference's copy of the kernel runs against.
- `reference`: runs a case's work-items, work-group by work-group, barriers included.
- `subgroups`: what each subgroup operation gives a group's work-items, in NumPy.
- `runner`: compiles and launches a case on each backend and classifies the outcome.
- `shrink`: reduces a failing case while the same failure persists.
- `__main__`: the command line (`python -m kernelkit.fuzz --help`), with worker
  processes so that a crash or hang is one seed's failure.

The fuzzer is a client of the language: it knows nothing of the compiler's inside."""
