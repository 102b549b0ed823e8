"""The CRNN reference module (the exact spec of docs/models.md) and its golden fixture.

`CRNN` is the PyTorch module whose state_dict ocrt's CRNN loads unchanged (and the reverse).
Running this file writes tests/fixtures/crnn.safetensors for tests/models/test_crnn.cpp: a
tiny configuration (the presets are too large for a committed fixture; the code path is the
same), its weights, a batch of two lines of different widths, the logits, the CTC loss, every
parameter's gradient, the BatchNorm running statistics after the training-mode forward, and the
weights after one plain SGD step (the training-step parity test of the CRNN issue).

    /usr/bin/python3 tools/reference/crnn.py
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

from golden import write_safetensors

PRESETS = {
    "crnn": dict(channels=(64, 128, 256, 256, 512, 512, 512), hidden=256),
    "crnn-s": dict(channels=(32, 64, 128, 128, 256, 256, 256), hidden=128),
}


class CRNN(nn.Module):
    """Input N x 1 x 32 x W (W a multiple of 4, pixels p/127.5 - 1); output T x N x classes
    logits with T = W/4 + 1. With `lengths` (the true width of each line, a multiple of 4) the
    LSTM runs on packed sequences, so a line's result does not depend on how much padding its
    batch added."""

    def __init__(self, num_classes, channels=(64, 128, 256, 256, 512, 512, 512), hidden=256):
        super().__init__()
        c = channels
        self.cnn = nn.Sequential(
            nn.Conv2d(1, c[0], 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2, 2),                                  # 0 1 2
            nn.Conv2d(c[0], c[1], 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2, 2),                               # 3 4 5
            nn.Conv2d(c[1], c[2], 3, 1, 1, bias=False), nn.BatchNorm2d(c[2]), nn.ReLU(),                 # 6 7 8
            nn.Conv2d(c[2], c[3], 3, 1, 1), nn.ReLU(), nn.MaxPool2d((2, 2), (2, 1), (0, 1)),             # 9 10 11
            nn.Conv2d(c[3], c[4], 3, 1, 1, bias=False), nn.BatchNorm2d(c[4]), nn.ReLU(),                 # 12 13 14
            nn.Conv2d(c[4], c[5], 3, 1, 1), nn.ReLU(), nn.MaxPool2d((2, 2), (2, 1), (0, 1)),             # 15 16 17
            nn.Conv2d(c[5], c[6], 2, 1, 0, bias=False), nn.BatchNorm2d(c[6]), nn.ReLU(),                 # 18 19 20
        )
        self.rnn = nn.LSTM(c[6], hidden, num_layers=2, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, num_classes)

    def forward(self, x, lengths=None):
        f = self.cnn(x)                      # N x c6 x 1 x T
        f = f.squeeze(2).permute(2, 0, 1)    # T x N x c6
        if lengths is None:
            y, _ = self.rnn(f)
        else:
            steps = lengths // 4 + 1
            packed = nn.utils.rnn.pack_padded_sequence(f, steps.cpu(), enforce_sorted=False)
            y, _ = self.rnn(packed)
            y, _ = nn.utils.rnn.pad_packed_sequence(y, total_length=f.shape[0])
        return self.fc(y)                    # T x N x classes


def main():
    torch.manual_seed(1234)
    channels, hidden, classes = (4, 6, 8, 8, 10, 10, 12), 7, 9
    model = CRNN(classes, channels, hidden).double()
    tensors = [(f"init.{k}", v.detach().clone()) for k, v in model.state_dict().items()]

    gen = torch.Generator().manual_seed(99)
    widths = torch.tensor([40, 28])      # T = 11 and 8
    x = torch.rand(2, 1, 32, 40, generator=gen, dtype=torch.float64) * 2 - 1
    x[1, :, :, 28:] = 1.0                 # the shorter line is padded with white (p = 255 -> 1)
    targets = torch.tensor([[1, 2, 2, 3, 5], [4, 8, 0, 0, 0]])
    target_lengths = torch.tensor([5, 2])
    tensors += [("x", x), ("widths", widths), ("targets", targets), ("target_lengths", target_lengths)]

    model.train()
    logits = model(x, widths)
    input_lengths = widths // 4 + 1
    loss = F.ctc_loss(logits.log_softmax(2), targets, input_lengths, target_lengths, blank=0,
                      reduction="mean", zero_infinity=False)
    loss.backward()
    tensors += [("train.logits", logits.detach()), ("train.loss", loss.detach().reshape(1))]
    tensors += [(f"grad.{k}", p.grad.detach().clone()) for k, p in model.named_parameters()]
    tensors += [(f"after_forward.{k}", v.detach().clone()) for k, v in model.state_dict().items()
                if "running" in k or "num_batches" in k]
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
    tensors += [(f"after_sgd.{k}", v.detach().clone()) for k, v in model.named_parameters()]

    model.eval()
    with torch.no_grad():
        tensors.append(("eval.logits", model(x, widths)))
        tensors.append(("eval.logits_unpacked", model(x)))

    meta = {"generator": "tools/reference/crnn.py", "torch": torch.__version__,
            "channels": ",".join(map(str, channels)), "hidden": str(hidden), "classes": str(classes)}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "crnn.safetensors")
    write_safetensors(path, tensors, meta)
    print(f"wrote {len(tensors)} tensors to {os.path.normpath(path)}")
    for name, p in PRESETS.items():
        n = sum(t.numel() for t in CRNN(97, **p).parameters())
        print(f"{name}: {n} parameters with 97 classes")


if __name__ == "__main__":
    main()
