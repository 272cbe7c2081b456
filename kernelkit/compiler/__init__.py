"""The compiler: jobs, targets, the generic driver and LLVM lowering."""
from .job import CompilerConfig, CompilerJob, FunctionSource, function_source
from .target import Target

__all__ = ["CompilerConfig", "CompilerJob", "FunctionSource", "function_source", "Target"]
