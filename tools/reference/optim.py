"""Golden fixture for ocrt's optimizers, gradient clipping and LR schedules.

For each optimizer case, two parameters (float32) take five steps of torch.optim.* with
gradients drawn per step; the fixture holds the initial parameters, every step's gradients and
the parameters after every step. Schedules: the LR of steps 0..N-1 of StepLR, OneCycleLR.
Writes tests/fixtures/optim.safetensors; read by tests/train/test_optim.cpp.

    /usr/bin/python3 tools/reference/optim.py
"""

import os

import torch

from golden import seed_for, write_safetensors

STEPS = 5
OPTIMIZERS = {
    "sgd_plain": lambda p: torch.optim.SGD(p, lr=0.1),
    "sgd_momentum_wd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01),
    "sgd_nesterov": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.001),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.9, 0.99), eps=1e-6),
    "adam_wd": lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.8, 0.95), weight_decay=0.05),
}


def main():
    tensors = []
    for name, make in OPTIMIZERS.items():
        gen = torch.Generator().manual_seed(seed_for(name))
        params = [torch.randn(3, 4, generator=gen).requires_grad_(), torch.randn(5, generator=gen).requires_grad_()]
        for k, p in enumerate(params):
            tensors.append((f"{name}.p{k}.init", p.detach().clone()))
        opt = make(params)
        for s in range(STEPS):
            for k, p in enumerate(params):
                p.grad = torch.randn(p.shape, generator=gen)
                tensors.append((f"{name}.p{k}.grad{s}", p.grad.clone()))
            opt.step()
            for k, p in enumerate(params):
                tensors.append((f"{name}.p{k}.step{s}", p.detach().clone()))

    # Gradient clipping: the norm returned and the clipped gradients.
    gen = torch.Generator().manual_seed(seed_for("clip"))
    params = [torch.zeros(3, 4, requires_grad=True), torch.zeros(7, requires_grad=True)]
    for k, p in enumerate(params):
        p.grad = torch.randn(p.shape, generator=gen) * 3
        tensors.append((f"clip.grad{k}", p.grad.clone()))
    norm = torch.nn.utils.clip_grad_norm_(params, 1.5)
    tensors.append(("clip.norm", norm.reshape(1).to(torch.float64)))
    for k, p in enumerate(params):
        tensors.append((f"clip.clipped{k}", p.grad.clone()))

    # Schedules: 40 steps each.
    def lrs(make_sched, n=40):
        p = torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([p], lr=0.1)
        sched = make_sched(opt)
        out = []
        for _ in range(n):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        return torch.tensor(out, dtype=torch.float64)

    tensors.append(("sched.step", lrs(lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=7, gamma=0.5))))
    tensors.append(("sched.onecycle", lrs(lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=40))))
    tensors.append(("sched.onecycle_pct", lrs(lambda o: torch.optim.lr_scheduler.OneCycleLR(
        o, max_lr=0.1, total_steps=40, pct_start=0.25, div_factor=10, final_div_factor=100))))

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "fixtures", "optim.safetensors")
    write_safetensors(path, tensors, {"generator": "tools/reference/optim.py", "torch": torch.__version__})
    print(f"wrote {len(tensors)} tensors to {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
