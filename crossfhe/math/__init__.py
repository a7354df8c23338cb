"""crossfhe.math."""
