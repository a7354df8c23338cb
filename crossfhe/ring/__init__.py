"""crossfhe.ring."""
