"""Launching a kernel once for a test: its output array as NumPy sees it afterwards."""
import kernelkit as kk


def run(backend, kernel, out, *args, ndrange, workgroupsize):
    """`out` after one launch of `kernel(backend, workgroupsize)(out, *args)` over
    `ndrange`, synchronized."""
    result = kk.to_backend(backend, out)
    kernel(backend, workgroupsize)(result, *args, ndrange=ndrange)
    kk.synchronize(backend)
    return kk.to_numpy(result)
