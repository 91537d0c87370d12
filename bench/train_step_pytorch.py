#!/usr/bin/env python3
"""PyTorch reference for bench/train_step: the same MLP 784-1024-1024-10 (ReLU), batch 256, AdamW and
f32 on random data, trained by the same loop, timed the same way. A comparison only, never a dependency."""
import argparse
import json
import os
import statistics
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=50, help="timed steps (after warm-up)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--widths", type=int, nargs="+", default=[784, 1024, 1024, 10])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: OMP_NUM_THREADS or all cores)")
    parser.add_argument("--json", default="", help="also write the results as JSON to this file ('-': stdout)")
    args = parser.parse_args()

    import torch

    threads = args.threads or int(os.environ.get("OMP_NUM_THREADS", "0")) or os.cpu_count()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    w = args.widths
    layers = []
    for i in range(len(w) - 1):
        if i > 0:
            layers.append(torch.nn.ReLU())
        layers.append(torch.nn.Linear(w[i], w[i + 1]))
    model = torch.nn.Sequential(*layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, w[0])
    y = torch.randint(0, w[-1], (args.batch,))

    forward_s, backward_s, update_s, step_s = [], [], [], []
    first_loss = last_loss = 0.0
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        optimizer.step()
        t3 = time.perf_counter()
        if i == 0:
            first_loss = loss.item()
        last_loss = loss.item()
        if i >= args.warmup:
            forward_s.append(t1 - t0)
            backward_s.append(t2 - t1)
            update_s.append(t3 - t2)
            step_s.append(t3 - t0)

    # The step's GEMMs, counted as bench/train_step.cpp counts them: per layer the forward and the
    # weight grad, and the input grad for every layer but the first.
    b = args.batch
    flops = sum(2 * 2 * b * w[i] * w[i + 1] for i in range(len(w) - 1))
    flops += sum(2 * b * w[i] * w[i + 1] for i in range(1, len(w) - 1))
    med = statistics.median(step_s)
    print(f"train_step_pytorch: torch {torch.__version__}, MLP {'-'.join(map(str, w))} (ReLU), batch {b}, AdamW, "
          f"f32, {torch.get_num_threads()} threads, {args.steps} steps after {args.warmup} warm-up")
    print(f"loss {first_loss:.4f} -> {last_loss:.4f}\n")
    print(f"{'phase':<22} {'median ms':>12}")
    print(f"{'zero_grad+forward+loss':<22} {1e3 * statistics.median(forward_s):12.3f}")
    print(f"{'backward':<22} {1e3 * statistics.median(backward_s):12.3f}")
    print(f"{'optimizer.step (AdamW)':<22} {1e3 * statistics.median(update_s):12.3f}")
    print(f"{'step':<22} {1e3 * med:12.3f}\n")
    print(f"median step {1e3 * med:.3f} ms, {flops / med / 1e9:.1f} GFLOP/s")
    if args.json:
        result = {"benchmark": "train_step_pytorch", "torch": torch.__version__, "widths": w, "batch": b,
                  "threads": torch.get_num_threads(), "steps": args.steps, "warmup": args.warmup,
                  "median_step_ms": 1e3 * med, "median_forward_ms": 1e3 * statistics.median(forward_s),
                  "median_backward_ms": 1e3 * statistics.median(backward_s),
                  "median_update_ms": 1e3 * statistics.median(update_s), "step_flops": flops,
                  "step_gflops": flops / med / 1e9, "final_loss": last_loss}
        text = json.dumps(result, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")


if __name__ == "__main__":
    main()
