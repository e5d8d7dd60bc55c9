"""The generated varlen sweep: packed batches of different lengths
(docs/semantics.md, section 7) through one AOT library per configuration,
against the float64 reference of the batched contract, sequence by sequence.

  python3 -m device_checks.sweep_varlen build DIR --seed S --count N   # here
  python3 -m device_checks.sweep_varlen check DIR [--graph]            # GPU

Configurations (G, Hkv, d, C, K, g, dtype, inputs) are drawn as in
device_checks.sweep, each with a schedule (single-stage, two-stage, or the
compiler's choice, a third each); every library has dynamic Tq, Tk and B
and two entry points, the selection and the pyramid. `check` calls each on --batches
packed batches drawn from the seed: B in 0..8 with lengths mixing 0, 1,
C - 1, C, C + 1 and long ones (up to --max-n), each sequence prefill, a
chunk, decode (one query) or no query. It compares every sequence's
selection with pisa.reference.select at query_offset = N_b - Nq_b (the
sweep's verdict: differing rows only at near ties) and its pyramid rows
R_b .. R_b + P_b - 1 with pisa.reference.pyramid. With --graph, each
library's call is also captured in a CUDA graph and replayed on a second
batch of other lengths written into the same buffers (same Tq, Tk and B):
the replay must equal a direct call on that batch.
"""

import argparse
import json
import os
import random
import sys
import time
import zlib

import numpy as np

from device_checks import sweep

ROWS_PER_SEQUENCE = 32  # kVarlenRowsPerSequence


def varlen_rows(total_keys, num_seqs, C):
    """R = 2 floor(Tk / C) + 32 B (docs/semantics.md, section 7)."""
    return 2 * (total_keys // C) + ROWS_PER_SEQUENCE * num_seqs


def program(cfg):
    t, Hkv, G, d = cfg["dtype"], cfg["Hkv"], cfg["G"], cfg["d"]
    C, K, g = cfg["C"], cfg["K"], cfg["g"]
    q = f"tensor<?x{Hkv * G}x{d}x{t}>"
    k = f"tensor<?x{Hkv}x{d}x{t}>"
    p = f"tensor<?x{Hkv}x{d}xf32>"
    r = f"tensor<?x{Hkv}x{K}xi32>"
    cu = "tensor<?xi32>"
    attrs = f"block_size = {C} branching = {g}"
    # A schedule given (both kinds are drawn), else the compiler's choice.
    sched = ""
    if cfg.get("schedule"):
        sched = (f" {{schedule = #pisa.schedule<{cfg['schedule']}, q_tile = 4, "
                 "io_two_stage = 0, io_single_stage = 0>}")
    return f"""func.func @varlen_select(%q: {q}, %k: {k}, %cuq: {cu}, %cuk: {cu}) -> {r} {{
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cuk) {attrs} : {k}, {cu} -> {p}
  %s = pisa.hier_topk_varlen %q, %k, %p cu_seqlens(%cuq, %cuk) topk = {K} {attrs}{sched}
      : {q}, {k}, {p}, {cu}, {cu} -> {r}
  return %s : {r}
}}
func.func @varlen_pyramid(%k: {k}, %cuk: {cu}) -> {p} {{
  %p = pisa.pyramid_build_varlen %k cu_seqlens(%cuk) {attrs} : {k}, {cu} -> {p}
  return %p : {p}
}}
"""


def build(args):
    rng = random.Random(args.seed)
    cfgs = []
    for i in range(args.count):
        cfg = sweep.draw_config(rng, i)
        cfg = {x: cfg[x] for x in ("name", "Hkv", "G", "d", "C", "K", "g", "dtype",
                                   "inputs")}
        cfg["schedule"] = rng.choice((None, "single_stage", "two_stage"))
        cfgs.append(cfg)
    # The paper's family, where the walk scores on tensor cores (bf16,
    # G = 16, g = 2, 4K % 8 == 0): rare among drawn configurations.
    for i in range(args.tensor_core_walks):
        cfgs.append({"name": f"t{i:04d}", "Hkv": rng.randint(1, 4), "G": 16,
                     "d": rng.choice((64, 128, 256)), "C": rng.choice(sweep.BLOCK_SIZES),
                     "K": rng.choice((4, 6, 8, 12, 16)), "g": 2, "dtype": "bf16",
                     "inputs": rng.choices(sweep.INPUTS, (0.6, 0.25, 0.15))[0],
                     "schedule": rng.choice((None, "two_stage"))})
    t0 = time.time()
    built, rejected = sweep.compile_all(cfgs, args.out, args.pisa_compile, args.jobs, program)
    print(f"seed {args.seed}: built {len(built)}, rejected {len(rejected)} "
          f"in {time.time() - t0:.0f} s")
    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump({"seed": args.seed, "cases": built, "rejected": rejected}, f, indent=1)
    return 0


def draw_batch(rng, C, max_n, j):
    """(lengths N_b, query counts Nq_b) of batch j: the first an edges
    batch, the others drawn (sometimes empty)."""
    if j == 0:
        lengths = [0, 1, max(C - 1, 1), C, C + 1, sweep.draw_length(rng, C, max_n)]
        rng.shuffle(lengths)
    else:
        B = 0 if rng.random() < 0.05 else rng.randint(1, 8)
        lengths = [0 if rng.random() < 0.1 else sweep.draw_length(rng, C, max_n // 2)
                   for _ in range(B)]
    queries = []
    for n in lengths:
        kind = rng.choices(("prefill", "decode", "chunk", "none"), (0.35, 0.35, 0.2, 0.1))[0]
        queries.append(n if kind == "prefill" else min(n, 1) if kind == "decode"
                       else rng.randint(0, n) if kind == "chunk" else 0)
    return lengths, queries


def cu_of(counts):
    return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int32)


def packed_inputs(nrng, cfg, lengths, queries, tgen):
    """(q [Tq, Hq, d], k [Tk, Hkv, d]) on the GPU, keys per sequence as the
    configuration's inputs say (hot keys and ties drawn by NumPy's nrng)."""
    import torch
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[cfg["dtype"]]
    Hkv, G, d = cfg["Hkv"], cfg["G"], cfg["d"]
    if cfg["inputs"] == "gaussian":
        k = torch.randn((sum(lengths), Hkv, d), generator=tgen, device="cuda")
    else:
        parts = [sweep.make_keys(nrng, cfg, (1, Hkv, n, d))[0].transpose(1, 0, 2)
                 for n in lengths if n]
        k = torch.from_numpy(np.concatenate(parts) if parts else
                             np.zeros((0, Hkv, d))).float().cuda()
    q = torch.randn((sum(queries), Hkv * G, d), generator=tgen, device="cuda")
    return q.to(dt).contiguous(), k.to(dt).contiguous()


def compare(cfg, q, k, cuq, cuk, sel, pyr, rng, max_rows, mutate=False):
    """Per sequence: the selection against reference.select (sampled rows)
    and the pyramid rows against reference.pyramid. Returns the summaries
    of sweep.verdict merged, plus the pyramid's largest relative error."""
    import torch
    from pisa import reference

    C, K, g = cfg["C"], cfg["K"], cfg["g"]
    got_all, want_all, gap_all = [], [], []
    pyr_err = 0.0
    for b in range(len(cuk) - 1):
        k0, k1, q0, q1 = int(cuk[b]), int(cuk[b + 1]), int(cuq[b]), int(cuq[b + 1])
        n, nq = k1 - k0, q1 - q0
        if n == 0:
            continue
        kb = k[k0:k1].transpose(0, 1)[None]
        if pyr is not None:
            levels = reference.pyramid(kb, C, g)
            want_p = torch.cat([lv[0] for lv in levels], dim=1)  # [Hkv, P, d]
            r0 = 2 * (k0 // C) + ROWS_PER_SEQUENCE * b
            got_p = pyr[r0:r0 + want_p.shape[1]].transpose(0, 1).double()
            err = ((got_p - want_p).abs() / (1 + want_p.abs())).max().item()
            pyr_err = max(pyr_err, err)
        if nq == 0:
            continue
        qb = q[q0:q1].transpose(0, 1)[None]
        rows = torch.from_numpy(sweep.sample_rows(rng, {"Nq": nq, "C": C}, max_rows)).cuda()
        # --mutate: the reference one position early, which a sound
        # check must catch.
        offset = max(0, n - nq - 1) if mutate else n - nq
        want, gaps = reference.select(qb, kb, C, K, g, offset=offset, rows=rows)
        got_all.append(sel[q0:q1][rows].transpose(0, 1).cpu().numpy())
        want_all.append(want[0].cpu().numpy())
        gap_all.append(gaps[0].cpu().numpy())
    if got_all:
        ok, summary = sweep.verdict(np.concatenate(got_all, 1), np.concatenate(want_all, 1),
                                    np.concatenate(gap_all, 1))
    else:
        ok, summary = True, {"rows": 0, "differ": 0, "unexplained": 0}
    summary["pyramid_max_rel_error"] = pyr_err
    # Means of f32 sums in a fixed order: within a few ulps of float64.
    ok = ok and pyr_err <= 1e-5
    return ok, summary


def redistribute(rng, lengths, queries):
    """Other lengths N_b and query counts Nq_b <= N_b with the same B, Tk
    and Tq: a random composition of Tk, then Tq spread where it fits."""
    B, Tk, Tq = len(lengths), sum(lengths), sum(queries)
    if B < 2:
        return list(lengths), list(queries)
    cuts = sorted(rng.randint(0, Tk) for _ in range(B - 1))
    new_lengths = [b - a for a, b in zip([0] + cuts, cuts + [Tk])]
    new_queries = [0] * B
    left = Tq
    for b in rng.sample(range(B), B):
        new_queries[b] = rng.randint(0, min(new_lengths[b], left))
        left -= new_queries[b]
    for b in range(B):  # the rest where there is room
        add = min(left, new_lengths[b] - new_queries[b])
        new_queries[b] += add
        left -= add
    return new_lengths, new_queries


def check_graph(lib, cfg, rng, tgen, args):
    """Captures the selection call in a CUDA graph on batch A, writes batch
    B (other lengths, same Tq, Tk and B) into the captured buffers, replays,
    and compares with a direct call on B. Returns (ok, note)."""
    import torch

    C = cfg["C"]
    lengths, queries = draw_batch(rng, C, args.max_n, 1)
    if sum(queries) == 0:
        lengths, queries = [C + 1, 2 * C], [C + 1, 1]
    nrng = np.random.default_rng(rng.getrandbits(32))
    q, k = packed_inputs(nrng, cfg, lengths, queries, tgen)
    cuq = torch.from_numpy(cu_of(queries)).cuda()
    cuk = torch.from_numpy(cu_of(lengths)).cuda()
    out = torch.empty((q.shape[0], cfg["Hkv"], cfg["K"]), dtype=torch.int32, device="cuda")
    ws = torch.empty(lib.workspace_size("varlen_select", q, k, cuq, cuk) + 256,
                     dtype=torch.uint8, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up (module load) outside capture
        lib("varlen_select", q, k, cuq, cuk, out=out, workspace=ws)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        lib("varlen_select", q, k, cuq, cuk, out=out, workspace=ws)
    # Batch B: the same totals split differently, fresh values.
    lengths_b, queries_b = redistribute(rng, lengths, queries)
    q2, k2 = packed_inputs(nrng, cfg, lengths_b, queries_b, tgen)
    q.copy_(q2)
    k.copy_(k2)
    cuq.copy_(torch.from_numpy(cu_of(queries_b)).cuda())
    cuk.copy_(torch.from_numpy(cu_of(lengths_b)).cuda())
    out.fill_(-7)
    graph.replay()
    torch.cuda.synchronize()
    direct = lib("varlen_select", q2, k2, cuq.clone(), cuk.clone())
    same = torch.equal(out, direct)
    ok, summary = compare(cfg, q2, k2, cu_of(queries_b), cu_of(lengths_b), out, None,
                          nrng, args.rows)
    return same and ok, (f"captured on N={lengths} Nq={queries}, replayed on N={lengths_b} "
                         f"Nq={queries_b}: " + ("equal to a direct call" if same else
                                                "DIFFERS from a direct call")
                         + f", {summary['rows']} rows against the reference "
                         f"({summary['unexplained']} unexplained)")


def broken_batches(lengths, queries):
    """(what, cu_q, cu_k, cu_k broken) whose cu_seqlens break one rule
    each, for a batch of B >= 2 with Tk >= 2: the arrays keep their sizes
    (B + 1 each)."""
    cuq, cuk = cu_of(queries), cu_of(lengths)
    B = len(lengths)
    out = []

    def case(what, q=None, k=None):
        out.append((what, cuq if q is None else q, cuk if k is None else k,
                    k is not None))
    k = cuk.copy(); k[0] = 1
    case("cu_seqlens_k[0] = 1", k=k)
    q = cuq.copy(); q[0] = 1
    case("cu_seqlens_q[0] = 1", q=q)
    k = cuk.copy(); k[B] = k[B] - 1
    case("cu_seqlens_k[B] = Tk - 1", k=k)
    k = cuk.copy(); k[1] = k[B]
    if k[1] > k[2]:
        case("cu_seqlens_k decreases", k=k)
    k = cuk.copy(); k[1] = 2 ** 31 - 1
    case("cu_seqlens_k[1] = 2^31 - 1", k=k)
    k = cuk.copy(); k[1] = -5
    case("cu_seqlens_k[1] = -5", k=k)
    q = cuq.copy(); q[1] = min(int(cuq[B]), int(cuk[1]) + 1)
    if q[1] > cuk[1] and q[1] <= q[2]:
        case("Nq_0 > N_0", q=q)
    return out


def check_broken(lib, cfg, tgen):
    """Calls the library on cu_seqlens that break each rule: every query
    row must be K entries of -2 and no pyramid row written. Returns
    (ok, note)."""
    import torch

    C = cfg["C"]
    lengths, queries = [C + 1, 3 * C, 2], [C + 1, 5, 1]
    nrng = np.random.default_rng(0)
    q, k = packed_inputs(nrng, cfg, lengths, queries, tgen)
    bad, messages = [], []

    def refused(function, *args, out=None):
        """The message of validate()'s refusal, or None when it passes."""
        try:
            lib.validate(function, *args, out=out)
        except RuntimeError as e:
            return str(e)
        return None

    cuq_ok, cuk_ok = (torch.from_numpy(cu_of(x)).cuda() for x in (queries, lengths))
    for function, args in (("varlen_select", (q, k, cuq_ok, cuk_ok)),
                           ("varlen_pyramid", (k, cuk_ok))):
        if refused(function, *args, out=None if function == "varlen_select" else
                   torch.empty((varlen_rows(k.shape[0], len(lengths), C), cfg["Hkv"],
                                cfg["d"]), device="cuda")):
            bad.append(f"validate refused a valid batch ({function})")
    for what, cuq, cuk, keys_broken in broken_batches(lengths, queries):
        cuq_d, cuk_d = torch.from_numpy(cuq).cuda(), torch.from_numpy(cuk).cuda()
        # The validating call: a message, no kernel, nothing written.
        poisoned = torch.full((q.shape[0], cfg["Hkv"], cfg["K"]), 77, dtype=torch.int32,
                              device="cuda")
        message = refused("varlen_select", q, k, cuq_d, cuk_d, out=poisoned)
        torch.cuda.synchronize()
        if not message or "cu_seqlens" not in message and "queries but" not in message:
            bad.append(f"{what}: validate gave {message!r}")
        else:
            messages.append(message)
        if not bool((poisoned == 77).all()):
            bad.append(f"{what}: validate wrote the result")
        if keys_broken:
            rows = varlen_rows(k.shape[0], len(lengths), C)
            pyr = torch.full((rows, cfg["Hkv"], cfg["d"]), 1234.5, device="cuda")
            if not refused("varlen_pyramid", k, cuk_d, out=pyr):
                bad.append(f"{what}: validate passed the pyramid's cu_seqlens")
            torch.cuda.synchronize()
            if not bool((pyr == 1234.5).all()):
                bad.append(f"{what}: validate wrote pyramid rows")
        sel = lib("varlen_select", q, k, cuq_d, cuk_d)
        rows = varlen_rows(k.shape[0], len(lengths), C)
        pyr = torch.full((rows, cfg["Hkv"], cfg["d"]), 1234.5, device="cuda")
        lib("varlen_pyramid", k, cuk_d, out=pyr)
        torch.cuda.synchronize()
        if keys_broken and not bool((pyr == 1234.5).all()):
            bad.append(f"{what}: pyramid rows written")
        if not bool((sel == -2).all()):
            bad.append(f"{what}: {int((sel != -2).any(-1).sum())} rows not -2")
    return not bad, ("broken cu_seqlens refused (-2 rows, no pyramid row; "
                     "validate names the rule, e.g. " + repr(messages[:1]) + "): ") + (
        "all" if not bad else "; ".join(bad))


def check_torch(path, case, tgen):
    """The library's selection as a PyTorch custom op (pisa.torch): equal to
    a direct call eagerly and under torch.compile(fullgraph=True), and
    torch.library.opcheck passes. Returns (ok, note)."""
    import torch
    import pisa.torch as pisa_torch
    from pisa import aot

    namespace = "pisa_" + case["name"]
    pisa_torch.load_library(path, namespace=namespace)
    op = getattr(getattr(torch.ops, namespace), "varlen_select")
    lib = aot.Library(path)
    C = case["C"]
    lengths, queries = [C + 1, 3 * C, 2, 0], [C + 1, 1, 2, 0]
    q, k = packed_inputs(np.random.default_rng(1), case, lengths, queries, tgen)
    cuq = torch.from_numpy(cu_of(queries)).cuda()
    cuk = torch.from_numpy(cu_of(lengths)).cuda()
    want = lib("varlen_select", q, k, cuq, cuk)
    results = {"eager": torch.equal(op(q, k, cuq, cuk), want)}
    compiled = torch.compile(lambda *a: op(*a).to(torch.int64) + 1, fullgraph=True)
    results["compile"] = torch.equal(compiled(q, k, cuq, cuk), want.to(torch.int64) + 1)
    try:
        report = torch.library.opcheck(op.default, (q, k, cuq, cuk))
        results["opcheck"] = all(v == "SUCCESS" for v in report.values())
    except Exception as e:
        results["opcheck: " + str(e).splitlines()[0]] = False
    bad = [w for w, ok in results.items() if not ok]
    return not bad, "torch op " + ("eager, torch.compile fullgraph, opcheck: ok"
                                   if not bad else "failed: " + "; ".join(bad))


def check(args):
    import torch
    from pisa import aot

    _, cases, seed = sweep.load_cases(args)
    print(f"varlen sweep: input seed {seed}, {len(cases)} libraries", flush=True)
    tgen = torch.Generator(device="cuda").manual_seed(seed)
    deadline = time.time() + args.budget
    results = []
    for case in cases:
        if time.time() > deadline:
            print(f"budget of {args.budget} s spent")
            break
        lib = aot.Library(os.path.join(args.dir, case["lib"]))
        for j in range(args.batches):
            rng = random.Random(f"{seed}/{case['name']}/{j}")
            lengths, queries = draw_batch(rng, case["C"], args.max_n, j)
            nrng = np.random.default_rng([seed, zlib.crc32(case["name"].encode()), j])
            q, k = packed_inputs(nrng, case, lengths, queries, tgen)
            cuq, cuk = cu_of(queries), cu_of(lengths)
            cuq_d, cuk_d = torch.from_numpy(cuq).cuda(), torch.from_numpy(cuk).cuda()
            try:
                sel = lib("varlen_select", q, k, cuq_d, cuk_d)
                rows = varlen_rows(k.shape[0], len(lengths), case["C"])
                pyr = lib("varlen_pyramid", k, cuk_d,
                          out=torch.empty((rows, case["Hkv"], case["d"]),
                                          dtype=torch.float32, device="cuda"))
                ok, summary = compare(case, q, k, cuq, cuk, sel, pyr, nrng, args.rows,
                                      mutate=args.mutate)
            except (RuntimeError, torch.OutOfMemoryError) as e:
                ok, summary = False, {"rows": 0, "differ": 0, "unexplained": 0,
                                      "error": str(e).splitlines()[0]}
            summary.update(name=f"{case['name']}#{j}", ok=bool(ok), lengths=lengths,
                           queries=queries)
            results.append(summary)
            shape = " ".join(f"{x}={case.get(x)}" for x in ("Hkv", "G", "d", "C", "K", "g",
                                                              "dtype", "inputs", "schedule"))
            print(f"{'ok  ' if ok else 'FAIL'} {case['name']}#{j} {shape} B={len(lengths)} "
                  f"N={lengths} Nq={queries}: {summary['rows']} rows, {summary['differ']} "
                  f"differ ({summary['unexplained']} unexplained), pyramid error "
                  f"{summary.get('pyramid_max_rel_error', float('nan')):.1e}"
                  + ("" if ok else f" {summary.get('first_unexplained') or summary.get('error')}"),
                  flush=True)
            torch.cuda.empty_cache()
        if args.broken:
            try:
                ok, note = check_broken(lib, case, tgen)
            except RuntimeError as e:
                ok, note = False, str(e).splitlines()[0]
            results.append({"name": f"{case['name']}#broken", "ok": bool(ok),
                            "note": note, "rows": 0})
            print(f"{'ok  ' if ok else 'FAIL'} {case['name']}#broken {note}", flush=True)
        if args.torch:
            try:
                ok, note = check_torch(os.path.join(args.dir, case["lib"]), case, tgen)
            except Exception as e:  # a failure of the op's registration too
                ok, note = False, f"{type(e).__name__}: {str(e).splitlines()[0]}"
            results.append({"name": f"{case['name']}#torch", "ok": bool(ok),
                            "note": note, "rows": 0})
            print(f"{'ok  ' if ok else 'FAIL'} {case['name']}#torch {note}", flush=True)
        if args.graph:
            rng = random.Random(f"{seed}/{case['name']}/graph")
            try:
                ok, note = check_graph(lib, case, rng, tgen, args)
            except RuntimeError as e:
                ok, note = False, str(e).splitlines()[0]
            results.append({"name": f"{case['name']}#graph", "ok": bool(ok), "note": note,
                            "rows": 0})
            print(f"{'ok  ' if ok else 'FAIL'} {case['name']}#graph {note}", flush=True)
        del lib
    failed = sum(not r["ok"] for r in results)
    print(f"varlen sweep: {len(results) - failed} passed, {failed} failed, "
          f"{sum(r['rows'] for r in results)} rows checked ({len(cases)} libraries)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"input_seed": seed, "results": results}, f)
    return 1 if failed or not results else 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m device_checks.sweep_varlen",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="draw configurations and compile their libraries")
    b.add_argument("out")
    b.add_argument("--seed", type=int, required=True)
    b.add_argument("--count", type=int, default=60)
    b.add_argument("--tensor-core-walks", type=int, default=12,
                   help="further configurations of the paper's family (the "
                        "tensor-core walk)")
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    b.add_argument("--pisa-compile", default="build/bin/pisa-compile")
    c = sub.add_parser("check", help="check built libraries on the GPU")
    c.add_argument("dir")
    c.add_argument("--seed", type=int)
    c.add_argument("--batches", type=int, default=3, help="packed batches per library")
    c.add_argument("--max-n", type=int, default=200000, help="longest sequence drawn")
    c.add_argument("--rows", type=int, default=512,
                   help="query rows checked per sequence and KV head (sampled above)")
    c.add_argument("--graph", action="store_true",
                   help="also capture each library's call in a CUDA graph and replay it")
    c.add_argument("--broken", action="store_true",
                   help="also call each library on cu_seqlens that break each rule "
                        "(every row must be -2, no pyramid row written)")
    c.add_argument("--torch", action="store_true",
                   help="also check each library's selection as a pisa.torch op")
    c.add_argument("--mutate", action="store_true",
                   help="compare with the reference one position early (the check "
                        "must then fail)")
    c.add_argument("--only", nargs="*")
    c.add_argument("--part", help="I/N: every N-th library from the I-th")
    c.add_argument("--budget", type=float, default=420, help="seconds")
    c.add_argument("--json")
    args = parser.parse_args(argv)
    return {"build": build, "check": check}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
