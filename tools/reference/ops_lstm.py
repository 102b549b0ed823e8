"""Golden fixture for the LSTM: writes tests/fixtures/ops_lstm.safetensors, read by
tests/ops/test_lstm.cpp. Inputs of a case: x, h0, c0, then the weights in torch.nn.LSTM's
_flat_weights order; outputs: output, h_n, c_n. Cases with variable lengths run through
pack_padded_sequence(enforce_sorted=False) and store the lengths as <case>.lengths.

    /usr/bin/python3 tools/reference/ops_lstm.py
"""

import os

import torch
import torch.nn as nn

from golden import Fixture, seed_for

CASES = [
    # name, T, N, I, H, layers, bidirectional, bias, lengths, dtype
    ("lstm_1layer", 5, 3, 4, 3, 1, False, True, None, torch.float64),
    ("lstm_bidir", 4, 2, 3, 5, 1, True, True, None, torch.float64),
    ("lstm_2layer_bidir", 6, 3, 4, 3, 2, True, True, None, torch.float64),
    ("lstm_nobias", 3, 2, 2, 4, 2, False, False, None, torch.float64),
    ("lstm_t1_n1", 1, 1, 3, 2, 2, True, True, None, torch.float64),
    ("lstm_lengths", 7, 4, 3, 4, 2, True, True, [7, 3, 5, 1], torch.float64),
    ("lstm_lengths_uni", 5, 3, 2, 3, 1, False, True, [2, 5, 4], torch.float64),
    ("lstm_f32", 9, 5, 16, 8, 2, True, True, [9, 9, 4, 7, 2], torch.float32),
]


def main():
    fx = Fixture()
    extra = []
    for name, T, N, I, H, L, bidir, bias, lengths, dtype in CASES:
        gen = torch.Generator().manual_seed(seed_for(name))
        module = nn.LSTM(I, H, num_layers=L, bidirectional=bidir, bias=bias).to(dtype)
        dirs = 2 if bidir else 1
        x = torch.randn(T, N, I, generator=gen, dtype=dtype)
        h0 = torch.randn(L * dirs, N, H, generator=gen, dtype=dtype) * 0.5
        c0 = torch.randn(L * dirs, N, H, generator=gen, dtype=dtype) * 0.5
        weights = [torch.randn(p.shape, generator=gen, dtype=dtype) * 0.4 for _, p in module.named_parameters()]
        if lengths is not None:
            extra.append((f"{name}.lengths", torch.tensor(lengths, dtype=torch.int64)))

        def fn(x, h0, c0, *ws, lengths=lengths, L=L, bidir=bidir, bias=bias, T=T):
            # torch.nn.LSTM's own kernel, called with the weights as plain inputs.
            if lengths is None:
                y, hn, cn = torch._VF.lstm(x, (h0, c0), list(ws), bias, L, 0.0, True, bidir, False)
                return y, hn, cn
            packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor(lengths), enforce_sorted=False)
            hx = (h0.index_select(1, packed.sorted_indices), c0.index_select(1, packed.sorted_indices))
            data, hn, cn = torch._VF.lstm(packed.data, packed.batch_sizes, hx, list(ws), bias, L, 0.0, True, bidir)
            out = nn.utils.rnn.PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
            y, _ = nn.utils.rnn.pad_packed_sequence(out, total_length=T)
            return y, hn.index_select(1, packed.unsorted_indices), cn.index_select(1, packed.unsorted_indices)

        fx.case(name, fn, [x, h0, c0] + weights, gen)
    fx.tensors.extend(extra)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "ops_lstm.safetensors")
    fx.write(path, "tools/reference/ops_lstm.py")
    print(f"{len(CASES)} cases, {os.path.getsize(path)} bytes -> {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
