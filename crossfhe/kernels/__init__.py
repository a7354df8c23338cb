"""crossfhe.kernels."""
