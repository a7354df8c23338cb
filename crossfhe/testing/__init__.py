"""Helpers for tests only (insecure presets, known-answer vectors, zero-noise samplers).

Never imported by the library itself (an import-linter contract checks it). Empty until the schemes
need shared test presets; the substrate's tests build their parameters with ``crossfhe.math.primes``.
"""
