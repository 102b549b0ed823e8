"""Golden fixture for conv2d, the pooling ops and nearest upsampling: writes tests/fixtures/ops_conv.safetensors,
read by tests/ops/test_conv.cpp. Each case's parameters are written in both places.

    /usr/bin/python3 tools/reference/ops_conv.py
"""

import os

import torch
import torch.nn.functional as F

from golden import Fixture, seed_for


def randn(*shape, dtype=torch.float64):
    return ("randn", shape, dtype)


CASES = [
    # name, function, input specs
    ("conv_basic", lambda x, w, b: F.conv2d(x, w, b, padding=1), [randn(2, 3, 7, 9), randn(4, 3, 3, 3), randn(4)]),
    ("conv_nobias_stride", lambda x, w: F.conv2d(x, w, stride=(2, 3), padding=(1, 2)), [randn(1, 2, 9, 11), randn(5, 2, 3, 3)]),
    ("conv_dilation", lambda x, w, b: F.conv2d(x, w, b, padding=(2, 1), dilation=(2, 3)), [randn(2, 2, 8, 10), randn(3, 2, 3, 2), randn(3)]),
    ("conv_groups", lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2), [randn(2, 4, 6, 5), randn(6, 2, 3, 3), randn(6)]),
    ("conv_depthwise", lambda x, w: F.conv2d(x, w, stride=2, padding=1, groups=3), [randn(3, 3, 7, 7), randn(3, 1, 3, 3)]),
    ("conv_1x1", lambda x, w, b: F.conv2d(x, w, b), [randn(2, 5, 4, 6), randn(3, 5, 1, 1), randn(3)]),
    ("conv_k2_pad0", lambda x, w: F.conv2d(x, w), [randn(2, 4, 2, 9), randn(6, 4, 2, 2)]),
    ("conv_cin1", lambda x, w, b: F.conv2d(x, w, b, padding=1), [randn(3, 1, 8, 12), randn(4, 1, 3, 3), randn(4)]),
    ("conv_f32", lambda x, w, b: F.conv2d(x, w, b, padding=1), [randn(4, 6, 10, 13, dtype=torch.float32),
                                                               randn(8, 6, 3, 3, dtype=torch.float32),
                                                               randn(8, dtype=torch.float32)]),
    ("maxpool_2x2", lambda x: F.max_pool2d(x, 2, 2), [randn(2, 3, 8, 10)]),
    ("maxpool_crnn", lambda x: F.max_pool2d(x, (2, 2), (2, 1), (0, 1)), [randn(2, 3, 4, 9)]),
    ("maxpool_odd_ceil", lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), [randn(1, 2, 7, 8)]),
    ("maxpool_dilation", lambda x: F.max_pool2d(x, (2, 3), 1, (1, 1), dilation=(2, 1)), [randn(1, 2, 6, 7)]),
    ("avgpool_2x2", lambda x: F.avg_pool2d(x, 2), [randn(2, 3, 6, 9)]),
    ("avgpool_pad", lambda x: F.avg_pool2d(x, 3, 2, 1), [randn(1, 2, 7, 6)]),
    ("avgpool_pad_exclude_ceil", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), [randn(1, 2, 8, 7)]),
    ("adaptive_avg", lambda x: F.adaptive_avg_pool2d(x, (3, 4)), [randn(2, 3, 7, 10)]),
    ("adaptive_avg_height1", lambda x: F.adaptive_avg_pool2d(x, (1, 5)), [randn(2, 4, 3, 5)]),
    ("upsample_nearest_2x", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), [randn(2, 3, 4, 5)]),
    ("upsample_nearest_3x1", lambda x: F.interpolate(x, scale_factor=(3, 1), mode="nearest"), [randn(1, 2, 3, 4)]),
]


def make(spec, gen):
    kind, shape, dtype = spec
    return torch.randn(shape, generator=gen, dtype=dtype)


def main():
    fx = Fixture()
    for name, fn, specs in CASES:
        gen = torch.Generator().manual_seed(seed_for(name))
        fx.case(name, fn, [make(s, gen) for s in specs], gen)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "ops_conv.safetensors")
    fx.write(path, "tools/reference/ops_conv.py")
    print(f"{len(CASES)} cases, {os.path.getsize(path)} bytes -> {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
