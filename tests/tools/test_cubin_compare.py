"""tools/cubin_compare.py: its SASS counts (instructions, the hot loop, global loads and
stores, atomics, registers, subroutines ptxas calls), and the grid-stride sum's cubin
beside nvcc's: kernelkit's loop issues the loads of several trips together, as nvcc's
does. The comparison is skipped, with the reason, where nvcc or nvdisasm is missing."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import cubin_compare as tool  # noqa: E402

DISASSEMBLY = """
	.section	.nv.info.k,"",@"SHT_CUDA_INFO"
	//----- nvinfo : EIATTR_REGCOUNT
	.align		4
        /*0000*/ 	.byte	0x04, 0x2f
        /*0002*/ 	.short	(.L_1 - .L_0)
	.align		4
.L_0:
        /*0004*/ 	.word	index@(k)
        /*0008*/ 	.word	0x00000018
	.section	.text.__cuda_sm20_div_u64,"ax",@progbits
__cuda_sm20_div_u64:
        /*0000*/                   IMAD R0, R1, R2, RZ ;
        /*0010*/                   RET.ABS.NODEC R20 0x0 ;
	.section	.text.k,"ax",@progbits
	.sectionflags	@"SHF_BARRIERS=1"
k:
        /*0000*/                   S2R R0, SR_TID.X ;
.L_x_1:
        /*0010*/                   LDG.E.CONSTANT R2, desc[UR4][R4.64] ;
        /*0020*/                   LDG.E.CONSTANT R3, desc[UR4][R6.64] ;
        /*0030*/               @P0 BRA `(.L_x_1) ;
.L_x_2:
        /*0040*/                   LDG.E R3, desc[UR4][R6.64] ;
        /*0050*/              @!P1 BRA `(.L_x_2) ;
        /*0060*/                   CALL.ABS.NOINC `(__cuda_sm20_div_u64) ;
        /*0070*/                   STG.E desc[UR4][R4.64], R2 ;
        /*0080*/                   RED.E.ADD.F32.FTZ.RN.STRONG.GPU desc[UR4][R4.64], R2 ;
        /*0090*/                   REDUX.SUM UR5, R2 ;
        /*00a0*/                   EXIT ;
.L_x_3:
        /*00b0*/                   BRA `(.L_x_3);
        /*00c0*/                   NOP;
"""


def test_sass_counts_take_in_called_subroutines_and_leave_out_the_padding():
    counts = tool.count_sass(DISASSEMBLY, "k")
    assert counts.instructions == 11 + 2
    assert (counts.loads, counts.stores, counts.atomics, counts.registers) == (3, 1, 1, 24)
    # Of the two loops, the one with the most global loads.
    assert (counts.loop_instructions, counts.loop_loads) == (3, 2)


def test_a_function_the_cubin_does_not_hold_is_named():
    with pytest.raises(LookupError, match="'absent'"):
        tool.count_sass(DISASSEMBLY, "absent")


def test_the_grid_stride_sum_issues_several_trips_loads_together_as_nvcc_s_does(tmp_path):
    reason = tool.missing_tools()
    if reason is not None:
        pytest.skip(reason)
    comparison = tool.compare(tool.CASES["sum"], "sm_90", tmp_path)
    ours, nvcc = comparison.kernelkit, comparison.nvcc
    assert ours.names == ("kk_group_sums",) and nvcc.names == ("group_sums",)
    assert ours.stores == nvcc.stores == 1 and ours.atomics == nvcc.atomics == 0
    assert nvcc.loop_loads >= 2
    assert ours.loop_loads >= nvcc.loop_loads, (ours, nvcc)
    assert ours.registers > 0 and nvcc.registers > 0


def test_without_nvcc_or_nvdisasm_the_tool_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setattr(tool, "find_tool", lambda name: None)
    assert tool.main(["--case", "sum"]) == 2
    error = capsys.readouterr().err
    assert "missing nvcc" in error and "pip install nvidia-cuda-nvdisasm" in error
