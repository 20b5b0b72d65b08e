"""Compile solution.py's CUDA source here, without a GPU: errors in full, then registers and spills per kernel.

The device code of CUDA_SRC goes through nvcc for sm_90a with load_inline's flags, as a cubin with ptxas's
report (a build through load_inline takes twice as long, and a grep over ptxas's output once hid an error:
session 18). With --same-ptx-as, both sources go to PTX instead, normalized (nvcc's per-file hashes taken out),
and the tool says whether the device code is the same: how a change that should not touch the default kernel
is checked; where it differs, the first lines of a diff say how. With --sass REGEX, the kernels whose
demangled name matches get an instruction count by opcode from their SASS (cuobjdump: the toolkit's, or
the copy in triton's wheel): how a change's instruction budget is weighed before a device call (session 25:
cvt.rna.tf32.f32 is emulated on sm_90, ~4 instructions a conversion). Needs nvcc and torch's headers:
CUDA_HOME and CPATH as in .ci/run. For example

    python3 tools/compile_check.py                                   # the default build
    python3 tools/compile_check.py -D VAE_WG_NO_LOAD -D VAE_PROFILE  # a dev switch
    python3 tools/compile_check.py --same-ptx-as @HEAD               # did the default device code change?
    python3 tools/compile_check.py --same-ptx-as @HEAD --other-D VAE_CK_R8ALL   # a switch made the default: is the
                                          # new default's device code the switched build that was tested?
    python3 tools/compile_check.py --sass 'vae_elbo_kernel<9>' -D VAE_CK_DMMA   # instructions by opcode
"""
import argparse
import collections
import difflib
import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ab_variants import REPO, source_path  # noqa: E402

NVCC_FLAGS = ["-std=c++20", "--expt-relaxed-constexpr", "-D__CUDA_NO_HALF_OPERATORS__",
              "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
              "-D__CUDA_NO_HALF2_OPERATORS__", "-O3", "-gencode=arch=compute_90a,code=sm_90a",
              "-DTORCH_EXTENSION_NAME=compile_check", "-D_GLIBCXX_USE_CXX11_ABI=1"]


def cuda_source(path: str) -> str:
    """The CUDA_SRC string of a solution file (a raw triple-quoted string, as solution.py writes it)."""
    with open(path) as f:
        m = re.search(r'^CUDA_SRC = r"""(.*?)"""', f.read(), re.S | re.M)
    if not m:
        raise ValueError(f'{path}: no CUDA_SRC = r"""...""" string found')
    return m.group(1)


def kernel_name(mangled: str) -> str:
    """'_Z18vae_elbo_kernel_wgILi8EEvPKf...' -> 'vae_elbo_kernel_wg<8>'; other names as they are."""
    m = re.match(r"_Z(\d+)", mangled)
    if not m:
        return mangled
    n = int(m.group(1))
    name, rest = mangled[m.end():m.end() + n], mangled[m.end() + n:]
    args = re.match(r"I((?:L[ib]-?\d+E)+)E", rest)   # int and bool template arguments
    if args:
        vals = re.findall(r"L([ib])(-?\d+)E", args.group(1))
        name += "<" + ", ".join(v if t == "i" else ("true" if v == "1" else "false") for t, v in vals) + ">"
    return name


def parse_ptxas(report: str) -> list:
    """ptxas -v's lines -> one (kernel, registers, spill stores, spill loads, stack bytes) per entry function."""
    rows, name, spill = [], None, None
    for line in report.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            name, spill = kernel_name(m.group(1)), None
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and name and spill is None:
            spill = tuple(int(v) for v in m.groups())
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m and name and spill is not None:
            rows.append((name, int(m.group(1)), spill[1], spill[2], spill[0]))
            name = None
    return rows


def normalize_ptx(text: str) -> str:
    """PTX with the names nvcc derives from the file (per-compile hashes) made equal, and comments dropped."""
    text = re.sub(r"_INTERNAL_[0-9a-f_]+", "_INTERNAL_", text)
    text = re.sub(r"_GLOBAL__N__[0-9a-f_]+", "_GLOBAL__N__", text)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def ptx_entries(text: str) -> dict:
    """Normalized PTX -> {demangled kernel name: its lines, from `.entry` to the next one}; what precedes the
    first entry (the module's globals) under ''. A `.func` between two entries counts with the one before it."""
    parts, name = {"": []}, ""
    for line in text.splitlines():
        m = re.search(r"\.entry\s+([A-Za-z_$][\w$]*)", line)
        if m:
            name = kernel_name(m.group(1))
            parts[name] = []
        parts[name].append(line)
    return parts


def entries_that_differ(mine: str, theirs: str) -> tuple:
    """(kernels whose PTX differs or is in one text only, kernels with the same PTX), both sorted."""
    a, b = ptx_entries(mine), ptx_entries(theirs)
    differ = sorted(k or "(module globals)" for k in set(a) | set(b) if a.get(k) != b.get(k))
    same = sorted(k for k in set(a) & set(b) if k and a[k] == b[k])
    return differ, same


def sass_counts(sass: str) -> dict:
    """cuobjdump -sass text -> {demangled kernel name: Counter of opcodes (the mnemonic before its first dot)}."""
    counts = {}
    for part in re.split(r"\n\s*Function : ", "\n" + sass)[1:]:
        name = kernel_name(part.split("\n", 1)[0].strip())
        ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)", part)
        counts[name] = collections.Counter(ops)
    return counts


def find_cuobjdump() -> str:
    """The toolkit's cuobjdump, else one on PATH, else the copy triton's wheel carries; '' where there is none."""
    home = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "cuobjdump")
    if os.path.isfile(home):
        return home
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import triton
        hits = glob.glob(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump"))
    except ImportError:
        hits = []
    return hits[0] if hits else ""


def compiler_errors(stderr: str) -> str:
    """nvcc's error lines, each with the two lines after it (the source line and its caret); all of stderr where
    no line says error (torch's headers add dozens of warnings that would bury them)."""
    lines = stderr.splitlines()
    keep = [i + k for i, line in enumerate(lines) if re.search(r"\berror\b", line) for k in range(3)]
    if not keep:
        return stderr
    return "\n".join(lines[i] for i in sorted(set(keep)) if i < len(lines))


def nvcc(src: str, defines: list, what: str, workdir: str):
    """Compile CUDA source text to a cubin (ptxas report) or PTX; (returncode, stderr, the PTX text for "ptx" or the
    cubin's path for "cubin", '' on failure)."""
    from torch.utils.cpp_extension import include_paths
    cu = os.path.join(workdir, "cuda.cu")
    with open(cu, "w") as f:
        f.write(src)
    out = os.path.join(workdir, "out." + what)
    inc = sum([["-I", p] for p in include_paths(device_type="cuda")], []) + ["-I", sysconfig.get_paths()["include"]]
    mode = ["-cubin", "-Xptxas", "-v"] if what == "cubin" else ["-ptx"]
    nvcc_bin = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    cmd = [nvcc_bin] + NVCC_FLAGS + mode + [f"-D{d}" for d in defines] + inc + [cu, "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    text = ""
    if r.returncode == 0 and what == "ptx":
        with open(out) as f:
            text = f.read()
    elif r.returncode == 0:
        text = out   # the cubin's path
    return r.returncode, r.stderr, text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--solution", default=os.path.join(REPO, "solution.py"), help="a solution file or @REV")
    ap.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                    help="a define for the build (a dev switch), repeatable")
    ap.add_argument("--same-ptx-as", metavar="FILE_OR_@REV",
                    help="compare the device code (PTX) with another source's instead of reporting registers")
    ap.add_argument("--other-D", dest="other_defines", action="append", default=[], metavar="NAME[=VALUE]",
                    help="with --same-ptx-as: a define for the other source's build only (after the -D ones), "
                         "repeatable")
    ap.add_argument("--sass", metavar="REGEX",
                    help="also count the SASS instructions by opcode of the kernels whose name matches REGEX")
    args = ap.parse_args(argv)
    if args.other_defines and not args.same_ptx_as:
        print("compile_check: --other-D defines the --same-ptx-as source's build; give --same-ptx-as", file=sys.stderr)
        return 2
    if args.sass is not None:
        try:
            re.compile(args.sass)
        except re.error as e:
            print(f"compile_check: --sass {args.sass!r} is not a regular expression: {e}", file=sys.stderr)
            return 2
        if args.same_ptx_as:
            print("compile_check: --sass and --same-ptx-as are separate runs", file=sys.stderr)
            return 2
        if not find_cuobjdump():
            print("compile_check: --sass needs cuobjdump (CUDA_HOME/bin, PATH or triton's wheel): none found",
                  file=sys.stderr)
            return 2
    try:
        src = cuda_source(source_path(args.solution))
        other = cuda_source(source_path(args.same_ptx_as)) if args.same_ptx_as else None
    except ValueError as e:
        print(f"compile_check: {e}", file=sys.stderr)
        return 2
    theirs_name = f"{args.same_ptx_as}" + "".join(f" -D{d}" for d in args.other_defines)
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
        what = "ptx" if other is not None else "cubin"
        rc, err, output = nvcc(src, args.defines, what, a)
        if rc != 0:
            print(f"compile_check: nvcc failed on {args.solution} (exit {rc}):\n{compiler_errors(err)}", file=sys.stderr)
            return 1
        if other is None:
            rows = parse_ptxas(err)
            print(f"{'kernel':<32} {'registers':>9} {'spill st':>9} {'spill ld':>9} {'stack':>6}")
            for name, regs, st, ld, stack in rows:
                print(f"{name:<32} {regs:>9} {st:>9} {ld:>9} {stack:>6}")
            if args.sass is not None:
                r = subprocess.run([find_cuobjdump(), "-sass", output], capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"compile_check: cuobjdump failed (exit {r.returncode}): {r.stderr.strip()}", file=sys.stderr)
                    return 1
                shown = {k: v for k, v in sass_counts(r.stdout).items() if re.search(args.sass, k)}
                if not shown:
                    print(f"compile_check: no kernel matches --sass {args.sass!r}", file=sys.stderr)
                    return 2
                for name, ops in shown.items():
                    top = ", ".join(f"{op} {n}" for op, n in ops.most_common(14))
                    print(f"\n{name}: {sum(ops.values())} instructions; {top}")
            return 0
        rc, err, ptx_other = nvcc(other, args.defines + args.other_defines, what, b)
        if rc != 0:
            print(f"compile_check: nvcc failed on {theirs_name} (exit {rc}):\n{compiler_errors(err)}", file=sys.stderr)
            return 1
    mine_text, theirs_text = normalize_ptx(output), normalize_ptx(ptx_other)
    mine, theirs = mine_text.splitlines(), theirs_text.splitlines()
    if mine == theirs:
        print(f"same device code: {args.solution} and {theirs_name} ({len(mine)} PTX lines)")
        return 0
    differ = sum(1 for x, y in zip(mine, theirs) if x != y) + abs(len(mine) - len(theirs))
    print(f"device code differs: {args.solution} and {theirs_name} ({differ} of {max(len(mine), len(theirs))} "
          f"PTX lines, position by position)")
    changed, same = entries_that_differ(mine_text, theirs_text)
    print(f"kernels that differ: {', '.join(changed)}; the same: {', '.join(same) or 'none'}")
    print(f"the first lines of the diff (- {theirs_name}, + {args.solution}):")
    diff = list(difflib.unified_diff(theirs, mine, lineterm="", n=1))[2:]
    print("\n".join(diff[:24]) + (f"\n... {len(diff) - 24} more diff lines" if len(diff) > 24 else ""))
    return 1


if __name__ == "__main__":
    sys.exit(main())
