"""crossfhe.ml with PyTorch: modules exported through ONNX (an MLP, a small CNN, BatchNorm) read as PyTorch computes
them, compiled to TFHE with outputs equal to the quantized model's, and quantization-aware training
(:mod:`crossfhe.ml.qat`) that leaves a network more accurate once crossfhe quantizes it."""

import io

import numpy as np
import pytest

# PyTorch is the optional `torch` extra (hundreds of MB with its CUDA libraries), not part of the dev install the CI
# uses; these tests run where it is installed (pip install "crossfhe[torch]")
torch = pytest.importorskip("torch", reason="PyTorch is an optional extra (pip install 'crossfhe[torch]')")

import crossfhe.ml as ml  # noqa: E402
from crossfhe.ml import tfhe as tfhe_ml  # noqa: E402
from crossfhe.ml.qat import FakeQuant, QuantLinear  # noqa: E402
from crossfhe.tfhe import presets  # noqa: E402

SEED = bytes(range(32))


def _onnx(module, x):
    buf = io.BytesIO()
    module.eval()
    with torch.no_grad():
        torch.onnx.export(module, (x[:1],), buf, opset_version=20, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "b"}, "y": {0: "b"}}, dynamo=False)
    return buf.getvalue()


def _modules():
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(10, 12), torch.nn.GELU(), torch.nn.Linear(12, 4))
    cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 3, 3, stride=2, padding=1), torch.nn.BatchNorm2d(3), torch.nn.ReLU(),
                              torch.nn.AvgPool2d(2), torch.nn.Flatten(), torch.nn.Linear(12, 5))
    with torch.no_grad():  # a BatchNorm with statistics of its own, not the identity it starts as
        cnn[1].running_mean.uniform_(-0.5, 0.5)
        cnn[1].running_var.uniform_(0.5, 2.0)
        cnn[1].weight.uniform_(0.5, 1.5)
    return {"mlp": (mlp, torch.randn(32, 10)), "cnn_batchnorm": (cnn, torch.randn(32, 1, 8, 8))}


@pytest.mark.parametrize("name", ["mlp", "cnn_batchnorm"])
def test_exported_modules_read_as_pytorch_computes_them(name):
    module, x = _modules()[name]
    net = ml.read_onnx(_onnx(module, x))
    with torch.no_grad():
        ref = module(x).numpy()
    assert np.abs(net.forward(x.numpy()) - ref).max() < 1e-4  # float32 in PyTorch, float64 here


def test_compile_torch_on_tfhe_decrypts_to_the_quantized_model():
    module, x = _modules()["cnn_batchnorm"]
    compiled = ml.compile_torch(module, x, scheme="tfhe", params=presets.P6, check=2, seed=SEED)
    assert compiled.report.exact is True
    assert np.array_equal(compiled.predict(x[:2].numpy()), compiled.predict_approximated(x[:2].numpy()))


def _digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    x, y = (d.data / 16).astype(np.float32), d.target
    perm = np.random.default_rng(0).permutation(len(x))
    return x[perm[:1400]], y[perm[:1400]], x[perm[1400:]], y[perm[1400:]]


def _train(net, x, y, epochs, lr):
    torch.manual_seed(0)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    loss = torch.nn.CrossEntropyLoss()
    xs, ys = torch.tensor(x), torch.tensor(y)
    gen = torch.Generator().manual_seed(0)
    net.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(xs), generator=gen).split(64):
            opt.zero_grad()
            loss(net(xs[idx]), ys[idx]).backward()
            opt.step()
    return net.eval()


def test_quantization_aware_training_beats_post_training_quantization():
    x, y, xt, yt = _digits()
    p, in_bits, act_bits = presets.P6, 2, 3

    def quantized_accuracy(module):
        net = ml.read_onnx(_onnx(module, torch.tensor(x)))
        qn = tfhe_ml.quantize(net, x.astype(np.float64), params=p, input_bits=in_bits, act_bits=act_bits)
        return float(np.mean(qn.forward(xt).argmax(1) == yt))

    torch.manual_seed(0)
    plain = _train(torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10)), x, y, 30,
                   1e-2)
    f1, f2 = FakeQuant(in_bits), FakeQuant(act_bits)
    qat = torch.nn.Sequential(f1, QuantLinear(64, 16, inputs=f1, message_bits=p.message_bits), torch.nn.ReLU(), f2,
                              QuantLinear(16, 10, inputs=f2, message_bits=p.message_bits, lookup=False))
    with torch.no_grad():  # start from the float network, then fine-tune through the quantization
        qat[1].weight.copy_(plain[0].weight), qat[1].bias.copy_(plain[0].bias)
        qat[4].weight.copy_(plain[2].weight), qat[4].bias.copy_(plain[2].bias)
    _train(qat, x, y, 20, 3e-3)
    ptq, aware = quantized_accuracy(plain), quantized_accuracy(qat)
    # measured here: 0.86 after post-training quantization, 0.94 after fine-tuning through it (397 test digits);
    # the margin asked for is half that gap
    assert aware > ptq + 0.04, (ptq, aware)
    # the fake-quantized network in PyTorch is close to the model crossfhe compiles from its export
    with torch.no_grad():
        fq = qat(torch.tensor(xt)).numpy().argmax(1)
    net = ml.read_onnx(_onnx(qat, torch.tensor(x)))
    qn = tfhe_ml.quantize(net, x.astype(np.float64), params=p, input_bits=in_bits, act_bits=act_bits)
    assert np.mean(qn.forward(xt).argmax(1) == fq) > 0.9


def test_quant_linear_needs_its_input_quantizer():
    with pytest.raises(TypeError, match="FakeQuant module its inputs come from"):
        QuantLinear(4, 2, inputs=None)
    with pytest.raises(ValueError, match="bits must be in"):
        FakeQuant(12)
