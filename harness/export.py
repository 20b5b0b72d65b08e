"""`python -m harness export --to kernelbench|gpumode DIR`: the problem and the solution in a
leaderboard's own format. Pure file work: nothing is imported, built or run (no GPU needed).

Why an export at all: the reference draws its noise inside forward and returns a tuple. KernelBench's
evaluator reseeds only before the reference's forward and compares `output.shape`, so neither the
reference itself nor solution.py can pass it; GPU MODE passes everything, weights included, in
`data`. Both exports make the noise an input (eps, (B, 32)) and compile solution.py's CUDA source
with `#define VAE_EPS_INPUT` first, which makes its kernels read eps instead of drawing it.

What is written (templates under harness/templates/, the solution's strings and ModelNew's parameter
methods read with `ast`, never by importing solution.py, which would build it):
  kernelbench: reference.py (Model(x, eps) -> (3, B) stacked elbo, recon, kl), solution.py (ModelNew)
  gpumode:     reference.py, task.py, task.yml, submission.py (custom_kernel, #!POPCORN header)
The exported solutions must pass KernelBench's static checker (kernel_static_checker.py of
ScalingIntelligence/KernelBench); `static_check` applies its strict rules, and the export strips the
C++ comments from the CUDA source only when a rule would otherwise match inside a comment.
"""
import ast
import hashlib
import os
import re

from harness import UsageError

FORMATS = ("kernelbench", "gpumode")
TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
BUILD_FRAGMENT = "eps_build.py.in"   # the build block both exported solutions share
EPS_DEFINE = "#define VAE_EPS_INPUT\n"
DEFAULT_LEADERBOARD = "vae-elbo"
# destination file name -> template file name
FILES = {
    "kernelbench": {"reference.py": "kernelbench_reference.py", "solution.py": "kernelbench_solution.py"},
    "gpumode": {"reference.py": "gpumode_reference.py", "task.py": "gpumode_task.py",
                "task.yml": "gpumode_task.yml", "submission.py": "gpumode_submission.py"},
}
SOLUTION_FILE = {"kernelbench": "solution.py", "gpumode": "submission.py"}


# ----- KernelBench's static checker, its strict rules (src/kernelbench/kernel_static_checker.py) -----
# It drops each line's text from the first '#', then from the first '//' (so '/* */' comments and
# strings stay), then searches these patterns in what is left.
STATIC_RULES = (
    ("code_bypass", r"\btry\s*:", "try-except block (potential fallback bypass)"),
    ("code_bypass", r"\bexcept\s*:", "try-except block (potential fallback bypass)"),
    ("code_bypass", r"\bexcept\s+\w+", "try-except block (potential fallback bypass)"),
    ("code_bypass", r"\bpass\b", "'pass' statement (inheritance bypass)"),
    ("timing_event_patch", r"torch\.cuda\.Event\.record\s*=|torch\.cuda\.Event\.elapsed_time\s*="
     r"|torch\.cuda\.synchronize\s*=|torch\.cuda\.Event\s*=|time\.perf_counter\s*=|time\.time\s*=",
     "reassigns a timing function"),
    ("thread_injection", r"threading\.Thread\s*\(|import\s+threading|from\s+threading\s+import"
     r"|multiprocessing\.(Process|Pool|Manager|Queue|Pipe)|import\s+multiprocessing|concurrent\.futures"
     r"|ThreadPoolExecutor|ProcessPoolExecutor", "threads or processes"),
    ("lazy_eval", r"_make_subclass|class\s+\w+.*\(torch\.Tensor\)|class\s+\w+.*\(Tensor\)|torch\.Tensor\.__new__",
     "tensor subclass or lazy tensor"),
)


def kernelbench_strip_comments(text: str) -> str:
    """KernelBench's _strip_comments: each line cut at its first '#', then at its first '//'."""
    return "\n".join(line.split("#", 1)[0].split("//", 1)[0] for line in text.split("\n"))


def static_check(text: str) -> list:
    """KernelBench's strict static rules (and its CUDA backend rule) on a solution file's text:
    one message per violation, [] when it would pass."""
    code = kernelbench_strip_comments(text)
    errors = []
    for rule, pattern, what in STATIC_RULES:
        m = re.search(pattern, code)
        if m:
            line = code.count("\n", 0, m.start()) + 1
            errors.append(f"{rule}: {what}: {m.group(0)!r} at line {line}")
    if "__global__" not in code:
        errors.append("cuda_impl: no __global__ kernel definition outside comments")
    if "load_inline" not in code and "cpp_extension" not in code:
        errors.append("cuda_impl: no load_inline or cpp_extension")
    return errors


def cpp_segments(source: str) -> list:
    """`source` as (kind, text) pieces, kind one of code, string, char, comment; joined back they
    give `source` exactly."""
    pieces, i, n, code_start = [], 0, len(source), 0

    def flush(upto):
        if upto > code_start:
            pieces.append(("code", source[code_start:upto]))

    while i < n:
        c = source[i]
        if c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            flush(i)
            pieces.append(("string" if c == '"' else "char", source[i:j + 1]))
            i = code_start = j + 1
        elif source.startswith("//", i) or source.startswith("/*", i):
            if source[i + 1] == "/":
                end = source.find("\n", i)
            else:
                end = source.find("*/", i + 2)
                end = end + 2 if end >= 0 else -1
            end = n if end < 0 else end
            flush(i)
            pieces.append(("comment", source[i:end]))
            i = code_start = end
        else:
            i += 1
    flush(n)
    return pieces


def strip_cpp_comments(source: str) -> str:
    """C++ source without its // and /* */ comments (string and character literals kept). Lines
    keep their numbers; trailing blanks left by a comment go."""
    out = "".join(" " + "\n" * t.count("\n") if kind == "comment" else t for kind, t in cpp_segments(source))
    return "\n".join(line.rstrip() for line in out.split("\n"))


def avoid_flagged_words(source: str) -> str:
    """C++ code in which KernelBench's word rule `\\bpass\\b` cannot match outside comments, meaning
    unchanged: an identifier `pass` is renamed (to a name the source does not use), and "pass" inside
    a string literal is split into two adjacent literals, which C++ concatenates back ("pas" "s")."""
    new_name = "pass_"
    while re.search(r"\b" + new_name + r"\b", source):
        new_name += "_"
    out = []
    for kind, text in cpp_segments(source):
        if kind == "code":
            text = re.sub(r"\bpass\b", new_name, text)
        elif kind == "string":
            text = re.sub(r"\bpass\b", 'pas" "s', text)
        out.append(text)
    return "".join(out)


# ----- reading solution.py without importing it ---------------------------------------------------

def parse_solution(path: str) -> tuple:
    """(source, ast) of the solution file, which is read, never run."""
    try:
        with open(path) as f:
            source = f.read()
        return source, ast.parse(source, filename=path)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from e
    except SyntaxError as e:
        raise UsageError(f"{path} is not valid Python: {e}") from e


def read_string_constants(path: str, names) -> dict:
    """Module-level string assignments of `path`, by name, read with ast (the file is not run)."""
    _, tree = parse_solution(path)
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in names:
                try:
                    value = ast.literal_eval(node.value)
                except ValueError:
                    value = None
                if not isinstance(value, str):
                    raise UsageError(f"{path}: {name} must be a string literal to be exported")
                found[name] = value
    missing = [n for n in names if n not in found]
    if missing:
        raise UsageError(f"{path} has no module-level {' or '.join(missing)} (the export needs the CUDA source "
                         "and the declaration of vae_forward_eps, compiled with VAE_EPS_INPUT)")
    return found


# ModelNew's parameter handling, which the KernelBench export's ModelNew takes from the solution as written
# (only its forward differs: it takes eps)
MODEL_METHODS = ("__init__", "_refresh_params", "_apply", "load_state_dict")


def read_model_methods(path: str) -> str:
    """The source lines of ModelNew's MODEL_METHODS in `path`, which must come one after another in
    that order (comments inside kept, indentation as written)."""
    source, tree = parse_solution(path)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"), None)
    methods = [n for n in (cls.body if cls else []) if isinstance(n, ast.FunctionDef)]
    names = [m.name for m in methods]
    start = names.index(MODEL_METHODS[0]) if MODEL_METHODS[0] in names else -1
    if start < 0 or tuple(names[start:start + len(MODEL_METHODS)]) != MODEL_METHODS:
        raise UsageError(f"{path}: ModelNew must define {', '.join(MODEL_METHODS)} one after another in that "
                         "order (the exported ModelNew takes them from it); found methods: "
                         f"{', '.join(names) or 'none'}")
    first, last = methods[start], methods[start + len(MODEL_METHODS) - 1]
    return "".join(source.splitlines(keepends=True)[first.lineno - 1:last.end_lineno]) + "\n"


def check_eps_kernel(cuda_src: str, cpp_decl: str, path: str):
    """The solution must carry the VAE_EPS_INPUT switch and declare the function the export binds."""
    if "VAE_EPS_INPUT" not in cuda_src:
        raise UsageError(f"{path}: CUDA_SRC has no VAE_EPS_INPUT switch (the kernel cannot read the noise "
                         "from an input)")
    for text, what in ((cuda_src, "CUDA_SRC"), (cpp_decl, "CPP_DECL_EPS")):
        if "vae_forward_eps" not in text:
            raise UsageError(f"{path}: {what} does not define or declare vae_forward_eps")


def python_string_literal(text: str) -> str:
    """`text` as a Python literal: a raw triple-quoted string where that spells it exactly (as in
    solution.py), else repr()."""
    if '"""' not in text and not text.endswith("\\") and "\r" not in text:
        literal = 'r"""' + text + '"""'
        if ast.literal_eval(literal) == text:
            return literal
    return repr(text)


# ----- writing ------------------------------------------------------------------------------------

# What the export may do to the CUDA source, in this order, only while KernelBench's static checker
# would still reject the exported file; each keeps the compiled program the same.
SOURCE_REWRITES = (
    ("the word 'pass' avoided in the CUDA code (identifier renamed, string literals split)", avoid_flagged_words),
    ("C++ comments stripped from the CUDA source", strip_cpp_comments),
)


def prepare_cuda_source(cuda_src: str, solution_template: str, cpp_decl: str) -> tuple:
    """(the CUDA source to export, [what was done to it]): rewritten only as far as needed for the
    exported file to pass KernelBench's static checker."""
    done = []
    for what, rewrite in SOURCE_REWRITES:
        if not static_check(render_solution(solution_template, cuda_src, cpp_decl, "x")):
            break
        cuda_src = rewrite(cuda_src)
        done.append(what)
    return cuda_src, done


def render_solution(template: str, cuda_src: str, cpp_decl: str, ext_name: str, leaderboard: str = "") -> str:
    """The exported solution's text: its template with the shared build block (templates/eps_build.py.in:
    the CUDA source with VAE_EPS_INPUT, built for sm_90) and the strings filled in."""
    with open(os.path.join(TEMPLATES, BUILD_FRAGMENT)) as f:
        template = template.replace("@@BUILD@@\n", f.read())
    return (template.replace("@@CUDA_SRC@@", python_string_literal(cuda_src))
            .replace("@@CPP_DECL@@", repr(cpp_decl))
            .replace("@@EXT_NAME@@", ext_name)
            .replace("@@LEADERBOARD@@", leaderboard))


def extension_name(fmt: str, cuda_src: str) -> str:
    """A load_inline name of its own per format and source, so that solution.py and both exports can
    be built and timed in one process."""
    return f"vae_elbo_eps_{fmt}_" + hashlib.sha1((EPS_DEFINE + cuda_src).encode()).hexdigest()[:10]


def check_destination(directory: str, force: bool):
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise UsageError(f"{directory} exists and is not a directory")
    if os.path.isdir(directory) and os.listdir(directory) and not force:
        raise UsageError(f"{directory} exists and is not empty: nothing was written (pass --force to write "
                         "the exported files into it, replacing files of the same names)")


def render(fmt: str, solution_path: str = "solution.py", leaderboard: str = DEFAULT_LEADERBOARD) -> dict:
    """{file name: text} of the export, and 'notes': what was done beyond copying."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", leaderboard):
        raise UsageError(f"--leaderboard {leaderboard!r}: letters, digits, '_', '.', '-' only")
    strings = read_string_constants(solution_path, ("CUDA_SRC", "CPP_DECL_EPS"))
    cuda_src, cpp_decl = strings["CUDA_SRC"], strings["CPP_DECL_EPS"]
    check_eps_kernel(cuda_src, cpp_decl, solution_path)
    files, notes = {}, []
    for name, template_name in FILES[fmt].items():
        with open(os.path.join(TEMPLATES, template_name)) as f:
            template = f.read()
        if "@@MODEL_METHODS@@\n" in template:
            template = template.replace("@@MODEL_METHODS@@\n", read_model_methods(solution_path))
        if name == SOLUTION_FILE[fmt]:
            src, done = prepare_cuda_source(cuda_src, template, cpp_decl)
            notes += [f"{name}: {what}, for KernelBench's static checker" for what in done]
            template = render_solution(template, src, cpp_decl, extension_name(fmt, src), leaderboard)
            errors = static_check(template)
            if errors:
                notes.append(f"{name}: KernelBench's static checker would reject it: " + "; ".join(errors))
        files[name] = template
    return {"files": files, "notes": notes}


def export(fmt: str, directory: str, solution_path: str = "solution.py", force: bool = False,
           leaderboard: str = DEFAULT_LEADERBOARD) -> dict:
    """Write the export into `directory` (created; refused when it holds anything, unless `force`).
    Returns {'directory', 'written': [paths], 'notes': [...]}."""
    check_destination(directory, force)
    rendered = render(fmt, solution_path, leaderboard)
    os.makedirs(directory, exist_ok=True)
    written = []
    for name, text in rendered["files"].items():
        path = os.path.join(directory, name)
        with open(path, "w") as f:
            f.write(text)
        written.append(path)
    return {"directory": directory, "format": fmt, "written": written, "notes": rendered["notes"]}


def add_parser(sub):
    p = sub.add_parser("export", help="write the problem and the solution in KernelBench's or GPU MODE's format")
    p.add_argument("directory", help="where to write (must not exist or be empty, unless --force)")
    p.add_argument("--to", dest="format", required=True, choices=FORMATS, help="the leaderboard's format")
    p.add_argument("--solution", default="solution.py", help="the solution to export (default solution.py)")
    p.add_argument("--force", action="store_true", help="write into a non-empty directory")
    p.add_argument("--leaderboard", default=DEFAULT_LEADERBOARD,
                   help=f"gpumode: the name on submission.py's #!POPCORN line (default {DEFAULT_LEADERBOARD})")
    return p


def run_export(args) -> str:
    """The export command; returns what to print."""
    result = export(args.format, args.directory, args.solution, args.force, args.leaderboard)
    where = {"kernelbench": "reference.py is the problem, solution.py the kernel (ModelNew)",
             "gpumode": "submit submission.py; reference.py, task.py and task.yml form the problem directory"}
    lines = [f"export: {args.format} files written to {result['directory']}"]
    lines += [f"  {path}" for path in result["written"]]
    lines += [f"note: {n}" for n in result["notes"]]
    lines.append(where[args.format])
    return "\n".join(lines)
