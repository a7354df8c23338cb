"""crossfhe.core."""
