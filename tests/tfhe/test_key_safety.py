"""TFHE keys in transit: the client key refuses pickling, public objects pickle without it, and every
ciphertext carries its key pair's id, which operations check."""

import copy
import pickle

import numpy as np
import pytest

from crossfhe import io, testing
from crossfhe.errors import KeyMismatchError, ParameterError, SecretMaterialError
from crossfhe.tfhe import ops

P = testing.INSECURE_TFHE_P2


def test_client_key_refuses_pickle_server_key_carries_no_secret(keys_p2):
    ck, sk = keys_p2
    with pytest.raises(SecretMaterialError, match="crossfhe.io.tfhe.save_secret_key"):
        pickle.dumps(ck)
    assert copy.deepcopy(ck) is ck
    patterns = [np.asarray(ck.lwe_key).tobytes(), np.asarray(ck.glwe_key).tobytes()]
    ct = ops.encrypt(ck, np.arange(4))
    for obj in (sk, ct, [sk, ct], ck.params):
        blob = pickle.dumps(obj)
        assert all(p not in blob for p in patterns)
    assert np.array_equal(ops.decrypt(ck, pickle.loads(pickle.dumps(ct))), np.arange(4))


def test_a_pickled_server_key_bootstraps_correctly(keys_p4):
    # regression: the prepared complex128 Fourier key came back as complex64 from a pickle (JAX's default precision)
    # and bootstrapped to wrong messages; the prepared forms now stay behind and are made again when it is loaded
    ck, sk = keys_p4
    assert sk.product is ops.FFTProduct and sk.prepared.rest.dtype == np.complex128
    back = pickle.loads(pickle.dumps(sk))
    assert back.prepared is not None and back.prepared is not sk.prepared and back.product is sk.product
    assert back.prepared.rest.dtype == np.complex128
    m = np.arange(16)
    np.testing.assert_array_equal(ops.decrypt(ck, ops.pbs(back, ops.encrypt(ck, m), lambda v: (3 * v + 1) % 16)),
                                  (3 * m + 1) % 16)


@pytest.fixture(scope="module")
def stranger():
    return ops.keygen(P, b"tfhe-test-stranger".ljust(32, b"\0"))


def test_key_ids_are_checked(keys_p2, stranger):
    ck, sk = keys_p2
    ck2, sk2 = stranger
    assert ck.key_id == sk.key_id and ck2.key_id == sk2.key_id and ck.key_id != ck2.key_id
    x, y = ops.encrypt(ck, np.arange(4)), ops.encrypt(ck2, np.arange(4) % 3)
    assert x.key_id == ck.key_id and ops.pbs(sk, x, lambda m: m).key_id == ck.key_id
    for op in (lambda: ops.add(x, y), lambda: ops.sub(x, y), lambda: ops.decrypt(ck2, x),
               lambda: ops.pbs(sk2, x, lambda m: m), lambda: ops.keyswitch(sk2, x),
               lambda: ops.check_compatible(ck, sk2)):
        with pytest.raises(KeyMismatchError, match="different key pairs"):
            op()
    # A trivial (keyless) ciphertext combines with any key pair's.
    t = ops.trivial(P, np.ones(4, dtype=np.int64))
    assert t.key_id is None and np.array_equal(ops.decrypt(ck2, ops.add(y, t)), np.arange(4) % 3 + 1)
    assert ops.mul_scalar(P, ops.negate(ops.add_scalar(P, x, 1)), 3).key_id == ck.key_id
    with pytest.raises(ParameterError, match="differ in parameters"):
        ops.check_compatible(ck, ops.keygen(testing.INSECURE_TFHE_P4, bytes(32))[1])


def test_key_ids_survive_serialization(keys_p2):
    ck, sk = keys_p2
    x = ops.encrypt(ck, np.arange(4))
    assert io.tfhe.loads(io.tfhe.dumps(x, params=P), params=P).key_id == ck.key_id
    assert io.tfhe.loads_secret_key(io.tfhe.dumps_secret_key(ck)).key_id == ck.key_id
    assert io.tfhe.loads(io.tfhe.dumps(sk)).key_id == sk.key_id
