#!/usr/bin/env python3
"""The correctness reference for examples/train_gpt2: GPT-2 written out in PyTorch, started from the same
llm.c model file and trained on the same llm.c token shard with the same AdamW, schedule and clipping, f32
on the CPU. It runs accel's trainer with the same flags, and prints both losses per step side by side
with their relative difference. A comparison only (bench/README.md), never a dependency of accel or its
tests. --write_inputs DIR first writes a GPT-2 of --depth layers from GPT-2's init (llm.c's f32 file)
and a token shard there, so that nothing needs to be downloaded:

  python3 bench/gpt2_pytorch_reference.py --accel build/examples/train_gpt2 --write_inputs /tmp/ref \\
      --batch_size 4 --seq_len 64 --steps 10
  python3 bench/gpt2_pytorch_reference.py --accel build/examples/train_gpt2 --init_from model.bin \\
      --train_data train.bin --batch_size 4 --seq_len 64 --steps 10
"""
import argparse
import math
import re
import struct
import os
import subprocess
import sys

# llm.c's tensors in file order, with the shapes a header's sizes give them.
def llmc_shapes(max_t, layers, c, vp):
    return [("wte", (vp, c)), ("wpe", (max_t, c)), ("ln1w", (layers, c)), ("ln1b", (layers, c)),
            ("qkvw", (layers, 3 * c, c)), ("qkvb", (layers, 3 * c)), ("attprojw", (layers, c, c)),
            ("attprojb", (layers, c)), ("ln2w", (layers, c)), ("ln2b", (layers, c)),
            ("fcw", (layers, 4 * c, c)), ("fcb", (layers, 4 * c)), ("fcprojw", (layers, c, 4 * c)),
            ("fcprojb", (layers, c)), ("lnfw", (c,)), ("lnfb", (c,))]


# GPT-2's weight matrices (the embeddings and every Linear's), the ones AdamW decays as GPT-2 and
# llm.c do; llm.c stacks the per-layer biases and LayerNorm gains into 2-D tensors, which are not.
DECAYED = {"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"}


def read_llmc_model(path):
    """llm.c's model file: 256 int32 (magic 20240326, version 3 = f32), then its 16 tensors in order."""
    import torch

    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        if header[0] != 20240326 or header[1] != 3:
            sys.exit(f"{path}: not an f32 llm.c model file (magic {header[0]}, version {header[1]})")
        max_t, v, layers, heads, c, vp = header[2:8]
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    tensors, offset = {}, 0
    for name, shape in llmc_shapes(max_t, layers, c, vp):
        n = math.prod(shape)
        tensors[name] = data[offset:offset + n].reshape(shape).clone()
        offset += n
    if offset != data.numel():
        sys.exit(f"{path}: {data.numel()} floats after the header, the header says {offset}")
    return dict(max_t=max_t, v=v, layers=layers, heads=heads, c=c, vp=vp), tensors


def write_inputs(directory, depth, tokens, seed):
    """A GPT-2 of depth layers from GPT-2's init as llm.c's f32 file, and a shard of tokens: ids below
    1,024 in a cycle of 61 with every eighth one random, a text a model starts to learn in 10 steps."""
    import torch

    os.makedirs(directory, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    heads, c = {12: (12, 768), 24: (16, 1024), 36: (20, 1280), 48: (25, 1600)}[depth]  # GPT-2's sizes
    max_t, v, vp = 1024, 50257, 50304
    model_path = os.path.join(directory, f"gpt2_d{depth}_init.bin")
    with open(model_path, "wb") as f:
        f.write(struct.pack("<256i", 20240326, 3, max_t, v, depth, heads, c, vp, *([0] * 248)))
        for name, shape in llmc_shapes(max_t, depth, c, vp):
            if name in ("ln1w", "ln2w", "lnfw"):
                t = torch.ones(shape)
            elif name in DECAYED:
                std = 0.02 / math.sqrt(2 * depth) if name in ("attprojw", "fcprojw") else 0.02
                t = torch.randn(shape, generator=gen) * std
                if name == "wte":
                    t[v:] = 0  # the padded rows, as llm.c leaves them
            else:
                t = torch.zeros(shape)
            f.write(t.to(torch.float32).contiguous().numpy().tobytes())
    ids = torch.randint(0, 1024, (tokens,), generator=gen)
    cycle = (torch.arange(tokens) % 61) * 17 % 1024
    ids = torch.where(torch.arange(tokens) % 8 == 7, ids, cycle).to(torch.int64)
    shard_path = os.path.join(directory, "train.bin")
    with open(shard_path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, tokens, *([0] * 253)))
        f.write(struct.pack(f"<{tokens}H", *ids.tolist()))
    return model_path, shard_path


def read_tokens(path):
    import torch

    with open(path, "rb") as f:
        header = struct.unpack("<256i", f.read(1024))
        if header[0] != 20240520:
            sys.exit(f"{path}: not an llm.c token shard (magic {header[0]})")
        tokens = torch.frombuffer(bytearray(f.read(2 * header[2])), dtype=torch.uint16)
    return tokens.to(torch.int64)


def make_model(cfg, w):
    """GPT-2 as accel's nn::GPT builds it with tie_weights: pre-LN blocks, tanh GELU, the head = wte's first V rows."""
    import torch
    import torch.nn.functional as F

    p = {k: torch.nn.Parameter(t) for k, t in w.items()}
    c, heads, v = cfg["c"], cfg["heads"], cfg["v"]

    def forward(idx):
        b, t = idx.shape
        x = p["wte"][idx] + p["wpe"][:t]
        for l in range(cfg["layers"]):
            h = F.layer_norm(x, (c,), p["ln1w"][l], p["ln1b"][l], 1e-5)
            q, k, vv = F.linear(h, p["qkvw"][l], p["qkvb"][l]).split(c, dim=2)
            q, k, vv = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, vv))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(c // heads)
            att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)
            y = (att @ vv).transpose(1, 2).reshape(b, t, c)
            x = x + F.linear(y, p["attprojw"][l], p["attprojb"][l])
            h = F.layer_norm(x, (c,), p["ln2w"][l], p["ln2b"][l], 1e-5)
            h = F.gelu(F.linear(h, p["fcw"][l], p["fcb"][l]), approximate="tanh")
            x = x + F.linear(h, p["fcprojw"][l], p["fcprojb"][l])
        x = F.layer_norm(x, (c,), p["lnfw"], p["lnfb"], 1e-5)
        return F.linear(x, p["wte"][:v])

    return p, forward


def lr_at(args, step):
    """accel's schedules (optim/lr_schedule.h): linear warmup, then constant or a half cosine to min_lr."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    if args.lr_schedule == "constant":
        return args.lr
    min_lr = args.lr * args.final_lr_fraction
    progress = (step - args.warmup_steps) / max(1, args.steps - args.warmup_steps)
    return min_lr + (args.lr - min_lr) * (1 + math.cos(math.pi * min(progress, 1.0))) / 2


def pytorch_losses(args):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    cfg, weights = read_llmc_model(args.init_from)
    params, forward = make_model(cfg, weights)
    decayed = [t for name, t in params.items() if name in DECAYED]
    other = [t for name, t in params.items() if name not in DECAYED]
    opt = torch.optim.AdamW([{"params": decayed, "weight_decay": args.weight_decay},
                             {"params": other, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    tokens = read_tokens(args.train_data)
    bt = args.batch_size * args.seq_len
    accumulation = args.total_batch_size // bt if args.total_batch_size else 1
    position, losses = 0, []
    for step in range(args.steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(args, step)
        opt.zero_grad()
        total = 0.0
        for _ in range(accumulation):
            if position + bt + 1 > tokens.numel():
                position = 0
            chunk = tokens[position:position + bt + 1]
            position += bt
            x = chunk[:-1].view(args.batch_size, args.seq_len)
            y = chunk[1:].view(args.batch_size, args.seq_len)
            loss = F.cross_entropy(forward(x).view(-1, cfg["v"]), y.reshape(-1))
            (loss / accumulation).backward()
            total += loss.item() / accumulation
        if args.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(list(params.values()), args.grad_clip)
        opt.step()
        losses.append(total)
    return losses


def accel_losses(args):
    flags = ["--init_from", args.init_from, "--train_data", args.train_data, "--batch_size", str(args.batch_size),
             "--seq_len", str(args.seq_len), "--steps", str(args.steps), "--lr", str(args.lr), "--lr_schedule",
             args.lr_schedule, "--warmup_steps", str(args.warmup_steps), "--final_lr_fraction",
             str(args.final_lr_fraction), "--weight_decay", str(args.weight_decay), "--grad_clip", str(args.grad_clip)]
    if args.total_batch_size:
        flags += ["--total_batch_size", str(args.total_batch_size)]
    # No config file or ACCEL_* variable of the user's changes the run.
    env = {"OMP_NUM_THREADS": str(args.threads), "PATH": "/usr/bin:/bin", "ACCEL_CONFIG_FILE": "/nonexistent"}
    out = subprocess.run([args.accel] + flags, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{args.accel} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    losses = [float(m.group(1)) for m in re.finditer(r"^step \d+/\d+: train loss (\S+)", out.stdout, re.M)]
    if len(losses) != args.steps:
        sys.exit(f"{args.accel} printed {len(losses)} step lines, expected {args.steps}:\n{out.stdout}")
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--accel", required=True, help="accel's train_gpt2 binary")
    parser.add_argument("--init_from", help="an f32 llm.c model file (gpt2_124M.bin or one written by --write_inputs)")
    parser.add_argument("--train_data", help="one llm.c token shard")
    parser.add_argument("--write_inputs", metavar="DIR", help="write an init file and a shard there, and use them")
    parser.add_argument("--depth", type=int, default=12, choices=[12, 24, 36, 48],
                        help="layers of the GPT-2 --write_inputs writes (12: 124M)")
    parser.add_argument("--tokens", type=int, default=32769, help="tokens of the shard --write_inputs writes")
    parser.add_argument("--seed", type=int, default=0, help="seed of --write_inputs")
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--seq_len", type=int, default=64)
    parser.add_argument("--total_batch_size", type=int, default=0, help="tokens per step (0: one micro-batch)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--lr_schedule", choices=["constant", "cosine"], default="cosine")
    parser.add_argument("--warmup_steps", type=int, default=0)
    parser.add_argument("--final_lr_fraction", type=float, default=0.0, help="the cosine's floor over lr, as train_gpt2's")
    parser.add_argument("--weight_decay", type=float, default=0.0)
    parser.add_argument("--grad_clip", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.write_inputs:
        args.init_from, args.train_data = write_inputs(args.write_inputs, args.depth, args.tokens, args.seed)
    elif not (args.init_from and args.train_data):
        parser.error("give --init_from and --train_data, or --write_inputs DIR")

    ours = accel_losses(args)
    theirs = pytorch_losses(args)
    print(f"{'step':>4} {'accel':>12} {'pytorch':>12} {'rel diff':>10}")
    worst = 0.0
    for step, (a, t) in enumerate(zip(ours, theirs)):
        rel = abs(a - t) / abs(t)
        worst = max(worst, rel)
        print(f"{step:>4} {a:>12.6f} {t:>12.6f} {rel:>10.2e}")
    print(f"worst relative difference {worst:.2e} (requirement: <= 1e-4 at every step)")
    return 0 if worst <= 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
