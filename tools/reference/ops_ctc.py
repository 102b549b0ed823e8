"""Golden fixture for the CTC loss: writes tests/fixtures/ops_ctc.safetensors, read by
tests/ops/test_ctc.cpp. Inputs of a case: scores (log-probabilities, or logits for the
*_logits cases), targets, input_lengths, target_lengths.

    /usr/bin/python3 tools/reference/ops_ctc.py
"""

import os

import torch
import torch.nn.functional as F

from golden import Fixture, seed_for


def main():
    fx = Fixture()

    def case(name, T, C, targets, input_lengths, blank=0, reduction="mean", zero_infinity=False, scale=1.0,
             logits=False, dtype=torch.float64, flat=False):
        gen = torch.Generator().manual_seed(seed_for(name))
        N = len(input_lengths)
        z = torch.randn(T, N, C, generator=gen, dtype=dtype) * scale
        scores = z if logits else z.log_softmax(2).detach()
        tl = torch.tensor([len(t) for t in targets], dtype=torch.int64)
        if flat:
            tg = torch.tensor([c for t in targets for c in t], dtype=torch.int64)
        else:
            S = max(1, max(len(t) for t in targets))
            tg = torch.zeros(N, S, dtype=torch.int64)
            for n, t in enumerate(targets):
                tg[n, : len(t)] = torch.tensor(t, dtype=torch.int64)
        il = torch.tensor(input_lengths, dtype=torch.int64)

        def fn(x, tg, il, tl):
            lp = x.log_softmax(2) if logits else x
            return F.ctc_loss(lp, tg, il, tl, blank=blank, reduction=reduction, zero_infinity=zero_infinity)

        fx.case(name, fn, [scores, tg, il, tl], gen)

    case("ctc_mean", 12, 6, [[1, 2, 2, 3], [4], [5, 5, 5], [1, 3, 1, 3, 1]], [12, 9, 12, 10])
    case("ctc_sum", 10, 5, [[1, 1], [2, 3, 4], [4]], [10, 7, 3], reduction="sum")
    case("ctc_none", 8, 4, [[3, 3], [1, 2, 3], [2]], [8, 8, 5], reduction="none")
    case("ctc_empty_target", 6, 4, [[], [2, 1], []], [6, 6, 3], reduction="none")
    case("ctc_blank_last", 9, 5, [[0, 1, 0], [3, 2]], [9, 7], blank=4, reduction="none")
    case("ctc_flat_targets", 10, 6, [[1, 2], [3], [4, 5, 4]], [10, 8, 10], flat=True)
    case("ctc_infeasible_zero_inf", 5, 4, [[1, 1, 1], [1, 2]], [4, 5], reduction="none", zero_infinity=True)
    case("ctc_infeasible_mean_zero_inf", 4, 4, [[1, 2, 3, 1, 2], [1, 2]], [4, 4], zero_infinity=True)
    case("ctc_infeasible", 5, 4, [[1, 1, 1], [1, 2]], [4, 5], reduction="none")
    case("ctc_batch1_t1", 1, 3, [[2]], [1], reduction="none")
    case("ctc_long_extreme", 2000, 4, [[1, 2, 3] * 60, [3, 3, 1] * 40], [2000, 1500], scale=30.0)
    case("ctc_f32", 33, 20, [[1, 5, 5, 9, 12], [3], [19, 18, 17, 16, 15, 14, 13], [7, 7]], [33, 30, 25, 33],
         dtype=torch.float32)
    case("ctc_logits", 15, 7, [[1, 2, 2], [6, 5, 4, 3], [1]], [15, 12, 6], logits=True)
    case("ctc_logits_f32", 20, 9, [[8, 8, 1], [2, 3, 4, 5, 6]], [20, 18], logits=True, dtype=torch.float32)

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "ops_ctc.safetensors")
    fx.write(path, "tools/reference/ops_ctc.py")
    print(f"{len(fx.case_names)} cases, {os.path.getsize(path)} bytes -> {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
