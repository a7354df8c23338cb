"""Applications of HMVP (CHAM §V-B): matrix-vector Beaver triples for two-party computation
(:mod:`crossfhe.apps.beaver`, Delphi-style preprocessing and CHAM §II-F's shared input) and a training step
of vertically partitioned logistic regression between two data holders and an arbiter
(:mod:`crossfhe.apps.hetero_lr`, FATE's HeteroLR). Each party is an object holding only its own secrets;
the protocols run the parties in one process. Read each module's security caveats: semi-honest parties,
no noise flooding.

Encrypted machine learning on CKKS: :mod:`crossfhe.apps.helr` (logistic regression trained on encrypted data with
bootstrapping, ``LogisticRegression``) and :mod:`crossfhe.apps.cnn` (LoLa-MNIST and TenSEAL's network on encrypted
images, ``CNN``), on the bundled data sets of :mod:`crossfhe.apps.datasets`.

Encrypted inference on multi-bit TFHE, compiled as circuits (Taurus §VI; :mod:`crossfhe.apps.tfhe_ml`): decision
trees and gradient-boosted trees (:mod:`crossfhe.apps.trees`), k-nearest neighbours (:mod:`crossfhe.apps.knn`), a
quantized MLP, a small CNN and Zama's deep networks NN-20 / NN-50 with lookup-table activations
(:mod:`crossfhe.apps.qnn`): ``DecisionTree``, ``GradientBoostedTrees``, ``KNN``, ``QuantizedMLP``, ``QuantizedCNN``,
``QuantizedDeepNN``; GPT-2's causal attention, one head or a block of heads with softmax through lookups
(:mod:`crossfhe.apps.attention`: ``AttentionHead``, ``AttentionBlock``)."""

from crossfhe.apps import attention, beaver, cnn, datasets, helr, hetero_lr, knn, qnn, tfhe_ml, trees
from crossfhe.apps.attention import AttentionBlock, AttentionHead
from crossfhe.apps.beaver import Client, ClientTriple, Server, ServerTriple, generate_triples, shared_matvec
from crossfhe.apps.cnn import CNN
from crossfhe.apps.helr import LogisticRegression
from crossfhe.apps.hetero_lr import (
    LR_N4096,
    LR_N8192,
    Arbiter,
    FeatureHolder,
    FixedPoint,
    LabelHolder,
    StepTranscript,
    train_step,
)
from crossfhe.apps.knn import KNN
from crossfhe.apps.qnn import QuantizedCNN, QuantizedDeepNN, QuantizedMLP
from crossfhe.apps.trees import DecisionTree, GradientBoostedTrees

__all__ = [
    "LR_N4096",
    "LR_N8192",
    "CNN",
    "KNN",
    "AttentionBlock",
    "AttentionHead",
    "DecisionTree",
    "GradientBoostedTrees",
    "QuantizedCNN",
    "QuantizedDeepNN",
    "QuantizedMLP",
    "Arbiter",
    "LogisticRegression",
    "Client",
    "ClientTriple",
    "FeatureHolder",
    "FixedPoint",
    "LabelHolder",
    "Server",
    "ServerTriple",
    "StepTranscript",
    "attention",
    "beaver",
    "cnn",
    "datasets",
    "helr",
    "generate_triples",
    "hetero_lr",
    "knn",
    "qnn",
    "tfhe_ml",
    "trees",
    "shared_matvec",
    "train_step",
]
