"""The AD compiler plugin (`plugin.py`) and what it is made of: the analysis of which
values carry derivatives (`activity.py`), the derivative rules of arithmetic and math
(`derivatives.py`), forward mode (`forward.py`), reverse mode's reverse kernel
(`reverse.py`) and augmented forward kernel (`augmented.py`) with their tape
(`stacks.py`, sized in `sizing.py`), the work-item positions and group sums they build
(`positions.py`, `group_sum.py`), AD inside kernels (`device.py`) and custom rules
(`custom.py`). It works on kernelkit IR and knows no backend."""
