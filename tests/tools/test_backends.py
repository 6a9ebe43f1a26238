"""zoo.tools.backends without a GPU: what a failure names, which zoo intrinsics a step reaches, and the table
that docs/numba-cuda-mlir.md is generated from (fed a results file made up here, never stored)."""

import json

import pytest

from zoo.bench import results
from zoo.tools import backends


def test_a_failure_names_the_intrinsic_or_api():
    typing = (
        "Failed in cuda_mlir mode pipeline (step: nopython frontend)\nUntyped global name 'load_float4': Cannot "
        "determine Numba type of <class 'numba.cuda.extending._Intrinsic'>\n\nFile \"v04.py\", line 30"
    )
    assert backends.cause(typing) == "load_float4 (a numba-cuda intrinsic)"
    missing = "Unknown attribute 'syncthreads_or' of type Module(<module 'numba_cuda_mlir.cuda' from '...'>)"
    assert backends.cause(missing) == "numba_cuda_mlir.cuda.syncthreads_or (no such attribute)"
    assert backends.cause("CudaAPIError: [700] Call to cuCtxSynchronize results in CUDA_ERROR_ILLEGAL_ADDRESS\nat") == (
        "CudaAPIError: [700] Call to cuCtxSynchronize results in CUDA_ERROR_ILLEGAL_ADDRESS"
    )
    unlowered = (
        "numba_cuda_mlir.errors.UserFacingInternalCompilerError: This line in your program has triggered a compiler "
        "bug:\nin place of builtins.NotImplementedError: NotImplemented lowering call to <class "
        "'numba_cuda_mlir.numba_cuda.stubs.threadfence'>\n  function: threadfence"
    )
    assert backends.cause(unlowered) == "cuda.threadfence (not lowered)"
    cast = (
        'UserFacingInternalCompilerError: This line in your program has triggered a compiler bug:\nFile "v02.py", '
        "line 53:\n@jit\nin place of builtins.NotImplementedError: Type cast not implemented: f16 to none."
    )
    assert backends.cause(cast) == "builtins.NotImplementedError: Type cast not implemented: f16 to none."
    invalid = (
        "UserFacingInternalCompilerError: bug\nin place of InternalCompilerError: Invalid MLIR module: Verification "
        "failed:\nerror: \"-\":16:12: 'memref.get_global' op 'static_shared_memory_128' does not reference a valid "
        "global memref\n note: x"
    )
    assert backends.cause(invalid) == (
        "invalid MLIR: 'memref.get_global' op 'static_shared_memory' does not reference a valid global memref"
    )
    pipeline = (
        "TypingError: Failed in mlir mode pipeline (step: mlir frontend)\nFailed in untyped mode pipeline (step: x)\n"
        'Calling a closure with *args is unsupported.\nFile "zoo/device/jit.py", line 320:'
    )
    assert backends.cause(pipeline) == "Calling a closure with *args is unsupported."
    assert backends.cause("CudaSupportError: Error at driver init:\nCUDA driver library cannot be found.\nmore") == (
        "CudaSupportError: Error at driver init: CUDA driver library cannot be found."
    )


def test_compile_errors_are_told_from_run_errors():
    class TypingError(Exception):
        pass

    class CudaAPIError(Exception):
        pass

    CudaAPIError.__module__ = "numba_cuda_mlir.numba_cuda.cudadrv.driver"
    assert backends.stage(TypingError()) == "compile"
    assert backends.stage(CudaAPIError()) == "run"
    assert backends.stage(ValueError()) == "run"


def _step_file(family, number):
    return next((backends.ROOT / "zoo" / "kernels" / family).glob(f"{number}_*.py"))


def test_which_zoo_intrinsics_a_step_reaches():
    assert backends.intrinsics_used(_step_file("vector_add", "v01")) == set()
    assert "wgmma" in backends.intrinsics_used(_step_file("hgemm", "v08"))
    assert "constant" in backends.intrinsics_used(_step_file("stencil", "v02"))
    assert "memory" in backends.intrinsics_used(_step_file("elementwise", "v04"))


def _step(device_ms=None, host_us=None, **more):
    return {"correct": True, "device_ms": device_ms, "host_us": host_us, **more}


MADE_UP = {
    "device": {"name": "a GPU"},
    "versions": {"numba-cuda-mlir": "0.6.0", "numba-cuda": "0.30.4"},
    "commit": "abc1234",
    "updated": "2026-12-07T00:00:00+00:00",
    "seconds": 1.0,
    "steps": {
        "f": {
            "v01_plain": {
                "mlir": _step(1.02, 5.0),
                "lean": _step(1.0, 6.0),
                "numba": _step(1.0, 30.0),
                "intrinsics": [],
            },
            "v02_wide": {
                "mlir": {
                    "correct": False,
                    "error": "x",
                    "cause": "load_float4 (a numba-cuda intrinsic)",
                    "stage": "compile",
                },
                "lean": _step(0.5, 6.0),
                "numba": _step(0.5, 30.0),
                "intrinsics": ["memory"],
            },
            "v03_two_gpus": {"mlir": {"skipped": "needs two GPUs"}, "lean": {}, "numba": {}, "intrinsics": []},
        }
    },
}


def test_the_table_counts_what_ran():
    text = backends.table(MADE_UP)
    assert "**1 of 2 steps run correct on numba-cuda-mlir (50%)**; of the 1 that use no zoo intrinsic, 1." in text
    assert "within 5% of numba-cuda's (lean launch): 1 of the 1 timed" in text
    assert "at most the lean path's: 1 of the 1 timed" in text
    assert "| f | v02_wide | no | fails |" in text and "load_float4 (a numba-cuda intrinsic)" in text
    assert "v03_two_gpus" not in text


def test_the_doc_is_rewritten_between_its_markers_only(tmp_path, monkeypatch):
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n{backends.BEGIN}\nold\n{backends.END}\nafter\n")
    made_up = tmp_path / "mlir-a-gpu.json"
    made_up.write_text(json.dumps(MADE_UP))
    monkeypatch.setattr(backends, "DOC", doc)
    backends.write_table([made_up])
    text = doc.read_text()
    assert text.startswith("before\n") and text.endswith(f"{backends.END}\nafter\n") and "old" not in text
    assert "### a-gpu" in text and "| f | v01_plain | yes | correct | 1.02 |" in text


COMPILED = {
    "backend": "numba-cuda-mlir",
    "version": "0.6.0",
    "cc": [9, 0],
    "commit": "abc1234",
    "steps": {
        "f": {
            "v01_plain": {"kernels": 1},
            "v02_wide": {"error": "x", "cause": "load_half8 (a numba-cuda intrinsic)", "stage": "compile"},
            "v03_symbol": {"error": "y", "cause": "CudaSupportError: a | b", "stage": "driver"},
        }
    },
}


def test_the_compile_survey_counts_and_names_what_failed(tmp_path, monkeypatch):
    doc = tmp_path / "doc.md"
    doc.write_text(f"{backends.BEGIN}\nkept\n{backends.END}\n{backends.COMPILE_BEGIN}\nold\n{backends.COMPILE_END}\n")
    monkeypatch.setattr(backends, "DOC", doc)
    backends._rewrite(backends.COMPILE_BEGIN, backends.COMPILE_END, backends.compile_table(COMPILED))
    text = doc.read_text()
    assert "at commit abc1234 by numba-cuda-mlir 0.6.0: **1 of 3 steps compile to PTX**" in text
    assert "| f | v02_wide | compile | load_half8 (a numba-cuda intrinsic) |" in text
    assert "| f | v03_symbol | driver | CudaSupportError: a / b |" in text  # a bar would split the row
    assert "v01_plain" not in text and "kept" in text and "old" not in text


def test_the_survey_file_is_no_gpus_results(tmp_path, monkeypatch):
    (tmp_path / "nvidia-h100.json").write_text("{}")
    (tmp_path / "mlir-nvidia-h100.json").write_text("{}")
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    assert list(results.load_all()) == ["nvidia-h100"]


@pytest.mark.parametrize("name", ["run", "table", "compile"])
def test_the_commands_exist(name, capsys):
    with pytest.raises(SystemExit):
        backends.main([name, "--help"])
    assert "usage" in capsys.readouterr().out


def test_the_compile_survey_is_saved_only_whole_and_under_numba_cuda_mlir(capsys):
    with pytest.raises(SystemExit):  # the simulator's backend is numba-cuda
        backends.main(["compile", "--save"])
    assert "--save records every step under numba-cuda-mlir" in capsys.readouterr().err
