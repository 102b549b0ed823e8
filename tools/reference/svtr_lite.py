"""The SVTR-lite reference module (docs/models.md has the exact spec) and its golden fixture.

`SVTRLite` is the PyTorch module whose state_dict ocrt's SVTRLite (models/svtr_lite.h) loads
unchanged, and the reverse. Running this file writes tests/fixtures/svtr_lite.safetensors for
tests/models/test_svtr_lite.cpp: a reduced configuration (the preset's 4M parameters are too
many for a committed fixture; every code path is the same), its weights, a batch of two lines of
different widths (the narrower one padded with white), the logits in training and eval mode,
the CTC loss and every parameter's gradient. It also prints the preset's parameter count and
the FLOPs per 32x128 line of crnn, crnn-s and svtr-lite (docs/models.md quotes them).

    /usr/bin/python3 tools/reference/svtr_lite.py

The model, in short (after SVTR-Tiny, Du et al. 2022):

    x (N, 1, 32, W) -> patch_embed: two 3x3 stride-2 convs, each BatchNorm + GELU -> (N, C0, 8, W/4)
    -> tokens (L = 8 * W/4, N, C0) + a fixed 2-D sine/cosine position table
    -> blocks 0..d0-1 at (8, W/4); merges.0: 3x3 conv stride (2, 1) + LayerNorm -> (4, W/4, C1)
    -> blocks d0..d0+d1-1;         merges.1                              -> (2, W/4, C2)
    -> the last d2 blocks; norm -> mean over the 2 rows -> (T = W/4, N, C2)
    -> proj (no bias) -> hardswish -> dropout -> head -> (T, N, num_classes)

A block is pre-LayerNorm: x + attn(norm1(x)), then x + mlp(norm2(x)) (fc1, GELU, fc2). A
"local" block may only attend within a window (7 rows x 11 columns) around each token, a
"global" one everywhere. Padding: with per-line widths, no token attends to a key in a padding
column, and padding columns are set to 0 before each merging conv, so a line's logits do not
depend on how wide its batch is. A query that may attend no key at all (a padding token far
from its line under the window) gets attention output 0 instead of PyTorch's NaN, as in ocrt.
"""

import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from golden import write_safetensors

PRESETS = {
    # SVTR-Tiny's sizes; the mixers are local x6 then global x6.
    "svtr-lite": dict(dims=(64, 128, 256), depths=(3, 6, 3), heads=(2, 4, 8),
                      mixer=("local",) * 6 + ("global",) * 6, window=(7, 11), mlp_ratio=4,
                      out_dim=192, dropout=0.1),
}

LN_EPS = 1e-6
POSITION_SCALE = 0.1  # the position table's amplitude, small beside the stem's features


def position_table(H, W, C, dtype=torch.float64):
    """The fixed 2-D position embedding, (H * W, C) for an H x W token grid (row-major), with
    q = C / 4 frequencies omega_k = 10000^(-k/q), all times POSITION_SCALE (0.1):
        channels [0, q)    sin(col * omega)      [q, 2q)  cos(col * omega)
        channels [2q, 3q)  sin(row * omega)      [3q, 4q) cos(row * omega)
    A column's values do not depend on W, so any width works and padding changes nothing."""
    q = C // 4
    omega = torch.tensor([10000.0 ** (-k / q) for k in range(q)], dtype=torch.float64)
    cols = torch.arange(W, dtype=torch.float64)[:, None] * omega[None]  # W x q
    rows = torch.arange(H, dtype=torch.float64)[:, None] * omega[None]  # H x q
    t = torch.zeros(H, W, C, dtype=torch.float64)
    t[:, :, 0:q] = torch.sin(cols)[None]
    t[:, :, q:2 * q] = torch.cos(cols)[None]
    t[:, :, 2 * q:3 * q] = torch.sin(rows)[:, None]
    t[:, :, 3 * q:4 * q] = torch.cos(rows)[:, None]
    return (POSITION_SCALE * t).reshape(H * W, C).to(dtype)


def local_mask(H, W, window):
    """(H*W, H*W) bool, True where token a may NOT attend to token b (outside the window)."""
    idx = torch.arange(H * W)
    di = (idx[:, None] // W - idx[None] // W).abs()
    dj = (idx[:, None] % W - idx[None] % W).abs()
    return (di > window[0] // 2) | (dj > window[1] // 2)


def attend(attn, x, mask):
    """Multi-head self-attention with nn.MultiheadAttention's parameters (in_proj_weight,
    in_proj_bias, out_proj) on x (L, N, C). mask: bool, broadcastable to (N, heads, L, L), True =
    forbidden; or None. Rows with every key forbidden give 0 (ocrt's convention)."""
    L, N, C = x.shape
    h = attn.num_heads
    hd = C // h
    q, k, v = F.linear(x, attn.in_proj_weight, attn.in_proj_bias).chunk(3, dim=-1)
    # (L, N, C) -> (N, h, L, hd)
    q, k, v = (t.reshape(L, N, h, hd).permute(1, 2, 0, 3) for t in (q, k, v))
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))
        dead = mask.all(dim=-1, keepdim=True).expand(scores.shape[:-1] + (1,))
        scores = scores.masked_fill(dead, 0.0)
        w = scores.softmax(-1).masked_fill(dead, 0.0)
    else:
        w = scores.softmax(-1)
    out = (w @ v).permute(2, 0, 1, 3).reshape(L, N, C)
    return attn.out_proj(out)


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class MixingBlock(nn.Module):
    def __init__(self, dim, heads, mlp_ratio, local):
        super().__init__()
        self.local = local
        self.norm1 = nn.LayerNorm(dim, eps=LN_EPS)
        self.attn = nn.MultiheadAttention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=LN_EPS)
        self.mlp = Mlp(dim, dim * mlp_ratio)

    def forward(self, x, mask):
        x = x + attend(self.attn, self.norm1(x), mask)
        return x + self.mlp(self.norm2(x))


class Merge(nn.Module):
    """Halves the token grid's height: a 3x3 conv with stride (2, 1), then LayerNorm."""

    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, (2, 1), 1)
        self.norm = nn.LayerNorm(cout, eps=LN_EPS)

    def forward(self, grid):  # (N, C, H, W) -> tokens (H/2 * W, N, C')
        return self.norm(self.conv(grid).flatten(2).permute(2, 0, 1))


class SVTRLite(nn.Module):
    """Input N x 1 x 32 x W (W a multiple of 4, pixels p/127.5 - 1); output T x N x classes
    logits with T = W/4. `widths` (each line's true width, a multiple of 4) keeps each line's
    result independent of its batch's padding."""

    def __init__(self, num_classes, dims=(64, 128, 256), depths=(3, 6, 3), heads=(2, 4, 8),
                 mixer=("local",) * 6 + ("global",) * 6, window=(7, 11), mlp_ratio=4, out_dim=192,
                 dropout=0.1):
        super().__init__()
        assert len(mixer) == sum(depths)
        self.depths, self.window = depths, window
        c0 = dims[0]
        self.patch_embed = nn.Sequential(
            nn.Conv2d(1, c0 // 2, 3, 2, 1, bias=False), nn.BatchNorm2d(c0 // 2), nn.GELU(),  # 0 1 2
            nn.Conv2d(c0 // 2, c0, 3, 2, 1, bias=False), nn.BatchNorm2d(c0), nn.GELU(),      # 3 4 5
        )
        self.blocks = nn.ModuleList()
        for s in range(3):
            for _ in range(depths[s]):
                i = len(self.blocks)
                self.blocks.append(MixingBlock(dims[s], heads[s], mlp_ratio, mixer[i] == "local"))
        self.merges = nn.ModuleList([Merge(dims[0], dims[1]), Merge(dims[1], dims[2])])
        self.norm = nn.LayerNorm(dims[2], eps=LN_EPS)
        self.proj = nn.Linear(dims[2], out_dim, bias=False)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(out_dim, num_classes)
        # Initialisation: PyTorch's defaults for every layer (ocrt's layers copy them).

    def forward(self, x, widths=None):
        f = self.patch_embed(x)                               # N x C0 x 8 x W/4
        N, C, H, Wt = f.shape
        pad_cols = None
        if widths is not None and bool((widths // 4 < Wt).any()):
            pad_cols = torch.arange(Wt, device=f.device)[None] >= (widths.to(f.device) // 4)[:, None]  # N x Wt, True = padding
        # The tables are made on the CPU and moved to the input's device (a GPU in bench/torch_train.py).
        t = f.flatten(2).permute(2, 0, 1) + position_table(H, Wt, C, f.dtype).to(f.device)[:, None]  # L x N x C
        first = 0
        for s in range(3):
            if s > 0:  # back to the grid, padding columns to 0, merge
                grid = t.permute(1, 2, 0).reshape(N, -1, H, Wt)
                if pad_cols is not None:
                    grid = grid.masked_fill(pad_cols[:, None, None, :], 0.0)
                t = self.merges[s - 1](grid)
                H //= 2
            kp = None
            if pad_cols is not None:  # N x 1 x 1 x L
                kp = pad_cols[:, None, :].expand(N, H, Wt).reshape(N, 1, 1, H * Wt)
            for i in range(first, first + self.depths[s]):
                block = self.blocks[i]
                mask = kp
                if block.local:
                    lm = local_mask(H, Wt, self.window).to(t.device)
                    mask = lm if kp is None else (lm | kp)
                t = block(t, mask)
            first += self.depths[s]
        t = self.norm(t).reshape(H, Wt, N, -1).mean(0)         # T x N x C2
        t = self.drop(F.hardswish(self.proj(t)))
        return self.head(t)                                   # T x N x classes


def count_flops(arch, W=128, classes=97):
    """Multiply-adds x 2 of one 32 x W line's forward pass, as ocrt computes it: convolutions,
    linear layers, the LSTM's matrix products, and attention's two products over all L x L
    token pairs (the local window is a mask on a dense product). Elementwise work, norms and
    softmax are left out (a few percent)."""
    flops = 0
    if arch.startswith("crnn"):
        c = (64, 128, 256, 256, 512, 512, 512) if arch == "crnn" else (32, 64, 128, 128, 256, 256, 256)
        hidden = 256 if arch == "crnn" else 128
        h, w = 32, W
        def conv(cin, cout, k, ho, wo):
            return 2 * cin * cout * k * k * ho * wo
        flops += conv(1, c[0], 3, h, w); h, w = h // 2, w // 2
        flops += conv(c[0], c[1], 3, h, w); h, w = h // 2, w // 2
        flops += conv(c[1], c[2], 3, h, w) + conv(c[2], c[3], 3, h, w); h, w = h // 2, w + 1
        flops += conv(c[3], c[4], 3, h, w) + conv(c[4], c[5], 3, h, w); h, w = h // 2, w + 1
        T = w - 1
        flops += conv(c[5], c[6], 2, 1, T)
        for layer in range(2):
            inp = c[6] if layer == 0 else 2 * hidden
            flops += 2 * 2 * T * (inp + hidden) * 4 * hidden  # two directions, gates of x and h
        flops += 2 * T * 2 * hidden * classes
        return flops
    p = PRESETS[arch]
    dims, depths = p["dims"], p["depths"]
    Wt = W // 4
    flops += 2 * 1 * (dims[0] // 2) * 9 * 16 * (W // 2)      # stem conv 1 at 16 x W/2
    flops += 2 * (dims[0] // 2) * dims[0] * 9 * 8 * Wt        # stem conv 2 at 8 x W/4
    H = 8
    for s in range(3):
        if s > 0:
            H //= 2
            flops += 2 * dims[s - 1] * dims[s] * 9 * H * Wt   # merging conv
        C, L = dims[s], H * Wt
        per_block = 2 * L * (4 * C * C + 2 * p["mlp_ratio"] * C * C) + 2 * 2 * L * L * C
        flops += depths[s] * per_block
    flops += 2 * Wt * (dims[2] * p["out_dim"] + p["out_dim"] * classes)
    return flops


def main():
    torch.manual_seed(1234)
    cfg = dict(dims=(8, 12, 16), depths=(1, 2, 1), heads=(2, 3, 4),
               mixer=("local", "local", "global", "global"), window=(7, 11), mlp_ratio=4, out_dim=10,
               dropout=0.0)
    classes = 7
    model = SVTRLite(classes, **cfg).double()
    tensors = [(f"init.{k}", v.detach().clone()) for k, v in model.state_dict().items()]

    gen = torch.Generator().manual_seed(77)
    # 64 px: 16 token columns, wider than the 11-column window, so padding tokens past the
    # window's reach of the narrow line exist (their attention rows are all masked).
    widths = torch.tensor([64, 24])
    x = torch.rand(2, 1, 32, 64, generator=gen, dtype=torch.float64) * 2 - 1
    x[1, :, :, 24:] = 1.0  # the shorter line is padded with white (p = 255 -> 1)
    targets = torch.tensor([[1, 2, 2, 3, 6], [4, 5, 0, 0, 0]])
    target_lengths = torch.tensor([5, 2])
    tensors += [("x", x), ("widths", widths), ("targets", targets), ("target_lengths", target_lengths)]

    model.train()
    logits = model(x, widths)
    input_lengths = widths // 4
    loss = F.ctc_loss(logits.log_softmax(2), targets, input_lengths, target_lengths, blank=0,
                      reduction="mean", zero_infinity=False)
    loss.backward()
    tensors += [("train.logits", logits.detach()), ("train.loss", loss.detach().reshape(1))]
    tensors += [(f"grad.{k}", p.grad.detach().clone()) for k, p in model.named_parameters()]
    tensors += [(f"after_forward.{k}", v.detach().clone()) for k, v in model.state_dict().items()
                if "running" in k or "num_batches" in k]

    model.eval()
    with torch.no_grad():
        tensors.append(("eval.logits", model(x, widths)))
        tensors.append(("eval.logits_nowidths", model(x)))
        alone = model(x[1:, :, :, :24], widths[1:])
        assert torch.allclose(alone, tensors[-2][1][:6, 1:], rtol=1e-12, atol=1e-12), "padding changed line 1"

    meta = {"generator": "tools/reference/svtr_lite.py", "torch": torch.__version__,
            "config": repr(cfg), "classes": str(classes)}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures",
                        "svtr_lite.safetensors")
    write_safetensors(path, tensors, meta)
    print(f"wrote {len(tensors)} tensors ({os.path.getsize(path)} bytes) to {os.path.normpath(path)}")
    for name, p in PRESETS.items():
        n = sum(t.numel() for t in SVTRLite(97, **p).parameters())
        print(f"{name}: {n} parameters with 97 classes")
    for arch in ("crnn", "crnn-s", "svtr-lite"):
        print(f"{arch}: {count_flops(arch) / 1e9:.3f} GFLOPs per 32x128 line (forward)")


if __name__ == "__main__":
    main()
