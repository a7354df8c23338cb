"""TFHE fixtures: keys of the insecure test presets, made once per session from fixed seeds."""

import pytest

from crossfhe import testing
from crossfhe.tfhe import ops


@pytest.fixture(scope="session")
def keys_p2():
    return ops.keygen(testing.INSECURE_TFHE_P2, b"tfhe-test-p2".ljust(32, b"\0"))


@pytest.fixture(scope="session")
def keys_p4():
    return ops.keygen(testing.INSECURE_TFHE_P4, b"tfhe-test-p4".ljust(32, b"\0"))


@pytest.fixture(scope="session")
def keys_p6():
    return ops.keygen(testing.INSECURE_TFHE_P6, b"tfhe-test-p6".ljust(32, b"\0"))


@pytest.fixture(scope="session")
def keys_p4_ext():
    return ops.keygen(testing.INSECURE_TFHE_P4_EXT, b"tfhe-test-p4-ext".ljust(32, b"\0"))


@pytest.fixture(scope="session")
def keys_p6_ext():
    return ops.keygen(testing.INSECURE_TFHE_P6_EXT, b"tfhe-test-p6-ext".ljust(32, b"\0"))


@pytest.fixture(scope="session")
def keys_g2():
    """INSECURE_TFHE_P4 with the key's bits two at a time (test_grouping, test_native)."""
    return ops.keygen(testing.INSECURE_TFHE_P4_G2, b"tfhe-test-p4".ljust(32, b"\0"))


@pytest.fixture(scope="session")
def keys_ext_g3():
    """INSECURE_TFHE_P4_EXT with the key's bits three at a time (test_grouping, test_native)."""
    return ops.keygen(testing.INSECURE_TFHE_P4_EXT_G3, b"tfhe-test-p4-ext".ljust(32, b"\0"))
