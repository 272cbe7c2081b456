"""enzyme_ext: automatic differentiation of kernelkit kernel launches, forward and
reverse, on every backend through one generic rule.

    from enzyme_ext import autodiff, Reverse, Duplicated, Active
    _, da, _ = autodiff(Reverse, saxpy(backend, 256),
                        Duplicated(y, dy), Active(2.0), Duplicated(x, dx), ndrange=n)

`autodiff` also differentiates a Python program that launches kernels (its launches are
recorded and differentiated one by one, `program.py`), and `gradient(program)` gives the
gradient of a program that returns a loss, as `jax.grad` does.

Everything backend-specific reaches it through `compiler_job_from_backend(backend, fn,
argtypes)`, which each backend registers; the derivative kernels are made by a compiler
plugin on kernelkit's IR (`enzyme_ext.transform`)."""
from .checkpointing import checkpoint
from .activities import Active, Const, Duplicated, DuplicatedNoNeed, Forward, Reverse, ReverseSplit
from .custom import custom_jvp, custom_vjp
from .jobs import compiler_job_from_backend
from .program import gradient
from .rules import autodiff, autodiff_thunk
from .tape import Tape, tape_type

__all__ = ["autodiff", "autodiff_thunk", "Forward", "Reverse", "ReverseSplit", "Const",
           "Active", "Duplicated", "DuplicatedNoNeed", "compiler_job_from_backend",
           "tape_type", "custom_vjp", "custom_jvp", "Tape", "gradient", "checkpoint"]
