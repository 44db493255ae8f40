"""Array type aliases for annotations: public entry points accept NumPy arrays too."""

import jax
import numpy as np

__all__ = ["ArrayLike"]

ArrayLike = jax.Array | np.ndarray
