"""One training step of ocrt-train, as PyTorch computes it: the fixture of the parity test that
goes through the whole trainer (tests/train/test_train_step.cpp).

The test writes the fixture's lines as PNG files with their labels, its initial weights as a
model file, and runs ocrt-train's loop (run_training) with --init, one step, the whole set as
one batch, no augmentation, no shuffling, plain SGD without momentum or weight decay, no
clipping. Here the same batch goes through the reference CRNN (tools/reference/crnn.py) in
float64: pixels p / 127.5 - 1, each line padded with white (p = 255) to a multiple of 4 and
the batch to its widest line, CTC input lengths W / 4 + 1 of each line's padded width, mean
CTC loss with zero_infinity, then p -= lr * grad. It records the loss of that step and every
parameter and BatchNorm buffer after it.

    /usr/bin/python3 tools/reference/train_step.py
"""

import os

import torch
import torch.nn.functional as F

from crnn import CRNN
from golden import write_safetensors

CHARSET = "abcdeXYZ"
TEXTS = ["abc", "dead", "XaY", "bee"]
WIDTHS = [37, 50, 61, 44]            # source widths; padded to 40, 52, 64, 44
CHANNELS, HIDDEN, LR = (4, 6, 8, 8, 10, 10, 12), 7, 0.05


def main():
    torch.manual_seed(4321)
    classes = len(CHARSET) + 1
    model = CRNN(classes, CHANNELS, HIDDEN)
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model = model.double()

    gen = torch.Generator().manual_seed(5)
    images = [torch.randint(0, 256, (32, w), generator=gen, dtype=torch.uint8) for w in WIDTHS]
    padded = [(w + 3) // 4 * 4 for w in WIDTHS]
    W = max(padded)
    x = torch.ones(len(images), 1, 32, W, dtype=torch.float64)   # white: 255 / 127.5 - 1
    for n, img in enumerate(images):
        x[n, 0, :, : img.shape[1]] = img.double() / 127.5 - 1
    lengths = torch.tensor(padded)
    targets = [torch.tensor([CHARSET.index(c) + 1 for c in t]) for t in TEXTS]

    model.train()
    logits = model(x, lengths)
    loss = F.ctc_loss(logits.log_softmax(2), torch.cat(targets), lengths // 4 + 1,
                      torch.tensor([len(t) for t in targets]), blank=0, reduction="mean", zero_infinity=True)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= LR * p.grad

    tensors = [(f"init.{k}", v) for k, v in init.items()]
    tensors += [(f"image{n}", img) for n, img in enumerate(images)]
    tensors += [("loss", loss.detach().reshape(1))]
    tensors += [(f"after.{k}", v.detach().clone()) for k, v in model.state_dict().items()]
    meta = {"generator": "tools/reference/train_step.py", "torch": torch.__version__, "charset": CHARSET,
            "texts": "|".join(TEXTS), "channels": ",".join(map(str, CHANNELS)), "hidden": str(HIDDEN),
            "lr": repr(LR)}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures",
                        "train_step.safetensors")
    write_safetensors(path, tensors, meta)
    print(f"wrote {len(tensors)} tensors to {os.path.normpath(path)}; loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
