"""Array type aliases for annotations, and the working float dtype."""

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["ArrayLike", "float_dtype"]

ArrayLike = jax.Array | np.ndarray


def float_dtype():
    """The working float dtype: float32, or float64 when ``jax_enable_x64`` is on."""
    return jnp.result_type(float)
