"""Outputs never destroy anything: pisa-run, pisa-opt and pisa-compile.

Each case runs a tool with an output that is hostile (an input, another
output, a symbolic link, a directory, a device, a FIFO, a planted link at a
guessable temporary name, a failing run over an existing file, parallel
writers) and checks the exit code, that an error is one line, that every
other file in the directory is byte for byte and type for type as it was,
and that no temporary is left behind. Inputs are fresh random arrays.
"""

import argparse
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

SELECT_MLIR = """
func.func @f(%q: tensor<1x4x100x16xf32>, %k: tensor<1x2x100x16xf32>)
    -> tensor<1x2x100x4xi32> {
  %off = arith.constant 0 : index
  %p = pisa.pyramid_build %k block_size = 8 branching = 2
      : tensor<1x2x100x16xf32> -> tensor<1x2x27x16xf32>
  %s = pisa.hier_topk %q, %k, %p, %off topk = 4 block_size = 8 branching = 2
      : tensor<1x4x100x16xf32>, tensor<1x2x100x16xf32>,
        tensor<1x2x27x16xf32> -> tensor<1x2x100x4xi32>
  return %s : tensor<1x2x100x4xi32>
}
"""


def snapshot(root):
    """Every entry under root: its type, and a hash of a regular file's
    bytes, a link's target, or nothing."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                state[path] = ("link", os.readlink(path))
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                state[path] = ("file", digest, stat.S_IMODE(st.st_mode))
            else:
                state[path] = (stat.S_IFMT(st.st_mode),)
    return state


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pisa-run", default="pisa-run")
    parser.add_argument("--pisa-opt", default="pisa-opt")
    parser.add_argument("--pisa-compile", default="")
    args = parser.parse_args()
    rng = np.random.default_rng()
    tally = harness.Tally(verbose=True)
    report = tally.report

    with tempfile.TemporaryDirectory() as tmp:
        work = os.path.join(tmp, "work")
        cache = os.path.join(tmp, "cache")
        outside = os.path.join(tmp, "outside")
        os.makedirs(work)
        os.makedirs(outside)

        def path(name):
            return os.path.join(work, name)

        def save(name, array):
            np.save(path(name), array)
            return path(name)

        q = save("q.npy", rng.standard_normal((1, 4, 100, 16)).astype(np.float32))
        k = save("k.npy", rng.standard_normal((1, 2, 100, 16)).astype(np.float32))
        v = save("v.npy", rng.standard_normal((1, 2, 100, 12)).astype(np.float32))
        victim = os.path.join(outside, "victim.txt")
        with open(victim, "w") as f:
            f.write("a file no command was asked to write\n")
        existing = path("existing.npy")
        np.save(existing, rng.standard_normal(7).astype(np.float32))
        os.chmod(existing, 0o640)
        prog = path("prog.mlir")
        with open(prog, "w") as f:
            f.write(SELECT_MLIR)
        bad_prog = path("bad.mlir")
        with open(bad_prog, "w") as f:
            f.write(SELECT_MLIR.replace("topk = 4 block_size", "topk = 2 block_size"))
        old_mlir = path("old.mlir")
        with open(old_mlir, "w") as f:
            f.write("// an earlier output\n")

        def select(out, *extra, k_path=k):
            return [args.pisa_run, "select", "--q", q, "--k", k_path,
                    "--block-size", "8", "--topk", "4", "--cache-dir", cache,
                    "--out", out, *extra]

        def attend(out, *extra):
            return [args.pisa_run, "attend", "--q", q, "--k", k, "--v", v,
                    "--block-size", "8", "--topk", "4", "--cache-dir", cache,
                    "--out", out, *extra]

        def run(name, argv, *, ok, fragment="", changes=(), check=None, one_line=True):
            """Runs argv; `changes` are the only paths that may differ after
            it (created, replaced); everything else under tmp must be as it
            was, and no temporary may be left."""
            before = snapshot(tmp)
            proc = subprocess.run(argv, capture_output=True, text=True)
            after = snapshot(tmp)
            problems = []
            if ok and proc.returncode != 0:
                problems.append(f"exit {proc.returncode}: {proc.stderr.strip()}")
            if not ok:
                if proc.returncode == 0:
                    problems.append("exit 0, expected a refusal")
                if proc.returncode < 0:
                    problems.append(f"killed by signal {-proc.returncode}")
                lines = proc.stderr.strip().splitlines()
                if one_line and len(lines) != 1:
                    problems.append(f"{len(lines)} error lines: {proc.stderr!r}")
                if fragment and fragment not in proc.stderr:
                    problems.append(f"no '{fragment}' in {proc.stderr.strip()!r}")
            allowed = {os.path.join(work, c) if not os.path.isabs(c) else c
                       for c in changes}
            for p in sorted(set(before) | set(after)):
                if p.startswith(cache):
                    continue
                if before.get(p) != after.get(p) and p not in allowed:
                    problems.append(f"{p} changed: {before.get(p)} -> {after.get(p)}")
            for p in after:
                if ".pisa-" in os.path.basename(p) and p not in before:
                    problems.append(f"temporary left: {p}")
            if check and not problems:
                problems += check()
            report(name, problems)
            return proc

        out = path("out.npy")
        # A first run fills the cache, so the rest are quick.
        run("select writes a new output", select(out), ok=True, changes=[out],
            check=lambda: [] if np.load(out).shape == (1, 2, 100, 4) else ["bad shape"])
        os.remove(out)

        run("--out is --q", select(q), ok=False, fragment="same file as the input")
        run("--out is --k by another spelling",
            select(os.path.join(work, "..", "work", ".", "k.npy")), ok=False,
            fragment="same file as the input")
        os.link(q, path("q-hardlink.npy"))
        run("--out is a hard link of --q", select(path("q-hardlink.npy")), ok=False,
            fragment="same file as the input")
        run("--lse-out is --v", attend(out, "--lse-out", v), ok=False,
            fragment="same file as the input")
        run("--out and --lse-out are one file",
            attend(out, "--lse-out", os.path.join(work, ".", "out.npy")),
            ok=False, fragment="same file as the output")
        link = path("link.npy")
        os.symlink(victim, link)
        run("--out is a symbolic link", select(link), ok=False,
            fragment="is a symbolic link")
        dangling = path("dangling.npy")
        os.symlink(os.path.join(outside, "made-through-link.npy"), dangling)
        run("--out is a dangling symbolic link", select(dangling), ok=False,
            fragment="is a symbolic link",
            check=lambda: ["a file was created through the link"]
            if os.path.exists(os.path.join(outside, "made-through-link.npy")) else [])
        os.makedirs(path("adir"))
        run("--out is a directory", select(path("adir")), ok=False,
            fragment="is a directory")
        # A link planted where older versions put their temporary.
        os.symlink(victim, out + ".tmp")
        run("a link at OUT.tmp is not followed", select(out), ok=True, changes=[out])
        os.remove(out + ".tmp")
        run("/dev/null stays a device", select("/dev/null"), ok=True,
            check=lambda: [] if stat.S_ISCHR(os.stat("/dev/null").st_mode)
            else ["/dev/null is no longer a character device"])

        fifo = path("fifo")
        os.mkfifo(fifo)
        received = []
        reader = threading.Thread(
            target=lambda: received.append(open(fifo, "rb").read()))
        reader.start()
        run("a FIFO is written in place", select(fifo), ok=True)
        reader.join(timeout=60)
        report("the FIFO's reader got an .npy",
               [] if received and received[0].startswith(b"\x93NUMPY") else ["nothing read"])

        run("a failed run keeps the existing output",
            select(existing, k_path=path("missing.npy")), ok=False, fragment="cannot read")
        run("an overwrite keeps the permission bits", select(existing), ok=True,
            changes=[existing],
            check=lambda: [] if stat.S_IMODE(os.stat(existing).st_mode) == 0o640
            else [oct(os.stat(existing).st_mode)])

        # Four writers of one output: each exits 0, and the file is exactly
        # one of their results.
        shared = path("shared.npy")
        ks = [save(f"k{i}.npy", rng.standard_normal((1, 2, 100, 16)).astype(np.float32))
              for i in range(4)]
        singles = []
        for i, ki in enumerate(ks):
            single = path(f"single{i}.npy")
            subprocess.run(select(single, k_path=ki), check=True, capture_output=True)
            singles.append(np.load(single))
        before = snapshot(tmp)
        procs = [subprocess.Popen(select(shared, k_path=ki), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE) for ki in ks]
        codes = [(p.wait(), p.stderr.read()) for p in procs]
        problems = [f"exit {c}: {e!r}" for c, e in codes if c != 0]
        got = np.load(shared)
        if not any(np.array_equal(got, s) for s in singles):
            problems.append("the output matches none of the writers")
        leftovers = [p for p in snapshot(tmp) if ".pisa-" in p and p not in before]
        problems += [f"temporary left: {p}" for p in leftovers]
        report("parallel writers leave one writer's whole output", problems)

        # pisa-opt.
        opt_out = path("opt-out.mlir")
        run("pisa-opt writes its output", [args.pisa_opt, prog, "-o", opt_out],
            ok=True, changes=[opt_out])
        run("pisa-opt failing keeps an existing output",
            [args.pisa_opt, bad_prog, "-o", old_mlir], ok=False, fragment="error",
            one_line=False)  # MLIR's diagnostic, with its source line
        run("pisa-opt -o its input", [args.pisa_opt, prog, "-o", prog], ok=False,
            fragment="same file as the input")
        run("pisa-opt -o a symbolic link", [args.pisa_opt, prog, "-o", link],
            ok=False, fragment="is a symbolic link")
        run("pisa-opt -o /dev/null", [args.pisa_opt, prog, "-o", "/dev/null"], ok=True)

        # pisa-compile (refusals come before any compilation).
        if args.pisa_compile:
            run("pisa-compile -o its input",
                [args.pisa_compile, prog, "-o", prog], ok=False,
                fragment="same file as the input")
            os.symlink(victim, path("libsel.h"))
            run("pisa-compile with a link at its header",
                [args.pisa_compile, prog, "-o", path("libsel.so")], ok=False,
                fragment="is a symbolic link")
            os.remove(path("libsel.h"))
            # prog.h as the input: the library's header would overwrite it.
            shutil.copy(prog, path("prog.h"))
            run("pisa-compile -o the input's header name",
                [args.pisa_compile, path("prog.h"), "-o", path("prog.so")], ok=False,
                fragment="same file as the input")
            run("pisa-compile failing keeps an existing output",
                [args.pisa_compile, bad_prog, "-o", old_mlir, "--emit", "mlir"],
                ok=False, fragment="error")

    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
