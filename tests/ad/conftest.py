"""The AD suite runs its CPU launches under the race detector (`kk.CPU(debug="races")`,
backends/cpu/races.py): a derivative kernel whose work-items update one adjoint element
without an atomic or a barrier between them fails the test that launched it, whatever
the order its work-items happened to run in."""
import pytest

import kernelkit as kk


@pytest.fixture
def backend(backend):
    if isinstance(backend, kk.CPU) and not backend.races:
        return kk.CPU(debug="races")
    return backend
