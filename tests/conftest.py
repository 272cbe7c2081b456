"""Shared fixtures: every kernel test runs once per available backend."""
import pytest

import kernelkit as kk


def _available_backends():
    params = []
    for name in kk.backend_names():
        reason = kk.backend_unavailable_reason(name)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param(name, id=name, marks=marks))
    return params


@pytest.fixture(params=_available_backends())
def backend(request):
    """A backend instance; the test runs once for each installed backend."""
    return kk.make_backend(request.param)
