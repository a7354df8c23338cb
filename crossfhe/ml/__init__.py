"""Models users bring, compiled to encrypted programs: ONNX files (and PyTorch modules, through ONNX) onto the one
front end (:mod:`crossfhe.api`).

* :func:`compile_onnx` / :func:`compile_torch`: a model and sample inputs -> :class:`CompiledModel` (``keygen``,
  ``encrypt``, ``run``, ``decrypt``, ``predict``, ``report``, ``export``).
* :func:`from_sklearn`: a fitted scikit-learn estimator (linear models, perceptrons, trees, forests, boosting) ->
  :class:`EncryptedEstimator` (``predict`` runs encrypted).
* :func:`load`: a model's exported file (``CompiledModel.export``) -> :class:`LoadedModel`, the same flow without
  the model or a compile (the client side travels in the file).
* :func:`read_onnx`: the model as crossfhe reads it (:class:`Network`: affine and non-linear layers in float64).

Two paths: CKKS (:mod:`crossfhe.ml.ckks`: activations replaced by Chebyshev polynomials on ranges calibrated on the
samples, one sample per ciphertext) and TFHE (:mod:`crossfhe.ml.tfhe`: post-training quantization, one lookup per
activation, outputs equal to the quantized model's). Needs the ``onnx`` package (``pip install "crossfhe[onnx]"``).
"""

from crossfhe.ml.client import LoadedModel, load
from crossfhe.ml.estimators import EncryptedEstimator, from_sklearn
from crossfhe.ml.model import CKKSModel, CompiledModel, TFHEModel, compile_network, compile_onnx, compile_torch
from crossfhe.ml.network import Affine, ModelError, Network, Nonlinear
from crossfhe.ml.onnx_reader import read_onnx

__all__ = ["Affine", "CKKSModel", "CompiledModel", "EncryptedEstimator", "LoadedModel", "ModelError", "Network",
           "Nonlinear", "TFHEModel", "compile_network", "compile_onnx", "compile_torch", "from_sklearn", "load",
           "read_onnx"]
