"""Decode over a pyramid cache on the GPU: pisa.pyramid_append
then pisa.hier_topk ... capacity = Ncap, token by token, against a rebuilt
pyramid and a prefill selection, through one AOT library per configuration.

  python3 -m device_checks.check_decode build DIR --seed S --count N   # here
  python3 -m device_checks.check_decode check DIR [--steps 100]        # GPU
  python3 -m device_checks.check_decode bench DIR                      # GPU, timing, peers
  python3 -m device_checks.check_decode profile DIR                    # GPU, per kernel

Configurations (Hkv, G, d, C, K, g, dtype, key inputs, capacity Ncap) are
drawn from the seed, every other one within the decode block's fast paths
(g * K <= 32, mostly 16-bit with G <= 16). Each library has five entries:
  decode_step(q [1, Hq, 1, d], kcache [1, Hkv, Ncap, d], pcache (capacity
      layout, updated in place), from [1], to [1], n) -> selection for the
      query at t = n - 1 over keys 0 .. n - 1, read from the cache;
  decode_batch(q, kcache, pcache of 3 sequences, from [3], to [3]) ->
      pisa.pyramid_append then pisa.decode_select with seq_lens = to;
  decode_batch_paged(q, pool [?, S, Hkv, d], pcache, from, to, block_table
      [3, Ncap / S]) -> decode_batch over a page pool read through the table;
  build(k [1, Hkv, ?, d]) -> pisa.pyramid_build of the keys;
  select(q, k [1, Hkv, ?, d], pyramid, t) -> the single-stage selection
      over pyramid_build's layout.
`check` fills the cache with a random prefix in one append (a chunk),
then appends one key per step for --steps steps, and at every step
requires (docs/semantics.md, section 4): the cache's nodes bitwise equal
to `build` over the same keys, the rows outside them untouched (a
sentinel), the decode selection equal to `select` over the rebuilt
pyramid, and, every --ref-every steps, the selection passing against
the float64 reference (pisa.reference, the sweep's near-tie rule). Bad
appends (from > to, to > Ncap, from < 0) must leave the cache unchanged.
Then decode_batch runs three sequences of their own lengths (one empty)
for --batch-steps single appends each: every row must equal `select` over
that sequence's rebuilt pyramid, the empty sequence's rows K entries of -2.
decode_batch_paged then runs the same steps over the keys scattered into
pages of S keys (S drawn per configuration, any S >= 1) in a random order
with spare pages: its caches must stay bitwise equal to decode_batch's and
its selections equal; a page outside the pool must give that sequence -2
rows and leave its cache unchanged.
"""

import argparse
import json
import os
import random
import sys
import time

import numpy as np

from device_checks import sweep

SENTINEL = 1234.5
BATCH = 3  # sequences of decode_batch, one of them empty


def layout(n, C, g):
    """(offsets, sizes) of the pyramid of n keys (docs/semantics.md, 1)."""
    sizes = [-(-n // C)]
    while sizes[-1] > 1:
        sizes.append(-(-sizes[-1] // g))
    offsets = [0]
    for s in sizes[:-1]:
        offsets.append(offsets[-1] + s)
    return offsets, sizes


def program(cfg):
    t, Hkv, G, d = cfg["dtype"], cfg["Hkv"], cfg["G"], cfg["d"]
    C, K, g, cap = cfg["C"], cfg["K"], cfg["g"], cfg["Ncap"]
    rows = sum(layout(cap, C, g)[1])
    q = f"tensor<1x{Hkv * G}x1x{d}x{t}>"
    kc = f"tensor<1x{Hkv}x{cap}x{d}x{t}>"
    k = f"tensor<1x{Hkv}x?x{d}x{t}>"
    pc = f"tensor<1x{Hkv}x{rows}x{d}xf32>"
    p = f"tensor<1x{Hkv}x?x{d}xf32>"
    s = f"tensor<1x{Hkv}x1x{K}xi32>"
    nb = cfg.get("batch", BATCH)
    qb = f"tensor<{nb}x{Hkv * G}x1x{d}x{t}>"
    kcb = f"tensor<{nb}x{Hkv}x{cap}x{d}x{t}>"
    pcb = f"tensor<{nb}x{Hkv}x{rows}x{d}xf32>"
    sb = f"tensor<{nb}x{Hkv}x1x{K}xi32>"
    attrs = f"block_size = {C} branching = {g}"
    S = cfg["S"]
    pool = f"tensor<?x{S}x{Hkv}x{d}x{t}>"
    bt = f"tensor<{nb}x{cap // S}xi32>"
    single = ("{schedule = #pisa.schedule<single_stage, q_tile = 4, "
              "io_two_stage = 0, io_single_stage = 0>}")
    return f"""func.func @decode_step(%q: {q}, %kc: {kc}, %p: {pc}, %from: tensor<1xi32>,
                       %to: tensor<1xi32>, %n: index) -> {s} {{
  %p1 = pisa.pyramid_append %kc, %p, %from, %to {attrs}
      : {kc}, {pc}, tensor<1xi32>, tensor<1xi32> -> {pc}
  %k = tensor.extract_slice %kc[0, 0, 0, 0] [1, {Hkv}, %n, {d}] [1, 1, 1, 1] : {kc} to {k}
  %c1 = arith.constant 1 : index
  %t = arith.subi %n, %c1 : index
  %s = pisa.hier_topk %q, %k, %p1, %t topk = {K} {attrs} capacity = {cap}
      : {q}, {k}, {pc} -> {s}
  return %s : {s}
}}
func.func @decode_batch(%q: {qb}, %kc: {kcb}, %p: {pcb}, %from: tensor<{nb}xi32>,
                        %to: tensor<{nb}xi32>) -> {sb} {{
  %p1 = pisa.pyramid_append %kc, %p, %from, %to {attrs}
      : {kcb}, {pcb}, tensor<{nb}xi32>, tensor<{nb}xi32> -> {pcb}
  %s = pisa.decode_select %q, %kc, %p1 seq_lens(%to) topk = {K} {attrs}
      : {qb}, {kcb}, {pcb}, tensor<{nb}xi32> -> {sb}
  return %s : {sb}
}}
func.func @decode_batch_paged(%q: {qb}, %pool: {pool}, %p: {pcb}, %from: tensor<{nb}xi32>,
                              %to: tensor<{nb}xi32>, %bt: {bt}) -> {sb} {{
  %p1 = pisa.pyramid_append %pool, %p, %from, %to block_table(%bt : {bt}) {attrs}
      : {pool}, {pcb}, tensor<{nb}xi32>, tensor<{nb}xi32> -> {pcb}
  %s = pisa.decode_select %q, %pool, %p1 seq_lens(%to) block_table(%bt : {bt}) topk = {K} {attrs}
      : {qb}, {pool}, {pcb}, tensor<{nb}xi32> -> {sb}
  return %s : {sb}
}}
func.func @build(%k: {k}) -> {p} {{
  %p = pisa.pyramid_build %k {attrs} : {k} -> {p}
  return %p : {p}
}}
func.func @select(%q: {q}, %k: {k}, %p: {p}, %t: index) -> {s} {{
  %s = pisa.hier_topk %q, %k, %p, %t topk = {K} {attrs} {single}
      : {q}, {k}, {p} -> {s}
  return %s : {s}
}}
"""


def draw_configs(seed, count, max_cap, space=None):
    """The drawn configurations of `build` (without the paper's). With
    space="tensor-levels" every one is in the block's tensor-core level
    scorer (docs/gpu.md): bf16, G <= 16, g = 2, K <= 16 (every d and C of
    the sweep qualifies)."""
    rng = random.Random(seed)
    cfgs = []
    for i in range(count):
        c = sweep.draw_config(rng, i)
        cfg = {x: c[x] for x in ("Hkv", "G", "d", "C", "K", "g", "dtype", "inputs")}
        cfg["name"] = f"d{i:04d}"
        cfg["Hkv"] = min(cfg["Hkv"], 4)
        if space == "tensor-levels":
            cfg.update(g=2, dtype="bf16", G=rng.randint(1, 16), K=rng.randint(3, 16))
        elif i % 2:
            # Every other configuration in the decode block's fast paths
            # (docs/gpu.md): g * K <= 32 (the lane walk), and most of them
            # 16-bit with G <= 16 (tensor-core leaves when d % 32 == 0).
            cfg["K"] = rng.randint(3, 32 // cfg["g"])
            if rng.random() < 0.75:
                cfg["G"] = rng.randint(1, 16)
                cfg["dtype"] = rng.choice(("f16", "bf16"))
        cfg["Ncap"] = rng.choice((cfg["C"] * rng.randint(1, 40), rng.randint(1, max_cap)))
        # The paged entry's page size (any S >= 1); Ncap = Mp * S.
        cfg["S"] = rng.choice((1, 3, 16, 16, cfg["C"], 2 * cfg["C"], rng.randint(1, 200)))
        cfg["Ncap"] = -(-cfg["Ncap"] // cfg["S"]) * cfg["S"]
        cfgs.append(cfg)
    return cfgs


def build(args):
    cfgs = draw_configs(args.seed, args.count, args.max_cap, args.space)
    if args.paper:
        cfgs.append(dict(PAPER, Ncap=args.paper_capacity))
        # 64 sequences of 32K: the batched decode of docs/performance.md.
        cfgs.append(dict(PAPER, name="paper64", Ncap=32768, batch=64))
    t0 = time.time()
    built, rejected = sweep.compile_all(cfgs, args.out, args.pisa_compile, args.jobs, program)
    print(f"seed {args.seed}: built {len(built)}, rejected {len(rejected)} "
          f"in {time.time() - t0:.0f} s")
    with open(os.path.join(args.out, "decode.json"), "w") as f:
        json.dump({"seed": args.seed, "cases": built, "rejected": rejected}, f, indent=1)
    return 0


def check_case(lib, cfg, rng, steps, ref_every):
    """(ok, note) for one library: a prefix, then `steps` single appends."""
    import torch
    from pisa import reference

    Hkv, G, d, C, K, g = (cfg[x] for x in ("Hkv", "G", "d", "C", "K", "g"))
    cap = cfg["Ncap"]
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    offsets, sizes = layout(cap, C, g)
    keys = torch.from_numpy(sweep.make_keys(np.random.default_rng(rng.randrange(2**32)),
                                            cfg, (1, Hkv, cap, d))).to(dt).cuda()
    cache = torch.full((1, Hkv, sum(sizes), d), SENTINEL, device="cuda")
    steps = min(steps, cap - 1)
    n0 = rng.randint(1, cap - steps)
    problems, ref_rows = [], 0

    def bounds(a, b):
        return (torch.tensor([a], dtype=torch.int32, device="cuda"),
                torch.tensor([b], dtype=torch.int32, device="cuda"))

    def step(frm, to, n):
        q = torch.randn(1, Hkv * G, 1, d, device="cuda").to(dt)
        sel = lib("decode_step", q, keys, cache, *bounds(frm, to), n)
        return q, sel

    # Bad appends first: nothing written to a sentinel-filled cache.
    for frm, to in ((5, 3), (0, cap + 1), (-1, 2), (2, 2)):
        step(frm, to, 1)
        torch.cuda.synchronize()
        if not bool((cache == SENTINEL).all()):
            problems.append(f"append({frm}, {to}) wrote the cache")
            cache.fill_(SENTINEL)
    n, frm = n0, 0
    for i in range(steps + 1):
        q, sel = step(frm, n, n)
        # The cache's nodes against pyramid_build of keys 0 .. n - 1.
        k = keys[:, :, :n].contiguous()
        noffsets, nsizes = layout(n, C, g)
        built = lib("build", k, out=torch.empty(1, Hkv, sum(nsizes), d, device="cuda"))
        torch.cuda.synchronize()
        for l, (size, no) in enumerate(zip(nsizes, noffsets)):
            co = offsets[l]
            a, b = cache[:, :, co:co + size], built[:, :, no:no + size]
            if not torch.equal(a.view(torch.int32), b.view(torch.int32)):
                bad = int((a != b).any(-1).sum())
                problems.append(f"n={n}: level {l + 1}: {bad} nodes differ from pyramid_build")
                break
            if co + size < co + sizes[l] and not bool(
                    (cache[:, :, co + size:co + sizes[l]] == SENTINEL).all()):
                problems.append(f"n={n}: level {l + 1}: rows past N's nodes written")
                break
        want = lib("select", q, k, built, n - 1)
        if not torch.equal(sel, want):
            problems.append(f"n={n}: decode selection {sel.flatten().tolist()} != prefill "
                            f"{want.flatten().tolist()}")
        if i % ref_every == 0 or i == steps:
            ref, gaps = reference.select(q.double(), k.double(), C, K, g, offset=n - 1)
            ok, summary = sweep.verdict(sel.cpu().numpy(), ref.cpu().numpy(),
                                        gaps.cpu().numpy())
            ref_rows += summary["rows"]
            if not ok:
                problems.append(f"n={n}: against the reference: {summary}")
        if problems:
            break
        frm, n = n, n + 1
    note = (f"{cfg['name']} Hkv={Hkv} G={G} d={d} C={C} K={K} g={g} {cfg['dtype']} "
            f"{cfg['inputs']} Ncap={cap}: prefix {n0}, {steps} appends, "
            f"{ref_rows} reference rows")
    return not problems, note + ("" if not problems else ": " + "; ".join(problems[:3]))


def check_batch(lib, cfg, rng, steps):
    """(ok, note): decode_batch (per-sequence append, then decode_select) on
    BATCH sequences of their own lengths, one of them empty, for `steps`
    single appends each, every valid row equal to `select` over its
    sequence's rebuilt pyramid and the empty one K entries of -2."""
    import torch

    Hkv, G, d, C, K, g = (cfg[x] for x in ("Hkv", "G", "d", "C", "K", "g"))
    cap = cfg["Ncap"]
    nb = cfg.get("batch", BATCH)
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    rows = sum(layout(cap, C, g)[1])
    keys = torch.from_numpy(sweep.make_keys(np.random.default_rng(rng.randrange(2**32)),
                                            cfg, (nb, Hkv, cap, d))).to(dt).cuda()
    cache = torch.full((nb, Hkv, rows, d), SENTINEL, device="cuda")
    steps = min(steps, cap - 1)
    empty = rng.randrange(nb)
    lens = [0 if b == empty else rng.randint(1, cap - steps) for b in range(nb)]
    frm = [0] * nb
    problems = []
    for i in range(steps + 1):
        q = torch.randn(nb, Hkv * G, 1, d, device="cuda").to(dt)
        f = torch.tensor(frm, dtype=torch.int32, device="cuda")
        t = torch.tensor(lens, dtype=torch.int32, device="cuda")
        sel = lib("decode_batch", q, keys, cache, f, t)
        for b in range(nb):
            n = lens[b]
            if n == 0:
                if not bool((sel[b] == -2).all()):
                    problems.append(f"step {i}: the empty sequence's rows are not -2")
                continue
            k = keys[b:b + 1, :, :n].contiguous()
            built = lib("build", k, out=torch.empty(1, Hkv, sum(layout(n, C, g)[1]), d,
                                                   device="cuda"))
            want = lib("select", q[b:b + 1], k, built, n - 1)
            if not torch.equal(sel[b:b + 1], want):
                problems.append(f"step {i}: sequence {b} (N = {n}): "
                                f"{sel[b].flatten().tolist()} != {want.flatten().tolist()}")
        if problems:
            break
        frm = list(lens)
        lens = [n + 1 if n else 0 for n in lens]
    note = (f"{cfg['name']}#batch lengths {[n - steps if n else 0 for n in lens]} "
            f"+ {steps} appends each")
    return not problems, note + ("" if not problems else ": " + "; ".join(problems[:3]))


def check_paged(lib, cfg, rng, steps):
    """(ok, note): decode_batch_paged over a page pool (pages of S keys in a
    random order, spare pages beside them) against decode_batch over the
    same keys stored contiguously, step by step: the pyramid caches
    bitwise equal and the selections equal (decode_batch is checked
    against the prefill selection by check_batch). Then one sequence's
    table gets a page outside the pool: its rows must be -2 and its cache
    unchanged, the others still equal."""
    import torch

    Hkv, G, d, C, K, g, S = (cfg[x] for x in ("Hkv", "G", "d", "C", "K", "g", "S"))
    cap, nb = cfg["Ncap"], cfg.get("batch", BATCH)
    Mp = cap // S
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    rows = sum(layout(cap, C, g)[1])
    keys = torch.from_numpy(sweep.make_keys(np.random.default_rng(rng.randrange(2**32)),
                                            cfg, (nb, Hkv, cap, d))).to(dt).cuda()
    pages = nb * Mp + 3
    order = torch.randperm(pages, generator=torch.Generator().manual_seed(rng.randrange(2**31)))
    table = order[:nb * Mp].view(nb, Mp).to(torch.int32).cuda()
    pool = torch.randn(pages, S, Hkv, d, device="cuda").to(dt)
    # pool[table[b, m], s] = keys[b, :, m S + s]
    pool[table.long().flatten()] = keys.view(nb, Hkv, Mp, S, d).permute(0, 2, 3, 1, 4) \
        .reshape(nb * Mp, S, Hkv, d)
    cache = torch.full((nb, Hkv, rows, d), SENTINEL, device="cuda")
    paged = cache.clone()
    steps = min(steps, cap - 1)
    empty = rng.randrange(nb)
    lens = [0 if b == empty else rng.randint(1, cap - steps) for b in range(nb)]
    frm = [0] * nb
    problems = []
    vec = lambda xs: torch.tensor(xs, dtype=torch.int32, device="cuda")
    for i in range(steps + 1):
        q = torch.randn(nb, Hkv * G, 1, d, device="cuda").to(dt)
        want = lib("decode_batch", q, keys, cache, vec(frm), vec(lens))
        got = lib("decode_batch_paged", q, pool, paged, vec(frm), vec(lens), table)
        torch.cuda.synchronize()
        if not torch.equal(cache.view(torch.int32), paged.view(torch.int32)):
            problems.append(f"step {i}: the paged cache differs from the contiguous one")
        if not torch.equal(got, want):
            problems.append(f"step {i}: paged selection {got.flatten().tolist()[:16]} != "
                            f"contiguous {want.flatten().tolist()[:16]}")
        if problems:
            break
        frm = list(lens)
        lens = [n + 1 if n and n < cap else n for n in lens]
    victim = next((b for b in range(nb) if lens[b]), None)
    if not problems and victim is not None:
        bad = table.clone()
        bad[victim, rng.randrange(max(1, -(-lens[victim] // S)))] = pages  # outside
        before = paged[victim].clone()
        q = torch.randn(nb, Hkv * G, 1, d, device="cuda").to(dt)
        nxt = [n + 1 if n and n < cap else n for n in lens]
        want = lib("decode_batch", q, keys, cache, vec(lens), vec(nxt))
        got = lib("decode_batch_paged", q, pool, paged, vec(lens), vec(nxt), bad)
        torch.cuda.synchronize()
        if not bool((got[victim] == -2).all()):
            problems.append("a page outside the pool did not give -2 rows")
        if not torch.equal(paged[victim].view(torch.int32), before.view(torch.int32)):
            problems.append("a page outside the pool: the cache was written")
        others = [b for b in range(nb) if b != victim]
        if not torch.equal(got[others], want[others]):
            problems.append("a bad page of one sequence changed the others' selections")
        # pisa_F_validate names the bad entry, and a page shared by two
        # sequences, launching nothing (every sequence given a key here:
        # validate refuses an empty one as seq_lens first).
        full = [max(n, 1) for n in nxt]
        shared = table.clone()
        shared[1, 0] = shared[0, 0]
        for tab, words in ((bad, "is outside the pool"), (shared, "is named by")):
            try:
                lib.validate("decode_batch_paged", q, pool, paged, vec(full), vec(full), tab)
                problems.append(f"validate accepted a table whose page {words}")
            except RuntimeError as e:
                if words not in str(e):
                    problems.append(f"validate: {e}")
    note = (f"{cfg['name']}#paged S={S} Mp={Mp} lengths "
            f"{[max(0, n - steps) for n in lens]} + {steps} appends each, bad and "
            "shared pages (kernels and validate)")
    return not problems, note + ("" if not problems else ": " + "; ".join(problems[:3]))


def check(args):
    import torch
    from pisa import aot

    with open(os.path.join(args.dir, "decode.json")) as f:
        data = json.load(f)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"decode check: input seed {seed}, {len(data['cases'])} libraries", flush=True)
    torch.manual_seed(seed)
    passed = failed = 0
    t0 = time.time()
    for cfg in data["cases"]:
        if args.only and cfg["name"] not in args.only:
            continue
        if time.time() - t0 > args.budget:
            print(f"budget of {args.budget} s spent: stopping", flush=True)
            break
        lib = aot.Library(os.path.join(args.dir, cfg["lib"]))
        ok, note = check_case(lib, cfg, random.Random(f"{seed}/{cfg['name']}"),
                              args.steps, args.ref_every)
        passed += ok
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {note}", flush=True)
        if args.batch_steps:
            ok, note = check_batch(lib, cfg, random.Random(f"{seed}/{cfg['name']}/batch"),
                                   args.batch_steps)
            passed += ok
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {note}", flush=True)
            ok, note = check_paged(lib, cfg, random.Random(f"{seed}/{cfg['name']}/paged"),
                                   args.batch_steps)
            passed += ok
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {note}", flush=True)
    print(f"decode check: {passed} passed, {failed} failed")
    return 0 if failed == 0 and passed else 1


PAPER = {"name": "paper", "Hkv": 1, "G": 16, "d": 128, "C": 64, "K": 8, "g": 2,
         "dtype": "bf16", "inputs": "gaussian", "Ncap": 131072, "S": 16}


def graph_time(fn, steps, samples):
    """Median GPU microseconds per step of fn(0) .. fn(steps - 1), captured
    in a CUDA graph so that host time (ctypes, the wrapper) is out of the
    figure: CUDA events around each of `samples` replays, after a warm-up
    call and replay. Replays repeat the same appends, which leave a cache
    as it is."""
    import statistics
    import torch

    fn(0)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(steps):
            fn(i)
    graph.replay()
    times = []
    for _ in range(samples):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(True), torch.cuda.Event(True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / steps)
    return statistics.median(times)


class PaperDecode:
    """decode_step of libpaper.so (the paper setting) over random keys in a
    cache of `capacity` keys, for bench and profile."""

    def __init__(self, directory, capacity):
        import torch
        from pisa import aot

        self.torch = torch
        self.lib = aot.Library(os.path.join(directory, "libpaper.so"))
        self.cap, self.d, self.C, self.g = capacity, PAPER["d"], PAPER["C"], PAPER["g"]
        self.keys = torch.randn(1, 1, capacity, self.d, device="cuda").to(torch.bfloat16)
        self.q = torch.randn(1, 16, 1, self.d, device="cuda").to(torch.bfloat16)
        self.out = torch.empty(1, 1, 1, PAPER["K"], dtype=torch.int32, device="cuda")
        self.ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")

    def one(self, a):
        return self.torch.tensor([a], dtype=self.torch.int32, device="cuda")

    def filled(self, n, steps):
        """A cache of keys 0 .. n - 1 (one append) and the (from, to) of
        `steps` single appends after it, prepared on the device."""
        cache = self.torch.zeros(1, 1, sum(layout(self.cap, self.C, self.g)[1]), self.d,
                                 device="cuda")
        self.step(cache, (self.one(0), self.one(n)), n)
        return cache, [(self.one(n + i), self.one(n + i + 1)) for i in range(steps)]

    def step(self, cache, bounds, n):
        """Append keys bounds[0] .. bounds[1] - 1, then select for query n - 1."""
        return self.lib("decode_step", self.q, self.keys, cache, *bounds, n,
                        out=self.out, workspace=self.ws)


def bench(args):
    """GPU time of one decode step (append one key + select) against
    rebuilding the pyramid and selecting over it and against flat
    selection over all N keys (flat_decode.py), paper setting, at
    several lengths of a 128K cache: --steps steps (their from/to prepared
    on the device) captured in a CUDA graph, CUDA events around its
    replays, median of --samples after a warm-up replay (graph_time)."""
    import torch
    from pisa import aot
    from device_checks.flat_decode import flat_select, overlap

    paper = PaperDecode(args.dir, args.capacity)
    lib, q, out, ws = paper.lib, paper.q, paper.out, paper.ws
    cap, d, C, g = paper.cap, paper.d, paper.C, paper.g
    c = PAPER
    print("| N | decode step (append + select) us | rebuild + select us | "
          "flat selection us | rebuild / step | flat / step | flat top-K in step's |")
    print("|---|---|---|---|---|---|---|")
    for n in args.lengths:
        n = min(n, cap - args.steps - 1)
        cache, bounds = paper.filled(n, args.steps)
        k = paper.keys[:, :, :n].contiguous()
        prows = sum(layout(n, C, g)[1])
        built = torch.empty(1, 1, prows, d, device="cuda")

        step = graph_time(lambda i: paper.step(cache, bounds[i], n + i + 1),
                          args.steps, args.samples)
        # The last replay's last step selected for n + steps keys.
        last = paper.out.clone()
        rebuild = graph_time(lambda i: (lib("build", k, out=built, workspace=ws),
                                        lib("select", q, k, built, n - 1, out=out,
                                            workspace=ws)),
                             args.steps, args.samples)
        top = n + args.steps
        lens = [paper.one(n + i + 1) for i in range(args.steps)]
        scores = torch.empty(1, -(-top // C), device="cuda")
        flat = graph_time(lambda i: flat_select(q, paper.keys, lens[i], C, c["K"], top,
                                                scores),
                          args.steps, args.samples)
        share = overlap(last, flat_select(q, paper.keys, paper.one(top), C, c["K"], top))
        print(f"| {n} | {step:.1f} | {rebuild:.1f} | {flat:.1f} | {rebuild / step:.1f} | "
              f"{flat / step:.1f} | {share:.3f} |", flush=True)
    batched = os.path.join(args.dir, "libpaper64.so")
    if os.path.exists(batched):
        # 64 sequences of about 32K keys each, one decode step each
        # (decode_batch: append one key per sequence, then decode_select).
        lib64 = aot.Library(batched)
        cap64, B = 32768, 64
        rows64 = sum(layout(cap64, C, g)[1])
        keys64 = torch.randn(B, 1, cap64, d, device="cuda").to(torch.bfloat16)
        cache64 = torch.zeros(B, 1, rows64, d, device="cuda")
        q64 = torch.randn(B, 16, 1, d, device="cuda").to(torch.bfloat16)
        out64 = torch.empty(B, 1, 1, c["K"], dtype=torch.int32, device="cuda")
        start = [cap64 - args.steps - 1 - 7 * b for b in range(B)]
        vec = lambda xs: torch.tensor(xs, dtype=torch.int32, device="cuda")
        lib64("decode_batch", q64, keys64, cache64, vec([0] * B), vec(start), out=out64)
        steps64 = [(vec([x + i for x in start]), vec([x + i + 1 for x in start]))
                   for i in range(args.steps)]
        ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        per_step = graph_time(lambda i: lib64("decode_batch", q64, keys64, cache64,
                                              *steps64[i], out=out64, workspace=ws),
                              args.steps, args.samples)
        last = out64.clone()
        top = start[0] + args.steps
        scores = torch.empty(B, -(-top // C), device="cuda")
        flat = graph_time(lambda i: flat_select(q64, keys64, steps64[i][1], C, c["K"], top,
                                                scores),
                          args.steps, args.samples)
        share = overlap(last, flat_select(q64, keys64, steps64[-1][1], C, c["K"], top))
        print(f"B = 64 sequences of {start[-1]}..{start[0]} keys (32K cache): "
              f"{per_step:.1f} us per step (append + decode_select); flat selection "
              f"{flat:.1f} us ({flat / per_step:.1f}x), flat top-K in the step's: {share:.3f}")
    return 0


def profile(args):
    """GPU time of each kernel of a decode step (append, selection), paper
    setting: torch.profiler over --steps decode_step calls at each length,
    after a warm-up call; the mean per call of each kernel."""
    import torch

    paper = PaperDecode(args.dir, args.capacity)
    print("| N | kernel | us per call |")
    print("|---|---|---|")
    for n in args.lengths:
        n = min(n, paper.cap - args.steps - 1)
        cache, bounds = paper.filled(n, args.steps)
        torch.cuda.synchronize()
        activities = [torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities) as prof:
            for i in range(args.steps):
                paper.step(cache, bounds[i], n + i + 1)
            torch.cuda.synchronize()
        for e in prof.key_averages():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                print(f"| {n} | {e.key} | {e.self_device_time_total / e.count:.2f} |")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out")
    b.add_argument("--seed", type=int, required=True)
    b.add_argument("--count", type=int, default=20)
    b.add_argument("--max-cap", type=int, default=20000)
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    b.add_argument("--pisa-compile", default="build/bin/pisa-compile")
    b.add_argument("--paper", action="store_true",
                   help="also the paper setting with a 128K cache (libpaper.so, for bench)")
    b.add_argument("--space", choices=("tensor-levels",),
                   help="draw only inside the block's tensor-core level scorer")
    b.add_argument("--paper-capacity", type=int, default=PAPER["Ncap"],
                   help="libpaper.so's Ncap (bench --capacity must match)")
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("--seed", type=int)
    c.add_argument("--steps", type=int, default=100)
    c.add_argument("--ref-every", type=int, default=25)
    c.add_argument("--batch-steps", type=int, default=20,
                   help="steps of decode_batch per library (0: none)")
    c.add_argument("--only", nargs="*")
    c.add_argument("--budget", type=float, default=400)
    m = sub.add_parser("bench")
    m.add_argument("dir", help="holds libpaper.so (build --paper)")
    m.add_argument("--lengths", type=int, nargs="+",
                   default=[4096, 16384, 65536, 131000])
    m.add_argument("--steps", type=int, default=50)
    m.add_argument("--samples", type=int, default=9)
    m.add_argument("--capacity", type=int, default=PAPER["Ncap"],
                   help="the library's Ncap (libpaper.so built with another)")
    f = sub.add_parser("profile")
    f.add_argument("dir", help="holds libpaper.so (build --paper)")
    f.add_argument("--lengths", type=int, nargs="+", default=[4096, 131000])
    f.add_argument("--steps", type=int, default=20)
    f.add_argument("--capacity", type=int, default=PAPER["Ncap"])
    args = parser.parse_args(argv)
    return {"build": build, "check": check, "bench": bench,
            "profile": profile}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
