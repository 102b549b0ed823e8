"""The DBNet-lite reference module (models/dbnet.h) and its golden fixture.

`DBNet` is the PyTorch module whose state_dict ocrt's DBNet loads unchanged (and the reverse).
Running this file writes tests/fixtures/dbnet.safetensors for tests/models/test_dbnet.cpp: a
reduced configuration (the preset's layer table with fewer channels), its weights, a batch of
two 64 x 96 inputs, both maps' logits in training mode, DB's loss on hand-made targets (the same
formula as train/det_loss.h, without hard-negative mining: every pixel weighs 1), every
parameter's gradient, BatchNorm's running statistics after the forward, and the probability
logits in eval mode.

    /usr/bin/python3 tools/reference/dbnet.py
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from golden import write_safetensors

PRESETS = {"dbnet": dict(channels=(8, 16, 32, 64, 128), fpn=32, head=16)}


def conv_bn_relu(cin, cout, stride):
    return [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


def make_head(cin, mid):
    # 0 conv, 1 BN, 2 ReLU, 3 up2, 4 conv, 5 BN, 6 ReLU, 7 up2, 8 conv (bias)
    return nn.Sequential(*conv_bn_relu(cin, mid, 1), nn.Upsample(scale_factor=2, mode="nearest"),
                         *conv_bn_relu(mid, mid, 1), nn.Upsample(scale_factor=2, mode="nearest"),
                         nn.Conv2d(mid, 1, 3, 1, 1))


class DBNet(nn.Module):
    """Input N x 1 x H x W (H, W multiples of 32, pixels p/127.5 - 1); outputs the probability
    and threshold logits, each N x 1 x H x W."""

    def __init__(self, channels=(8, 16, 32, 64, 128), fpn=32, head=16):
        super().__init__()
        c = channels
        self.stem = nn.Sequential(*conv_bn_relu(1, c[0], 2))
        self.stages = nn.ModuleList(
            nn.Sequential(*conv_bn_relu(c[i], c[i + 1], 2), *conv_bn_relu(c[i + 1], c[i + 1], 1)) for i in range(4))
        self.lateral = nn.ModuleList(nn.Conv2d(c[i + 1], fpn, 1, bias=False) for i in range(4))
        self.smooth = nn.ModuleList(nn.Conv2d(fpn, fpn // 4, 3, 1, 1, bias=False) for i in range(4))
        self.prob_head = make_head(fpn, head)
        self.thresh_head = make_head(fpn, head)

    def forward(self, x):
        y = self.stem(x)
        C = []
        for stage in self.stages:
            y = stage(y)
            C.append(y)
        P = [None] * 4
        P[3] = self.lateral[3](C[3])
        for i in (2, 1, 0):
            P[i] = self.lateral[i](C[i]) + F.interpolate(P[i + 1], scale_factor=2, mode="nearest")
        parts = []
        for i in (3, 2, 1, 0):
            s = self.smooth[i](P[i])
            parts.append(F.interpolate(s, scale_factor=2 ** i, mode="nearest") if i > 0 else s)
        f = torch.cat(parts, 1)
        return self.prob_head(f), self.thresh_head(f)


def db_loss(prob, thresh, shrink, shrink_mask, tmap, tmask, k=50.0, alpha=5.0, beta=10.0, eps=1e-6):
    """DB's loss with every pixel of the shrink mask weighing 1 (no hard-negative mining)."""
    l_prob = (F.binary_cross_entropy_with_logits(prob, shrink, reduction="none") * shrink_mask).sum() / (
        shrink_mask.sum() + eps)
    t = torch.sigmoid(thresh)
    l_thresh = ((t - tmap).abs() * tmask).sum() / (tmask.sum() + eps)
    b = torch.sigmoid(k * (torch.sigmoid(prob) - t))
    inter = (b * shrink * shrink_mask).sum()
    union = (b * shrink_mask).sum() + (shrink * shrink_mask).sum() + eps
    l_bin = 1 - 2 * inter / union
    return alpha * l_prob + beta * l_thresh + l_bin


def main():
    torch.manual_seed(4321)
    cfg = dict(channels=(3, 4, 5, 6, 7), fpn=8, head=3)
    model = DBNet(**cfg).double()
    tensors = [(f"init.{k}", v.detach().clone()) for k, v in model.state_dict().items()]

    gen = torch.Generator().manual_seed(7)
    x = torch.rand(2, 1, 64, 96, generator=gen, dtype=torch.float64) * 2 - 1
    # Targets: a few text bars, a mask with an ignored patch, a threshold map in [0.3, 0.7].
    shrink = torch.zeros(2, 1, 64, 96, dtype=torch.float64)
    shrink[0, 0, 10:14, 8:80] = 1
    shrink[0, 0, 30:36, 20:60] = 1
    shrink[1, 0, 40:44, 5:90] = 1
    shrink_mask = torch.ones_like(shrink)
    shrink_mask[1, 0, 0:8, 0:16] = 0
    tmap = 0.3 + 0.4 * torch.rand(2, 1, 64, 96, generator=gen, dtype=torch.float64)
    tmask = (torch.rand(2, 1, 64, 96, generator=gen, dtype=torch.float64) < 0.4).double()
    tensors += [("x", x), ("shrink", shrink), ("shrink_mask", shrink_mask), ("tmap", tmap), ("tmask", tmask)]

    model.train()
    prob, thresh = model(x)
    loss = db_loss(prob, thresh, shrink, shrink_mask, tmap, tmask)
    loss.backward()
    tensors += [("train.prob", prob.detach()), ("train.thresh", thresh.detach()),
                ("train.loss", loss.detach().reshape(1))]
    tensors += [(f"grad.{k}", p.grad.detach().clone()) for k, p in model.named_parameters()]
    tensors += [(f"after_forward.{k}", v.detach().clone()) for k, v in model.state_dict().items()
                if "running" in k or "num_batches" in k]
    model.eval()
    with torch.no_grad():
        tensors.append(("eval.prob", model(x)[0]))

    meta = {"generator": "tools/reference/dbnet.py", "torch": torch.__version__,
            "channels": ",".join(map(str, cfg["channels"])), "fpn": str(cfg["fpn"]), "head": str(cfg["head"])}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "dbnet.safetensors")
    write_safetensors(path, tensors, meta)
    print(f"wrote {len(tensors)} tensors to {os.path.normpath(path)}")
    for name, p in PRESETS.items():
        m = DBNet(**p)
        n = sum(t.numel() for t in m.parameters())
        n_prob = n - sum(t.numel() for t in m.thresh_head.parameters())
        print(f"{name}: {n} parameters ({n_prob} without the threshold head)")
        # Multiply-adds of the probability path on a 1280 x 960 page (the threshold head is training only).
        macs = 0
        hooks = []

        def count(mod, inp, out):
            nonlocal macs
            if isinstance(mod, nn.Conv2d):
                macs += out.numel() * mod.in_channels * mod.kernel_size[0] * mod.kernel_size[1] // mod.groups

        for mod in m.modules():
            hooks.append(mod.register_forward_hook(count))
        with torch.no_grad():
            m.eval()
            m(torch.zeros(1, 1, 1280, 960))
        thresh_macs = 0
        macs_all = macs
        macs = 0
        with torch.no_grad():
            m.thresh_head(torch.zeros(1, p["fpn"], 320, 240))
        thresh_macs = macs
        print(f"{name}: {(macs_all - thresh_macs) / 1e9:.2f} G multiply-adds for a 1280 x 960 page (probability path)")


if __name__ == "__main__":
    main()
