"""crossfhe.cli."""
