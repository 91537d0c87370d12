#!/usr/bin/env python3
"""GPT-2 124M training steps on the CPU, side by side in one run: accel's examples/train_gpt2, llm.c's CPU
trainer train_gpt2.c and PyTorch (the model of gpt2_pytorch_reference.py), all f32, AdamW, B 4 x T 64, the
same thread count, from the same llm.c init file and token shard. The three programs take turns for
--rounds rounds, so that the machine's noise falls on all of them; each round's figure is the median of its
steps after the first, and the table quotes the median over rounds, each program's peak resident memory,
and accel's ratios to the others (issue 22's requirement: <= 0.3 x llm.c and <= 0.7 x PyTorch).

llm.c is not part of accel: build its train_gpt2 yourself from a checkout of karpathy/llm.c (`make
train_gpt2`) and pass the checkout's directory as --llmc. Its program reads gpt2_124M.bin and
dev/data/tinyshakespeare/*.bin from its working directory, runs 40 steps with a validation before the first,
and cannot be told to stop earlier, so this script gives it a directory of links to the generated files
and ends it after --llmc_steps steps. A comparison only, never a dependency of accel or its tests:

  python3 bench/gpt2_cpu_speed.py --accel build/examples/train_gpt2 --llmc /tmp/llm.c --rounds 3
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_pytorch_reference as reference  # noqa: E402


def run_timed(cmd, cwd, env, step_pattern, stop_after=None):
    """Runs cmd, returns (the ms of each step line, peak RSS in MiB, stdout). With stop_after, the program
    is ended once it has printed that many step lines."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    times, lines = [], []
    for line in proc.stdout:
        lines.append(line)
        m = re.search(step_pattern, line)
        if m:
            times.append(float(m.group(1)))
            if stop_after and len(times) >= stop_after:
                proc.terminate()
                break
    proc.stdout.close()
    _, status, usage = os.wait4(proc.pid, 0)
    if not stop_after and status != 0:
        sys.exit(f"{cmd[0]} failed (status {status}):\n{''.join(lines)}")
    if len(times) < 2:
        sys.exit(f"{cmd[0]} printed {len(times)} step line(s); at least 2 are needed:\n{''.join(lines)}")
    return times, usage.ru_maxrss / 1024.0, "".join(lines)


def pytorch_worker(args):
    """One PyTorch run, printing each step's time as `step N: X ms`."""
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    cfg, weights = reference.read_llmc_model(args.init_from)
    params, forward = reference.make_model(cfg, weights)
    decayed = [t for name, t in params.items() if name in reference.DECAYED]
    other = [t for name, t in params.items() if name not in reference.DECAYED]
    opt = torch.optim.AdamW([{"params": decayed, "weight_decay": 0.0}, {"params": other, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    tokens = reference.read_tokens(args.train_data)
    bt = args.batch_size * args.seq_len
    for step in range(args.steps):
        start = time.perf_counter()
        chunk = tokens[step * bt:(step + 1) * bt + 1]
        x = chunk[:-1].view(args.batch_size, args.seq_len)
        y = chunk[1:].view(args.batch_size, args.seq_len)
        opt.zero_grad()
        loss = F.cross_entropy(forward(x).view(-1, cfg["v"]), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
        opt.step()
        print(f"step {step}: loss {loss.item():.6f} {1e3 * (time.perf_counter() - start):.1f} ms", flush=True)


def llmc_run_dir(base, init_from, train_data):
    """The working directory llm.c's train_gpt2 expects, as links to the generated files."""
    run = os.path.join(base, "llmc_run")
    data = os.path.join(run, "dev", "data", "tinyshakespeare")
    os.makedirs(data, exist_ok=True)
    for link, target in [(os.path.join(run, "gpt2_124M.bin"), init_from),
                         (os.path.join(data, "tiny_shakespeare_train.bin"), train_data),
                         (os.path.join(data, "tiny_shakespeare_val.bin"), train_data)]:
        if not os.path.exists(link):
            os.symlink(os.path.abspath(target), link)
    return run


def memory_by_hand(b, t, layers=12, c=768, vp=50304, v=50257, max_t=1024):
    """accel's bytes for GPT-2's f32 step, counted from what each op keeps (MiB): parameters, grads,
    AdamW's two moments, and the activations saved for backward. Per layer and token: the residual
    input of each LayerNorm (2C), their outputs that the next Linear keeps (2C), the qkv projection that
    attention keeps (3C), attention's output that the projection keeps (C), the fc output GELU keeps (4C)
    and GELU's output fc_proj keeps (4C): 16C. Then ln_f's input and output (2C) and the logits (Vp)."""
    params = vp * c + max_t * c + layers * (12 * c * c + 13 * c) + 2 * c
    activations = b * t * (16 * c * layers + 2 * c + vp)
    mib = 4 / 2**20
    rows = [("parameters", params * mib), ("grads", params * mib), ("AdamW moments", 2 * params * mib),
            ("activations", activations * mib)]
    return rows + [("total", sum(r[1] for r in rows))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--accel", required=True, help="accel's train_gpt2 binary")
    parser.add_argument("--llmc", help="a checkout of llm.c in which `make train_gpt2` was run (else no llm.c rows)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8, help="steps of accel and PyTorch per round")
    parser.add_argument("--llmc_steps", type=int, default=6, help="steps of llm.c per round (it runs 40 if left)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--seq_len", type=int, default=64)
    parser.add_argument("--init_from", help=argparse.SUPPRESS)
    parser.add_argument("--train_data", help=argparse.SUPPRESS)
    parser.add_argument("--pytorch_worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pytorch_worker:
        return pytorch_worker(args)

    env = {"OMP_NUM_THREADS": str(args.threads), "PATH": "/usr/bin:/bin", "ACCEL_CONFIG_FILE": "/nonexistent"}
    with tempfile.TemporaryDirectory() as tmp:
        init_from, train_data = reference.write_inputs(tmp, 12, 32769, 0)
        programs = {
            "accel": dict(cmd=[os.path.abspath(args.accel), "--init_from", init_from, "--train_data", train_data, "--batch_size",
                               str(args.batch_size), "--seq_len", str(args.seq_len), "--steps", str(args.steps),
                               "--lr", "1e-4"],
                          cwd=tmp, pattern=r"^step \d+/\d+: .* ([\d.]+) ms ", stop_after=None),
            "pytorch": dict(cmd=[sys.executable, os.path.abspath(__file__), "--pytorch_worker", "--accel", args.accel,
                                 "--init_from", init_from, "--train_data", train_data, "--steps", str(args.steps),
                                 "--threads", str(args.threads), "--batch_size", str(args.batch_size),
                                 "--seq_len", str(args.seq_len)],
                            cwd=tmp, pattern=r"^step \d+: .* ([\d.]+) ms", stop_after=None),
        }
        if args.llmc:
            if (args.batch_size, args.seq_len) != (4, 64):
                sys.exit("llm.c's train_gpt2.c runs B 4 x T 64 only; leave --batch_size and --seq_len, or drop --llmc")
            programs["llm.c"] = dict(cmd=[os.path.join(os.path.abspath(args.llmc), "train_gpt2")],
                                     cwd=llmc_run_dir(tmp, init_from, train_data),
                                     pattern=r"^step \d+: train loss \S+ \(took ([\d.]+) ms\)",
                                     stop_after=args.llmc_steps)
        print(f"machine: {os.cpu_count()} cpus, {args.threads} threads each; load {os.getloadavg()[0]:.2f} at start; "
              f"GPT-2 124M, B {args.batch_size} x T {args.seq_len}, f32, AdamW")
        medians = {name: [] for name in programs}
        peaks = {name: 0.0 for name in programs}
        for r in range(args.rounds):
            row = []
            for name, p in programs.items():
                times, peak, _ = run_timed(p["cmd"], p["cwd"], env, p["pattern"], p["stop_after"])
                medians[name].append(statistics.median(times[1:]))  # the first step is warm-up
                peaks[name] = max(peaks[name], peak)
                row.append(f"{name} {medians[name][-1]:8.1f} ms")
            print(f"round {r + 1}: " + "   ".join(row), flush=True)
        print(f"\n{'program':<10}{'median step':>14}{'peak RSS':>12}{'accel / it':>12}")
        accel = statistics.median(medians["accel"])
        for name in programs:
            m = statistics.median(medians[name])
            print(f"{name:<10}{m:>11.1f} ms{peaks[name]:>8.0f} MiB{accel / m:>12.3f}")
        print("\naccel's memory by hand (f32): " + ", ".join(f"{name} {value:.0f} MiB"
                                                         for name, value in memory_by_hand(args.batch_size, args.seq_len)))
        verdicts = []
        for name, bound in (("llm.c", 0.3), ("pytorch", 0.7)):
            if name in programs:
                ratio = accel / statistics.median(medians[name])
                verdicts.append(f"accel / {name} = {ratio:.3f} (requirement <= {bound}: {'met' if ratio <= bound else 'NOT met'})")
        print("; ".join(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
