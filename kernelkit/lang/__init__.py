"""The user-facing kernel language: `@kernel`, index kinds, intrinsic stubs, math twins."""
from . import intrinsics, math
