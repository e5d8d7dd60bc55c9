"""Writes the bundled example's inputs: a 1024-token prefill with G = 8
query heads per KV head, d = 64 (queries, keys and values), float16, drawn
from a fixed seed.

usage: make-inputs.py OUT_DIR
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
