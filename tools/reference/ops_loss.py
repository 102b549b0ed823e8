"""Golden fixture for the dense-prediction losses (ops/loss.h): writes
tests/fixtures/ops_loss.safetensors, read by tests/ops/test_loss.cpp. Each case's parameters
are written in both places.

    /usr/bin/python3 tools/reference/ops_loss.py
"""

import os

import torch
import torch.nn.functional as F

from golden import Fixture, seed_for


def dice(p, t, m, eps=1e-6):
    # DBNet's dice loss over the whole batch.
    inter = (p * t * m).sum()
    union = (p * m).sum() + (t * m).sum() + eps
    return 1 - 2 * inter / union


def main():
    fx = Fixture()

    def case(name, fn, make):
        gen = torch.Generator().manual_seed(seed_for(name))
        fx.case(name, fn, make(gen), gen)

    logits = lambda g, *s: torch.randn(s, generator=g, dtype=torch.float64) * 6  # reaches |x| ~ 20
    unit = lambda g, *s: torch.rand(s, generator=g, dtype=torch.float64)
    binary = lambda g, *s: (torch.rand(s, generator=g, dtype=torch.float64) > 0.6).double()

    case("bce_mean", lambda x, t: F.binary_cross_entropy_with_logits(x, t),
         lambda g: [logits(g, 2, 1, 6, 7), unit(g, 2, 1, 6, 7)])
    # PyTorch's weight takes no gradient; the same loss written as weight * the elementwise
    # loss does (ocrt's weight is an ordinary factor, so it gets one).
    case("bce_sum_weight", lambda x, t, w: (F.binary_cross_entropy_with_logits(x, t, reduction="none") * w).sum(),
         lambda g: [logits(g, 3, 5, 4), binary(g, 3, 5, 4), unit(g, 3, 5, 4)])
    case("bce_none_broadcast_weight",
         lambda x, t, w: F.binary_cross_entropy_with_logits(x, t, reduction="none") * w,
         lambda g: [logits(g, 2, 3, 4), binary(g, 2, 3, 4), unit(g, 3, 1)])
    case("bce_extreme", lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="sum"),
         lambda g: [torch.tensor([-80.0, -30.0, -1e-3, 0.0, 1e-3, 30.0, 80.0], dtype=torch.float64),
                    torch.tensor([1.0, 0.0, 1.0, 0.5, 0.0, 1.0, 0.0], dtype=torch.float64)])
    case("dice_mask", lambda p, t, m: dice(p, t, m),
         lambda g: [unit(g, 2, 1, 8, 9), binary(g, 2, 1, 8, 9), binary(g, 2, 1, 8, 9)])
    case("dice_nomask", lambda p, t: dice(p, t, torch.ones_like(p)),
         lambda g: [unit(g, 1, 1, 5, 6), binary(g, 1, 1, 5, 6)])

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "ops_loss.safetensors")
    fx.write(path, "tools/reference/ops_loss.py")
    print(f"{os.path.getsize(path)} bytes -> {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
