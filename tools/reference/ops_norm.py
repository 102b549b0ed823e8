"""Golden fixture for batch_norm and layer_norm: writes tests/fixtures/ops_norm.safetensors,
read by tests/ops/test_norm.cpp. Batch-norm cases also store the running statistics before
(<case>.rm0, .rv0) and after (<case>.rm1, .rv1) the call.

    /usr/bin/python3 tools/reference/ops_norm.py
"""

import os

import torch
import torch.nn.functional as F

from golden import Fixture, seed_for


def main():
    fx = Fixture()
    extra = []

    def bn_case(name, shape, affine, training, momentum=0.1, dtype=torch.float64):
        gen = torch.Generator().manual_seed(seed_for(name))
        C = shape[1]
        x = torch.randn(shape, generator=gen, dtype=dtype) * 2 + 0.5
        rm = torch.randn(C, generator=gen, dtype=dtype)
        rv = torch.rand(C, generator=gen, dtype=dtype) + 0.5
        extra.extend([(f"{name}.rm0", rm.clone()), (f"{name}.rv0", rv.clone())])
        inputs = [x]
        if affine:
            inputs += [torch.randn(C, generator=gen, dtype=dtype), torch.randn(C, generator=gen, dtype=dtype)]

        def fn(x, *wb):
            w, b = wb if wb else (None, None)
            return F.batch_norm(x, rm, rv, w, b, training=training, momentum=momentum, eps=1e-5)

        fx.case(name, fn, inputs, gen)
        extra.extend([(f"{name}.rm1", rm.clone()), (f"{name}.rv1", rv.clone())])

    bn_case("bn_train", (4, 3, 5, 6), True, True)
    bn_case("bn_train_momentum", (2, 5, 3, 4), True, True, momentum=0.3)
    bn_case("bn_train_2d", (7, 4), True, True)
    bn_case("bn_train_noaffine", (3, 2, 1, 9), False, True)
    bn_case("bn_eval", (2, 3, 4, 5), True, False)
    bn_case("bn_f32", (8, 6, 4, 9), True, True, dtype=torch.float32)

    def ln_case(name, shape, nshape, affine, dtype=torch.float64):
        gen = torch.Generator().manual_seed(seed_for(name))
        inputs = [torch.randn(shape, generator=gen, dtype=dtype) * 3 + 1]
        if affine:
            inputs += [torch.randn(nshape, generator=gen, dtype=dtype), torch.randn(nshape, generator=gen, dtype=dtype)]
        fx.case(name, lambda x, *wb: F.layer_norm(x, nshape, *(wb if wb else (None, None)), eps=1e-5), inputs, gen)

    ln_case("ln_basic", (3, 5, 8), (8,), True)
    ln_case("ln_two_dims", (2, 3, 4, 5), (4, 5), True)
    ln_case("ln_noaffine", (6, 7), (7,), False)
    ln_case("ln_one_row", (1, 1, 16), (16,), True)
    ln_case("ln_f32", (4, 32, 64), (64,), True, dtype=torch.float32)

    fx.tensors.extend(extra)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "ops_norm.safetensors")
    fx.write(path, "tools/reference/ops_norm.py")
    print(f"{len(fx.case_names)} cases, {os.path.getsize(path)} bytes -> {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
