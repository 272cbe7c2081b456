"""Launch arguments: the data pointer of any NumPy array (views, offsets, negative
strides, empty arrays) as the array interface gives it, and the packed record layout."""
import numpy as np
import pytest

from kernelkit.ir import types as T
from kernelkit.runtime.arguments import ArgumentLayout, data_pointer

BASE = np.arange(60, dtype=np.float32).reshape(6, 10)


@pytest.mark.parametrize("array", [BASE, BASE[2:], BASE[:, 3:7], BASE[::-1, ::-2], BASE.T,
                                   np.zeros(0), np.ones(3, np.int8)[1:], np.float64(2.0) *
                                   np.ones((2, 3, 4))], ids=range(8))
def test_data_pointer_is_the_address_of_the_first_element(array):
    assert data_pointer(array) == array.__array_interface__["data"][0]


def test_record_layout_puts_the_header_then_each_argument_in_eight_byte_slots():
    layout = ArgumentLayout((T.ArrayType(T.float32, 2, "A"), T.int32, T.float64), ndim=2)
    offsets = [field.offset for field in layout.fields]
    assert offsets == [40, 40 + 8 * 5, 40 + 8 * 6]       # header: 2 + 2 + 1 slots
    assert layout.size == layout.struct.size == 40 + 8 * 7
