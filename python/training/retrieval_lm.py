"""Trains a small causal language model with PISA's sparse attention on a
long-range recall task, twice from one seed: with pisa's differentiable
attention (`torch.ops.pisa.attend`, bf16 kernels), and with a float32
PyTorch implementation of the same attention over the same selections
(pisa's selection of the run's own queries and keys). The loss curves must
agree: relative difference at most 2% at every logged step (the mean of
the last --log-every steps; exit 1 otherwise). Prints tokens/s of both runs
and of the same model on dense causal SDPA (flash, bf16).

  python3 python/training/retrieval_lm.py build DIR       # here: the library
      [--dq-from-scores]                                  # (dq from the dS tiles)
  python3 python/training/retrieval_lm.py run DIR         # on the GPU

`build` compiles docs/examples/train-prefill.mlir (`attend`, its training
entry points, `select`) into DIR/libtrain.so. `run` needs PyTorch and a
CUDA GPU (sm_90a), with PYTHONPATH=python from a checkout.

The model: 4 layers, d_model 512, 16 query heads over 1 KV head of dim 128
(rotary positions on 32 of them), a token shift, GELU MLP, AdamW. The task
(`recall_task`): the first half of each sequence lists key-value pairs, the
second half asks for them again (a key, then its value); "recall loss" is
the loss on the asked values: ln 256 for a model that guesses, 0 for one
that finds the pair, up to T tokens back, which the sparse attention must
select.
"""

import argparse
import math
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def build(args):
    os.makedirs(args.dir, exist_ok=True)
    out = os.path.join(args.dir, "libtrain.so")
    flags = ["--grad-dq-from-scores"] if args.dq_from_scores else []
    subprocess.run([args.pisa_compile, os.path.join(ROOT, "docs", "examples",
                                                    "train-prefill.mlir"), "-o", out, *flags],
                   check=True)
    print(f"built {out}")
    return 0


# ------------------------------------------------------------------- data

def recall_task(gen, n, length, keys, values, pairs=None):
    """(tokens [n, length], answers [length - 1]): sequences of key-value
    pairs, tokens [0, keys) being keys, [keys, keys + values) values and
    keys + values a filler. The first half holds `pairs` pairs (distinct
    keys, random values; by default length/4, filling it) at random places,
    fillers between them; the second half asks for pairs again, in random
    order: a key, then its value. `answers` marks the predictions of an
    asked value (prediction i is of token i + 1): exactly predictable, but
    only by finding the pair, up to `length` tokens back."""
    import torch

    slots = length // 4
    pairs = min(pairs or slots, slots, keys)
    asked = (length - 2 * slots) // 2
    x = torch.full((n, length), keys + values, dtype=torch.long)
    for b in range(n):
        k = torch.randperm(keys, generator=gen)[:pairs]
        v = keys + torch.randint(0, values, (pairs,), generator=gen)
        at = torch.randperm(slots, generator=gen)[:pairs] * 2
        x[b, at], x[b, at + 1] = k, v
        ask = torch.randint(0, pairs, (asked,), generator=gen)
        x[b, 2 * slots:2 * (slots + asked):2] = k[ask]
        x[b, 2 * slots + 1:2 * (slots + asked):2] = v[ask]
    answers = torch.zeros(length - 1, dtype=torch.bool)
    answers[2 * slots:2 * (slots + asked):2] = True
    return x, answers


# ------------------------------------------------------------ attentions

def reference_attention(q, k, v, sel, C):
    """Sparse attention in float32 over `sel` (token-major: q [B, T, Hq, d],
    k and v [B, T, Hkv, d], sel [B, T, Hkv, K]), queries at positions 0..T-1:
    each query's selected blocks gathered, causally masked, softmax. The
    entries used are docs/semantics.md section 6's (check_attention's
    `used_blocks`)."""
    import torch

    from device_checks.check_attention import used_blocks

    B, T, Hq, d = q.shape
    Hkv, K = k.shape[2], sel.shape[-1]
    G = Hq // Hkv
    used = used_blocks(sel.long(), -(-T // C)).permute(0, 2, 1, 3)  # [B, Hkv, T, K]
    blocks = sel.long().permute(0, 2, 1, 3).clamp(min=0)
    keys = (blocks[..., None] * C + torch.arange(C, device=q.device)).flatten(-2)
    t = torch.arange(T, device=q.device)[None, None, :, None]
    valid = used.repeat_interleave(C, -1) & (keys <= t)  # [B, Hkv, T, K C]
    base = (torch.arange(B * Hkv, device=q.device) * T).view(B, Hkv, 1, 1)
    flat = (base + keys.clamp(max=T - 1)).flatten()
    kf = k.float().permute(0, 2, 1, 3).reshape(B * Hkv * T, d)
    vf = v.float().permute(0, 2, 1, 3).reshape(B * Hkv * T, v.shape[-1])
    ks = kf[flat].view(B, Hkv, T, K * C, d)
    vs = vf[flat].view(B, Hkv, T, K * C, v.shape[-1])
    qh = q.float().view(B, T, Hkv, G, d).permute(0, 2, 1, 3, 4)  # [B, Hkv, T, G, d]
    s = torch.einsum("bhtgd,bhtjd->bhtgj", qh, ks) / math.sqrt(d)
    s = s.masked_fill(~valid[:, :, :, None, :], -math.inf)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    o = torch.einsum("bhtgj,bhtjd->bhtgd", p, vs)
    return o.permute(0, 2, 1, 3, 4).reshape(B, T, Hq, v.shape[-1])


def make_attention(kind, ops, C):
    import torch
    import torch.nn.functional as F

    if kind == "pisa":
        return lambda q, k, v: ops.attend(q.bfloat16(), k.bfloat16(), v.bfloat16(), 0).float()
    if kind == "reference":
        def reference(q, k, v):
            with torch.no_grad():
                sel = ops.select(q.bfloat16(), k.bfloat16(), 0, layout="bthk")
            return reference_attention(q, k, v, sel, C)
        return reference

    def dense(q, k, v):
        G = q.shape[2] // k.shape[2]
        k, v = (x.repeat_interleave(G, 2) for x in (k, v))
        o = F.scaled_dot_product_attention(
            *(x.bfloat16().transpose(1, 2) for x in (q, k, v)), is_causal=True)
        return o.transpose(1, 2).float()
    return dense


# ------------------------------------------------------------------ model

def build_model(args, attention):
    import torch
    from torch import nn

    hd, Hq, Hkv, D = 128, 16, 1, args.d_model
    vocab = args.keys + args.values + 1
    state = {"attention": attention}  # swappable after training

    def rope(x, rotary=32):
        """Rotary positions on the first `rotary` dims of each head (partial
        rotary, as in GPT-NeoX); the others match by content alone at any
        distance."""
        T, half = x.shape[1], rotary // 2
        freq = 10000.0 ** (-torch.arange(half, device=x.device, dtype=torch.float32) / half)
        angle = torch.arange(T, device=x.device, dtype=torch.float32)[:, None] * freq
        cos, sin = angle.cos()[None, :, None, :], angle.sin()[None, :, None, :]
        a, b, rest = x[..., :half], x[..., half:rotary], x[..., rotary:]
        return torch.cat((a * cos - b * sin, a * sin + b * cos, rest), -1)

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.RMSNorm(D), nn.RMSNorm(D)
            self.q = nn.Linear(D, Hq * hd, bias=False)
            self.kv = nn.Linear(D, 2 * Hkv * hd, bias=False)
            self.o = nn.Linear(Hq * hd, D, bias=False)
            self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

        def forward(self, x):
            B, T, _ = x.shape
            h = self.n1(x)
            q = rope(self.q(h).view(B, T, Hq, hd))
            k, v = self.kv(h).view(B, T, 2, Hkv, hd).unbind(2)
            x = x + self.o(state["attention"](q, rope(k), v).reshape(B, T, Hq * hd))
            return x + self.mlp(self.n2(x))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, D)
            # A token shift: each position also sees a learnt map of the
            # previous token's embedding, so a value's position carries its
            # key and an asked key finds its pair in one attention step.
            self.shift = nn.Linear(D, D, bias=False)
            self.layers = nn.ModuleList(Layer() for _ in range(args.layers))
            self.norm = nn.RMSNorm(D)
            self.head = nn.Linear(D, vocab, bias=False)

        def forward(self, tokens):
            e = self.embed(tokens)
            x = e + torch.nn.functional.pad(self.shift(e[:, :-1]), (0, 0, 1, 0))
            for layer in self.layers:
                x = layer(x)
            return self.head(self.norm(x))

    model = Model()
    model.state = state
    return model


def train(args, kind, ops, steps, log=True):
    """(logged mean losses, logged recall losses, tokens/s of the timed
    steps, the trained model, a sequence of its data)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(args.seed)
    model = build_model(args, make_attention(kind, ops, 64)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01,
                            betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(args.seed + 1)
    data, answers = recall_task(gen, steps * args.batch, args.tokens + 1, args.keys,
                                args.values, args.pairs)
    data, answers = data.view(steps, args.batch, -1).cuda(), answers.cuda()
    losses, recalls, logged, logged_recall = [], [], [], []
    start = end = None
    for step in range(steps):
        if step == args.warmup_timing:
            torch.cuda.synchronize()
            start = time.perf_counter()
        x = data[step]
        for g in opt.param_groups:
            g["lr"] = args.lr * min(1.0, (step + 1) / args.warmup)
        logits = model(x[:, :-1])
        per_token = F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten(),
                                    reduction="none").view(args.batch, -1)
        loss = per_token.mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.detach())
        recalls.append(per_token[:, answers].mean().detach())
        if (step + 1) % args.log_every == 0:
            logged.append(float(torch.stack(losses[-args.log_every:]).mean()))
            logged_recall.append(float(torch.stack(recalls[-args.log_every:]).mean()))
            if log:
                print(f"  {kind:9s} step {step + 1:4d}  loss {logged[-1]:.4f}  "
                      f"recall loss {logged_recall[-1]:.4f}", flush=True)
    torch.cuda.synchronize()
    end = time.perf_counter()
    timed = steps - args.warmup_timing
    rate = timed * args.batch * args.tokens / (end - start) if timed > 0 else float("nan")
    return logged, logged_recall, rate, model, data[0]


def dump_selections(path, model, tokens, ops):
    """Saves each layer's selection of `model` on `tokens` ([1, T])."""
    import numpy as np
    import torch

    selections, attention = [], model.state["attention"]

    def recording(q, k, v):
        sel = ops.select(q.bfloat16(), k.bfloat16(), 0, layout="bthk")
        selections.append(sel[0].cpu().numpy())
        return attention(q, k, v)

    model.state["attention"] = recording
    with torch.no_grad():
        model(tokens[:, :-1])
    model.state["attention"] = attention
    T = tokens.shape[1] - 1
    q = torch.randn(1, T, 16, 128, device="cuda").bfloat16()
    k = torch.randn(1, T, 1, 128, device="cuda").bfloat16()
    random = ops.select(q, k, 0, layout="bthk")[0].cpu().numpy()
    np.savez(path, random=random, **{f"layer{i}": s for i, s in enumerate(selections)})
    print(f"saved {len(selections)} selections to {path}")


def run(args):
    import torch
    import pisa.torch as pt

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    pt.load_library(os.path.join(args.dir, "libtrain.so"))
    ops = torch.ops.pisa
    t0 = time.time()
    print(f"{args.layers} layers, d_model {args.d_model}, 16 query heads over 1 KV head, "
          f"head dim 128; {args.batch} x {args.tokens} tokens a step, {args.steps} steps, "
          f"seed {args.seed}", flush=True)
    if args.only:
        logged, recall, rate, model, tokens = train(args, args.only, ops, args.steps,
                                                    log=False)
        print(f"{args.only} only: loss {logged[0]:.3f} -> {logged[-1]:.3f}, recall loss "
              f"{recall[0]:.3f} -> {recall[-1]:.3f}, {rate:,.0f} tokens/s", flush=True)
        if args.dump_selections:
            dump_selections(args.dump_selections, model, tokens, ops)
        return 0
    curves = {}
    for kind in ("pisa", "reference"):
        curves[kind] = train(args, kind, ops, args.steps)
    dense = train(args, "dense", ops, args.dense_steps, log=False)
    worst = 0.0
    for (a, b) in zip(curves["pisa"][0], curves["reference"][0]):
        worst = max(worst, abs(a - b) / abs(b))
    first, last = curves["pisa"][1][0], curves["pisa"][1][-1]
    print(f"recall loss (pisa) {first:.3f} -> {last:.3f} (a guess: ln {args.values} = "
          f"{math.log(args.values):.3f})")
    print(f"largest relative difference of the logged losses: {worst:.4f} (at most 0.02)")
    print(f"tokens/s: pisa {curves['pisa'][2]:,.0f}, float32 reference "
          f"{curves['reference'][2]:,.0f}, dense SDPA (flash, bf16) {dense[2]:,.0f}")
    print(f"wall time {time.time() - t0:.0f} s")
    return 0 if worst <= 0.02 else 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("dir")
    b.add_argument("--pisa-compile", default=os.path.join(ROOT, "build", "bin", "pisa-compile"))
    b.add_argument("--dq-from-scores", action="store_true",
                   help="pisa-compile --grad-dq-from-scores: the backward's dq from the key "
                        "kernel's dS tiles")
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--steps", type=int, default=300)
    r.add_argument("--tokens", type=int, default=16384)
    r.add_argument("--batch", type=int, default=1)
    r.add_argument("--layers", type=int, default=4)
    r.add_argument("--d-model", type=int, default=512)
    r.add_argument("--keys", type=int, default=8192)
    r.add_argument("--values", type=int, default=256)
    r.add_argument("--pairs", type=int, help="pairs a sequence holds (default: T/4)")
    r.add_argument("--lr", type=float, default=1e-3)
    r.add_argument("--warmup", type=int, default=30)
    r.add_argument("--log-every", type=int, default=10)
    r.add_argument("--warmup-timing", type=int, default=5,
                   help="steps before the timed ones")
    r.add_argument("--dense-steps", type=int, default=30)
    r.add_argument("--seed", type=int, default=2026)
    r.add_argument("--only", choices=("pisa", "reference", "dense"),
                   help="one run with this attention (no comparison)")
    r.add_argument("--dump-selections", metavar="FILE.npz",
                   help="with --only: save pisa's selection of each layer of the "
                        "trained model on one sequence, and of random q and k "
                        "([T, Hkv, K] int32 each)")
    args = ap.parse_args(argv)
    return build(args) if args.cmd == "build" else run(args)


if __name__ == "__main__":
    sys.exit(main())
