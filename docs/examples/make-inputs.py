"""Writes the bundled example's inputs: a 1024-token prefill with G = 8
query heads per KV head, d = 64 (queries, keys and values), float16, drawn
from a fixed seed, and do [1, 8, 1024, 64], the gradient of a loss with
respect to the attention output (pisa-run attend --grad-out). With --varlen, also a packed batch of four sequences
of 1024, 300, 65 and 1 keys (a prefill, a 100-token chunk, a decode step
and a one-token prompt), token-major: q_varlen [Tq, 8, 64],
k_varlen [Tk, 1, 64] and int32 cu_seqlens_q / cu_seqlens_k [5].

usage: make-inputs.py OUT_DIR [--varlen]
"""

import os
import sys

import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(2026)
np.save(os.path.join(out, "q.npy"), rng.standard_normal((1, 8, 1024, 64)).astype(np.float16))
np.save(os.path.join(out, "k.npy"), rng.standard_normal((1, 1, 1024, 64)).astype(np.float16))
np.save(os.path.join(out, "v.npy"), rng.standard_normal((1, 1, 1024, 64)).astype(np.float16))
if "--varlen" in sys.argv[2:]:
    keys, queries = [1024, 300, 65, 1], [1024, 100, 1, 1]
    cu = lambda n: np.concatenate([[0], np.cumsum(n)]).astype(np.int32)
    np.save(os.path.join(out, "cu_seqlens_k.npy"), cu(keys))
    np.save(os.path.join(out, "cu_seqlens_q.npy"), cu(queries))
    np.save(os.path.join(out, "k_varlen.npy"),
            rng.standard_normal((sum(keys), 1, 64)).astype(np.float16))
    np.save(os.path.join(out, "q_varlen.npy"),
            rng.standard_normal((sum(queries), 8, 64)).astype(np.float16))
np.save(os.path.join(out, "do.npy"),
        np.random.default_rng(2027).standard_normal((1, 8, 1024, 64)).astype(np.float16))
