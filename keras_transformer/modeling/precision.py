"""Which Keras dtype policy a model computes in.

`resolve_precision("auto")` reads the hardware: mixed_bfloat16 where
bfloat16 matmuls are native, float32 elsewhere. Only training resolves
"auto"; it records the policy it used in the run folder, and everything
that restores the run (translation, scoring, export) builds the model in
that recorded policy unless told otherwise, so one run computes the same
on every machine.
"""

import tensorflow as tf

PRECISIONS = ("auto", "float32", "mixed_bfloat16", "mixed_float16")


def resolve_precision(precision, cpu_flags=None, gpu_capabilities=None):
    """The dtype policy for --precision; "auto" picks mixed_bfloat16 where
    bfloat16 matmuls are native (CPU flags avx512_bf16 or amx_bf16, or every
    GPU at compute capability 8.0 or above), and float32 elsewhere.

    cpu_flags / gpu_capabilities: for tests; read from the machine by default.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"Unknown precision {precision!r}; expected one of {list(PRECISIONS)}.")
    if precision != "auto":
        return precision
    if gpu_capabilities is None:
        gpu_capabilities = [
            tf.config.experimental.get_device_details(gpu).get("compute_capability", (0, 0))
            for gpu in tf.config.list_physical_devices("GPU")
        ]
    if gpu_capabilities:
        return "mixed_bfloat16" if min(gpu_capabilities) >= (8, 0) else "float32"
    if cpu_flags is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpu_flags = f.read()
        except OSError:
            cpu_flags = ""
    native = "avx512_bf16" in cpu_flags or "amx_bf16" in cpu_flags
    return "mixed_bfloat16" if native else "float32"
