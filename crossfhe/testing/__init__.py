"""crossfhe.testing."""
