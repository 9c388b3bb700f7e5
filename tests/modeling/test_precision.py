import pytest

from keras_transformer.modeling.precision import resolve_precision


def test_auto_precision_uses_bfloat16_only_where_it_is_native():
    assert resolve_precision("float32") == "float32"
    assert resolve_precision("auto", cpu_flags="fpu avx2 avx512f", gpu_capabilities=[]) == "float32"
    assert resolve_precision("auto", cpu_flags="avx512f avx512_bf16", gpu_capabilities=[]) == "mixed_bfloat16"
    assert resolve_precision("auto", cpu_flags="amx_bf16", gpu_capabilities=[]) == "mixed_bfloat16"
    assert resolve_precision("auto", cpu_flags="", gpu_capabilities=[(8, 0), (9, 0)]) == "mixed_bfloat16"
    assert resolve_precision("auto", cpu_flags="avx512_bf16", gpu_capabilities=[(7, 0)]) == "float32"


def test_an_unknown_precision_is_named():
    with pytest.raises(ValueError, match="Unknown precision 'fp8'"):
        resolve_precision("fp8")
