"""Golden fixture for attention: writes tests/fixtures/ops_attention.safetensors, read by
tests/ops/test_attention.cpp. Multi-head cases call torch.nn.functional.
multi_head_attention_forward with the inputs query, key, value, in_proj_weight, in_proj_bias,
out_proj_weight, out_proj_bias (biases left out where the case says so); masks are stored as
<case>.attn_mask / <case>.key_padding_mask. Outputs: the attention output and the weights
averaged over heads.

    /usr/bin/python3 tools/reference/ops_attention.py
"""

import math
import os

import torch
import torch.nn.functional as F

from golden import Fixture, seed_for


def local_mask(H, W, wh, ww):
    """True where token (i, j) may not attend to (i', j'): |i-i'| > wh//2 or |j-j'| > ww//2."""
    idx = torch.arange(H * W)
    i, j = idx // W, idx % W
    return ((i[:, None] - i[None, :]).abs() > wh // 2) | ((j[:, None] - j[None, :]).abs() > ww // 2)


def main():
    fx = Fixture()
    extra = []

    def mha(name, L, S, N, E, h, bias=True, attn_mask=None, key_padding=None, dtype=torch.float64):
        gen = torch.Generator().manual_seed(seed_for(name))
        q = torch.randn(L, N, E, generator=gen, dtype=dtype)
        k = torch.randn(S, N, E, generator=gen, dtype=dtype)
        v = torch.randn(S, N, E, generator=gen, dtype=dtype)
        w_in = torch.randn(3 * E, E, generator=gen, dtype=dtype) / math.sqrt(E)
        w_out = torch.randn(E, E, generator=gen, dtype=dtype) / math.sqrt(E)
        inputs = [q, k, v, w_in, w_out]
        if bias:
            inputs += [torch.randn(3 * E, generator=gen, dtype=dtype) * 0.1, torch.randn(E, generator=gen, dtype=dtype) * 0.1]
        if attn_mask is not None:
            extra.append((f"{name}.attn_mask", attn_mask))
        if key_padding is not None:
            extra.append((f"{name}.key_padding_mask", key_padding))

        def fn(q, k, v, w_in, w_out, *b):
            b_in, b_out = b if b else (None, None)
            return F.multi_head_attention_forward(q, k, v, E, h, w_in, b_in, None, None, False, 0.0, w_out, b_out,
                                                  training=False, key_padding_mask=key_padding, need_weights=True,
                                                  attn_mask=attn_mask, average_attn_weights=True)

        fx.case(name, fn, inputs, gen)

    mha("mha_self", 5, 5, 2, 8, 2)
    mha("mha_cross", 3, 6, 3, 6, 3)
    mha("mha_nobias", 4, 4, 2, 4, 1, bias=False)
    mha("mha_local_mask", 8, 8, 2, 8, 2, attn_mask=local_mask(2, 4, 3, 3))
    gen = torch.Generator().manual_seed(seed_for("float mask"))
    mha("mha_float_mask", 4, 5, 2, 6, 2, attn_mask=torch.randn(4, 5, generator=gen, dtype=torch.float64))
    mha("mha_key_padding", 4, 6, 3, 8, 4, key_padding=torch.tensor([[0, 0, 0, 0, 1, 1], [0] * 6, [0, 0, 1, 1, 1, 1]],
                                                                     dtype=torch.bool))
    mha("mha_both_masks", 6, 6, 2, 4, 2, attn_mask=local_mask(2, 3, 1, 3),
        key_padding=torch.tensor([[0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 0, 1]], dtype=torch.bool))
    mha("mha_len1_batch1", 1, 1, 1, 4, 2)
    mha("mha_f32", 16, 16, 4, 32, 4, attn_mask=local_mask(4, 4, 3, 3), dtype=torch.float32)

    fx.tensors.extend(extra)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures",
                        "ops_attention.safetensors")
    fx.write(path, "tools/reference/ops_attention.py")
    print(f"{len(fx.case_names)} cases, {os.path.getsize(path)} bytes -> {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
