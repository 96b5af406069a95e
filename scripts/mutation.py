#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""mutation.py - systematic mutation testing of libnproxy (`make mutation`).

Generates one-token mutants of every .c/.h file of lib/ and include/nproxy/:

  ror       flip a comparison       <  <=  >  >=  ==  !=
  lcr       flip a boolean operator &&  ||
  not       drop a logical not      !x -> x
  call      drop a statement that is a call        f(a, b); -> {}
  retval    return a neighbour      return 0 -> return 1, true <-> false,
                                    NPROXY_SUCCESS <-> NPROXY_FAILURE
  const     an integer constant becomes its neighbour (n -> n + 1, 1 -> 0)
  early     remove a return that is not the last statement of its function

Each mutant is applied to a scratch copy of the tree (one per worker), the
library and the mutated area's tests are rebuilt, and the area's tests run
(scripts/run-tests, MUTATION_TIMEOUT seconds per program).  A mutant no test
of its area kills is run against the whole host suite (MUTATION_SUITE_AREAS).
Verdicts:

  killed      a test failed, timed out or did not build (a failed program
              is run once more on its own: one that passes then was a
              flaky failure, recorded, not a kill)
  survived    every test passed
  identical   the mutated object code is byte-for-byte the original's
              (an equivalent mutant, found mechanically)
  equivalent  listed with its reason in scripts/mutation-equivalents.txt
  stillborn   the mutated library does not compile (not counted)

Score = killed / (killed + survived), per subsystem and overall.
Writes build/mutation/report.md and build/mutation/results.json.  Results
are cached under build/mutation/cache/, keyed by the mutant's diff and a
hash of lib/, include/ and selftests/: a re-run does only new mutants.

  scripts/mutation.py [-j N] [--list] [--regression [name...]]
  MUTATION_FILES='lib/proxy/*.c'  only these files (globs, space-separated)
  MUTATION_LIMIT=N                a sample of N mutants (MUTATION_SEED, default 1)
  MUTATION_TIMEOUT=S              per test program (default 120)
  MUTATION_SUITE=0                do not run the whole suite on a survivor
  MUTATION_OPS='ror lcr'          only these operators
  MUTATION_IDS='id ...'           only these mutants (of the sample, if any)
--regression runs the hand-written mutants of scripts/mutation-regression.txt
(each with its own test programs) and fails unless every one is killed.
"""

import argparse
import fnmatch
import glob
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(TOP, "build", "mutation")
EQUIV_FILE = os.path.join(TOP, "scripts", "mutation-equivalents.txt")
REGRESSION_FILE = os.path.join(TOP, "scripts", "mutation-regression.txt")

# Public headers belong to the subsystem whose tests pin them.
HEADER_AREA = {
    "bananaphone.h": "bananaphone", "fault.h": "common", "handshake.h": "handshake",
    "log.h": "common", "net.h": "net", "proxy.h": "proxy", "rank.h": "rank",
    "seam.h": "proxy", "status.h": "common", "version.h": "common",
}

# ---------------------------------------------------------------- tokenizer

PUNCT = sorted("""<<= >>= ... -> ++ -- << >> <= >= == != && || += -= *= /= %= &= ^= |=
{ } [ ] ( ) ; , < > + - * / % & | ^ ! ~ ? : = . #""".split(), key=len, reverse=True)
TOKEN_RE = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+|\\\n|\n)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<str>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<num>(?:0[xX][0-9a-fA-F]+|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)[uUlLfF]*)
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>""" + "|".join(re.escape(p) for p in PUNCT) + r""")
""", re.S | re.X)


class Tok:
    __slots__ = ("kind", "text", "start", "end", "pp")

    def __init__(self, kind, text, start, end, pp):
        self.kind, self.text, self.start, self.end, self.pp = kind, text, start, end, pp


def tokenize(src):
    """Tokens without whitespace/comments; pp is the directive name for
    tokens on a preprocessor line ("" otherwise)."""
    toks, pos, at_line_start, pp = [], 0, True, ""
    while pos < len(src):
        m = TOKEN_RE.match(src, pos)
        if not m:
            pos += 1
            continue
        kind, text = m.lastgroup, m.group()
        if kind == "ws":
            if text == "\n":
                at_line_start, pp = True, ""
        elif kind != "comment":
            if at_line_start and text == "#":
                d = TOKEN_RE.match(src, m.end())
                while d and d.lastgroup == "ws" and d.group() != "\n":
                    d = TOKEN_RE.match(src, d.end())
                pp = d.group() if d and d.lastgroup == "id" else "#"
            toks.append(Tok(kind, text, m.start(), m.end(), pp))
            at_line_start = False
        pos = m.end()
    return toks


# ---------------------------------------------------------------- generation

ROR = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "=="}
LCR = {"&&": "||", "||": "&&"}
STATEMENT_START = {";", "{", "}", ")", "else", ":"}
NOT_CALLS = {"if", "while", "for", "switch", "return", "sizeof", "do", "case", "goto",
             "static_assert", "_Static_assert", "__attribute__", "typeof", "__typeof__"}


def int_neighbour(text):
    m = re.fullmatch(r"(0[xX][0-9a-fA-F]+|[0-9]+)([uUlL]*)", text)
    if not m:
        return None
    digits, suffix = m.groups()
    if digits.lower().startswith("0x"):
        v = int(digits, 16)
        return (hex(v + 1) if v != 1 else "0x0") + suffix
    if len(digits) > 1 and digits.startswith("0"):
        v = int(digits, 8)
        return ("0%o" % (v + 1) if v != 1 else "0") + suffix
    v = int(digits)
    return (str(v + 1) if v != 1 else "0") + suffix


def function_spans(toks):
    """(open, close) token indices of every function body: a top-level
    '{' whose preceding token is ')' (or an attribute's ')')."""
    spans, depth, start = [], 0, None
    for i, t in enumerate(toks):
        if t.pp:
            continue
        if t.text == "{":
            if depth == 0 and i and toks[i - 1].text == ")":
                start = i
            depth += 1
        elif t.text == "}":
            depth -= 1
            if depth == 0 and start is not None:
                spans.append((start, i))
                start = None
    return spans


def statement_end(toks, i):
    """Index of the ';' ending the statement starting at i (paren depth 0)."""
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j].text
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
            if depth < 0:
                return None
        elif t == ";" and depth == 0:
            return j
    return None


ERRNO_SWAP = "EINVAL"


def generate(path, src, errno_op=False):
    """Every mutant of one file: dicts with start/end byte range and new text.
    errno_op: also each returned or assigned -E* becomes another errno
    (-EINVAL, or -EPERM for -EINVAL): kernel code, whose errors are errnos."""
    toks = tokenize(src)
    muts = []

    def add(op, start, end, new, what):
        muts.append({"op": op, "start": start, "end": end, "new": new, "what": what})

    in_func = [False] * len(toks)
    func_close = [None] * len(toks)
    for a, b in function_spans(toks):
        for k in range(a, b + 1):
            in_func[k], func_close[k] = True, b
    for i, t in enumerate(toks):
        if t.pp and t.pp != "define":
            continue		# #include <...>, #if: not code
        prev = toks[i - 1].text if i else ""
        if t.kind == "punct":
            if t.text in ROR:
                add("ror", t.start, t.end, ROR[t.text], "%s -> %s" % (t.text, ROR[t.text]))
            elif t.text in LCR:
                add("lcr", t.start, t.end, LCR[t.text], "%s -> %s" % (t.text, LCR[t.text]))
            elif t.text == "!" and i + 1 < len(toks) and toks[i + 1].text != "=":
                add("not", t.start, t.end, "", "drop !")
        elif t.kind == "num":
            n = int_neighbour(t.text)
            if n is None or prev == "[" and not in_func[i]:
                continue	# array bounds of declarations: a layout, not behaviour
            if prev == "return":
                add("retval", t.start, t.end, n, "return %s -> %s" % (t.text, n))
            elif prev == "-" and i >= 2 and toks[i - 2].text == "return":
                add("retval", toks[i - 1].start, t.end, "0", "return -%s -> 0" % t.text)
            else:
                add("const", t.start, t.end, n, "%s -> %s" % (t.text, n))
        elif t.kind == "id" and in_func[i] and not t.pp:
            if (errno_op and prev == "-" and re.fullmatch(r"E[A-Z0-9]+", t.text) and
                    i >= 2 and toks[i - 2].text in ("return", "=", "(", ",", "?", ":")):
                new = "EPERM" if t.text == ERRNO_SWAP else ERRNO_SWAP
                add("errno", t.start, t.end, new, "-%s -> -%s" % (t.text, new))
            if prev == "return" and toks[i + 1].text == ";":
                swap = {"true": "false", "false": "true", "NPROXY_SUCCESS": "NPROXY_FAILURE"}.get(t.text)
                if swap is None and t.text.startswith("NPROXY_") and t.text.isupper():
                    swap = "NPROXY_SUCCESS"
                if swap:
                    add("retval", t.start, t.end, swap, "return %s -> %s" % (t.text, swap))
            if t.text == "return":
                end = statement_end(toks, i)
                if end is None:
                    continue
                last = end + 1 == func_close[i]
                if not last:
                    add("early", t.start, toks[end].end, "{}", "remove `%s`" %
                        " ".join(x.text for x in toks[i:end + 1]))
            elif (t.text not in NOT_CALLS and prev in STATEMENT_START and
                  i + 1 < len(toks) and toks[i + 1].text == "(" and
                  not (prev == ")" and _is_cast_or_decl(toks, i - 1))):
                end = statement_end(toks, i)
                # the call must be the whole statement: f(...);
                if end is None or toks[end - 1].text != ")":
                    continue
                depth, whole = 0, True
                for k in range(i + 1, end):
                    depth += toks[k].text == "("
                    depth -= toks[k].text == ")"
                    if depth == 0 and k != end - 1:
                        whole = False
                        break
                if whole:
                    add("call", t.start, toks[end].end, "{}", "drop call %s()" % t.text)
    for m in muts:
        m["file"] = path
        m["line"] = src.count("\n", 0, m["start"]) + 1
    return muts


def _is_cast_or_decl(toks, close):
    """toks[close] is ')': does it close a cast or a function header rather
    than an if/while/for condition?  Only statement-position calls after a
    condition are mutants (if (x) f();)."""
    depth = 0
    for k in range(close, -1, -1):
        depth += toks[k].text == ")"
        depth -= toks[k].text == "("
        if depth == 0:
            return not (k and toks[k - 1].text in ("if", "while", "for"))
    return True


def apply(src, m):
    return src[:m["start"]] + m["new"] + src[m["end"]:]


def line_of(src, pos):
    a = src.rfind("\n", 0, pos) + 1
    b = src.find("\n", pos)
    return src[a:b if b >= 0 else len(src)]


def describe(src, m):
    """Stable id (file, original line, mutated line, occurrence) and a diff."""
    old = line_of(src, m["start"])
    mutated = apply(src, m)
    a = src.rfind("\n", 0, m["start"]) + 1
    end_old = src.find("\n", m["end"])
    end_old = len(src) if end_old < 0 else end_old
    old_text = src[a:end_old]
    new_text = mutated[a:end_old + len(mutated) - len(src)]
    diff = "--- a/%s\n+++ b/%s\n@@ -%d +%d @@\n" % (m["file"], m["file"], m["line"], m["line"])
    diff += "".join("-%s\n" % x for x in old_text.split("\n"))
    diff += "".join("+%s\n" % x for x in new_text.split("\n"))
    key = "\0".join([m["file"], old_text.strip(), new_text.strip(), m["what"]])
    return hashlib.sha1(key.encode()).hexdigest()[:12], diff, old.strip()


def subsystem(path):
    parts = path.split("/")
    if parts[0] == "lib":
        return parts[1]
    return HEADER_AREA.get(parts[-1], "common")


def source_files():
    pats = os.environ.get("MUTATION_FILES", "").split()
    files = sorted(glob.glob("lib/**/*.[ch]", root_dir=TOP, recursive=True) +
                   glob.glob("include/nproxy/*.h", root_dir=TOP))
    if pats:
        files = [f for f in files if any(fnmatch.fnmatch(f, p) for p in pats)]
    return files


def all_mutants():
    ops = set(os.environ.get("MUTATION_OPS", "").split())
    out, seen = [], {}
    for f in source_files():
        with open(os.path.join(TOP, f)) as fh:
            src = fh.read()
        for m in generate(f, src):
            if ops and m["op"] not in ops:
                continue
            mid, diff, orig = describe(src, m)
            seen[mid] = seen.get(mid, 0) + 1
            if seen[mid] > 1:
                mid = "%s-%d" % (mid, seen[mid])
            m.update(id=mid, diff=diff, orig=orig, subsystem=subsystem(f))
            out.append(m)
    return out


def sample(muts, limit, seed):
    """limit mutants spread over subsystems in proportion (at least a tenth
    of an even share each), the same ones for the same seed and tree."""
    if not limit or limit >= len(muts):
        return muts
    rng = random.Random(seed)
    by = {}
    for m in muts:
        by.setdefault(m["subsystem"], []).append(m)
    floor = max(1, limit // (10 * len(by)))
    share = {s: max(floor, round(limit * len(v) / len(muts))) for s, v in by.items()}
    while sum(share.values()) > limit:
        s = max(share, key=share.get)
        share[s] -= 1
    picked = []
    for s in sorted(by):
        picked += rng.sample(by[s], min(share[s], len(by[s])))
    return sorted(picked, key=lambda m: (m["file"], m["start"], m["id"]))


def load_equivalents():
    eq = {}
    if os.path.exists(EQUIV_FILE):
        for line in open(EQUIV_FILE):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            mid, _, rest = line.partition(" ")
            eq[mid] = rest.split("#", 1)[1].strip() if "#" in rest else rest
    return eq


def tree_hash():
    h = hashlib.sha256()
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "--", "lib", "include",
                            "selftests", "testlib", "scripts/run-tests", "scripts/build.mk"],
                           cwd=TOP, capture_output=True, text=True, check=True).stdout.split()
    for f in sorted(files):
        p = os.path.join(TOP, f)
        if os.path.isfile(p):
            h.update(f.encode() + b"\0")
            with open(p, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


# ---------------------------------------------------------------- running

def sh(cmd, cwd=None, timeout=None, env=None):
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, errors="replace", timeout=timeout,
                           env=env, start_new_session=True)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"") + (e.stderr or b"")
        return 124, out.decode(errors="replace") if isinstance(out, bytes) else out


NICE = ["nice", "-n", os.environ.get("MUTATION_NICE", "10")]


class Worker:
    """One scratch tree and build directory; mutants run one at a time."""

    def __init__(self, n, root, areas):
        self.tree = os.path.join(root, "tree%d" % n)
        self.build = os.path.join(root, "build%d" % n)
        self.areas = areas
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "--", "VERSION",
                                "Makefile", "lib", "include", "selftests", "testlib", "scripts",
                                "tools"],
                               cwd=TOP, capture_output=True, text=True, check=True).stdout.split()
        for f in files:
            src = os.path.join(TOP, f)
            if os.path.isfile(src):
                dst = os.path.join(self.tree, f)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy2(src, dst)
        os.makedirs(self.build)
        ksft = os.path.join(TOP, "build", "kselftest")
        if os.path.isdir(ksft):
            shutil.copytree(ksft, os.path.join(self.build, "kselftest"))
        rc, log = self.make("lib")
        rc2, log2 = self.make("testlib")
        if rc or rc2:
            raise SystemExit("mutation: the unmutated tree does not build:\n" + log + log2)
        self.objs = os.path.join(root, "objs%d" % n)
        shutil.copytree(os.path.join(self.build, "lib"), self.objs)
        # The test-support library is built against the same headers: a
        # mutated header rebuilds it, and restore() puts it back.
        self.support = os.path.join(root, "support%d" % n)
        os.makedirs(self.support)
        for f in self.support_files():
            dst = os.path.join(self.support, os.path.relpath(f, self.build))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(f, dst)

    def support_files(self):
        return glob.glob(os.path.join(self.build, "testlib", "*"))

    def make(self, sub, *targets):
        return sh(NICE + ["make", "-s", "-C", os.path.join(self.tree, sub), "O=" + self.build]
                  + list(targets), timeout=1800)

    def build_area(self, area):
        if area == "tools":
            rc, log = self.make("tools")
            if rc:
                return rc, log
        return self.make("selftests/" + area)

    def run_areas(self, areas, timeout):
        dirs = [os.path.join(self.build, "selftests", a) for a in areas]
        env = dict(os.environ, NPROXY_TEST_TIMEOUT=str(timeout),
                   NPROXY_TEST_LOGDIR=tempfile.mkdtemp(dir=self.build, prefix="log."))
        stop = threading.Event()
        reaper = threading.Thread(target=self.reap_stragglers, args=(timeout + 15, stop))
        reaper.start()
        try:
            rc, out = sh(NICE + [os.path.join(self.tree, "scripts", "run-tests")] + dirs,
                         timeout=timeout * 20 + 60, env=env)
        finally:
            stop.set()
            reaper.join()
        shutil.rmtree(env["NPROXY_TEST_LOGDIR"], ignore_errors=True)
        return rc, out

    def reap_stragglers(self, limit_s, stop):
        """A mutant's forked child that outlives its program's timeout (in
        another process group) would keep run-tests' output pipe open:
        SIGKILL every process of this worker's build tree older than limit_s."""
        hz = os.sysconf("SC_CLK_TCK")
        prefix = self.build + "/"
        while not stop.wait(5):
            with open("/proc/uptime") as fh:
                up = float(fh.read().split()[0])
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    if not os.readlink("/proc/%s/exe" % pid).startswith(prefix):
                        continue
                    with open("/proc/%s/stat" % pid) as fh:
                        start = int(fh.read().rsplit(")", 1)[1].split()[19]) / hz
                    if up - start > limit_s:
                        os.kill(int(pid), 9)
                except (OSError, ValueError, IndexError):
                    pass

    def confirm(self, out, timeout):
        """A failure counts only if one of the failed programs fails again
        on its own: the shared 2-CPU boxes make a few timing-bound tests
        fail now and then, and a flaky failure is not a kill."""
        for prog in failed_programs(out):
            path = os.path.join(self.build, "selftests", prog)
            if not os.path.exists(path):
                return True
            rc, _ = sh(NICE + ["timeout", "-k", "5", str(timeout), path],
                       cwd=os.path.dirname(path), timeout=timeout + 30)
            if rc:
                return True
        return False

    def lib_objects(self):
        out = {}
        for d, _, fs in os.walk(os.path.join(self.build, "lib")):
            for f in fs:
                if f.endswith(".o"):
                    p = os.path.join(d, f)
                    out[p] = os.stat(p).st_mtime_ns
        return out

    def stripped(self, obj):
        # The relocation-aware disassembly and the data sections: line
        # numbers (debug info) differ between a mutant and the original.
        rc, dis = sh(["objdump", "-d", "-r", "-j", ".text", "--no-show-raw-insn", obj])
        rc2, data = sh(["objdump", "-s", "-r", "-j", ".rodata", "-j", ".data", obj])
        return "\n".join(dis.split("\n")[2:]) + data

    def restore(self, path, original, before):
        with open(path, "w") as fh:
            fh.write(original)
        for p, mt in self.lib_objects().items():
            if before.get(p) != mt:
                base = os.path.join(self.objs, os.path.relpath(p, os.path.join(self.build, "lib")))
                shutil.copy2(base, p)
                d = p[:-2] + ".d"
                if os.path.exists(base[:-2] + ".d"):
                    shutil.copy2(base[:-2] + ".d", d)
        st = os.stat(os.path.join(TOP, os.path.relpath(path, self.tree)))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        for f in glob.glob(os.path.join(self.build, "lib", "libnproxy.*")):
            os.unlink(f)
        for f in self.support_files():
            base = os.path.join(self.support, os.path.relpath(f, self.build))
            if os.path.exists(base) and os.stat(base).st_mtime_ns != os.stat(f).st_mtime_ns:
                shutil.copy2(base, f)
        if path.endswith(".h"):
            # Test programs compiled against the mutated header: rebuild.
            for f in glob.glob(os.path.join(self.build, "selftests", "*", "*")):
                if os.path.isfile(f) and os.access(f, os.X_OK) and not f.endswith(".sh"):
                    os.unlink(f)

    def run(self, m, timeout, suite_areas):
        path = os.path.join(self.tree, m["file"])
        with open(path) as fh:
            original = fh.read()
        st = os.stat(os.path.join(TOP, m["file"]))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        before = self.lib_objects()
        t0 = time.time()
        res = {"verdict": None, "by": "", "log": ""}
        try:
            with open(path, "w") as fh:
                fh.write(apply(original, m))
            rc, log = self.make("lib")
            if rc:
                res.update(verdict="stillborn", log=tail(log))
                return res
            changed = [p for p, mt in self.lib_objects().items() if before.get(p) != mt]
            if m["file"].endswith(".c") and changed and all(
                    self.stripped(p) == self.stripped(os.path.join(
                        self.objs, os.path.relpath(p, os.path.join(self.build, "lib"))))
                    for p in changed):
                res.update(verdict="identical")
                return res
            area = m["subsystem"]
            for a in [area] + [x for x in suite_areas if x != area]:
                rc, log = self.build_area(a)
                if rc:
                    res.update(verdict="killed", by="%s tests do not build" % a, log=tail(log))
                    return res
                rc, out = self.run_areas([a], timeout)
                if rc and not self.confirm(out, timeout):
                    res.setdefault("flaky", []).extend(failed_programs(out))
                    rc = 0
                if rc:
                    # A kill by a program's timeout only is worth a look:
                    # MUTATION_TIMEOUT below a slow program's own time
                    # kills what a longer one would not.
                    res.update(verdict="killed", by=a if a == area else "suite:" + a,
                               log=failures(out), timeout="timed out" in out)
                    return res
            res.update(verdict="survived")
            return res
        finally:
            self.restore(path, original, before)
            res["seconds"] = round(time.time() - t0, 1)


def tail(log, n=15):
    return "\n".join(log.strip().split("\n")[-n:])


def failed_programs(out):
    """area/program of every "# failed: ..." line of scripts/run-tests."""
    progs = []
    for line in out.split("\n"):
        if line.startswith("# failed: "):
            progs += line[len("# failed: "):].split()
    return progs


def failures(out):
    bad = [x for x in out.split("\n") if x.startswith("not ok") or "Bail out" in x
           or "timed out" in x or "# " in x and "failed" in x and " 0 failed" not in x]
    return "\n".join(bad[:12])


# ---------------------------------------------------------------- report

def score(rs):
    k = sum(r["verdict"] == "killed" for r in rs)
    s = sum(r["verdict"] == "survived" for r in rs)
    return k, s, (100.0 * k / (k + s) if k + s else None)


def pct_text(pct):
    return "n/a" if pct is None else "%.1f %%" % pct


def write_report(results, meta, out=OUT, title="libnproxy mutation report", notes=()):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as fh:
        json.dump({"meta": meta, "mutants": results}, fh, indent=1)
    subs = sorted({r["subsystem"] for r in results})
    lines = ["# " + title, "",
             "%(generated)d mutants generated over %(files)d files; %(run)d run "
             "(MUTATION_LIMIT=%(limit)s MUTATION_SEED=%(seed)s), %(seconds)d s "
             "(%(cached)d from the cache)." % meta, ""] + list(notes) + [
             "| subsystem | run | killed | survived | equivalent | identical object | stillborn | score |",
             "|---|---|---|---|---|---|---|---|"]
    for s in subs + ["all"]:
        rs = [r for r in results if s == "all" or r["subsystem"] == s]
        k, sv, pct = score(rs)
        cnt = {v: sum(r["verdict"] == v for r in rs) for v in ("equivalent", "identical", "stillborn")}
        lines.append("| %s | %d | %d | %d | %d | %d | %d | %s |" % (
            s, len(rs), k, sv, cnt["equivalent"], cnt["identical"], cnt["stillborn"],
            pct_text(pct)))
    lines += ["", "By operator:", "", "| op | killed | survived | score |", "|---|---|---|---|"]
    for op in sorted({r["op"] for r in results}):
        k, sv, pct = score([r for r in results if r["op"] == op])
        lines.append("| %s | %d | %d | %s |" % (op, k, sv, pct_text(pct)))
    tmo = [r for r in results if r.get("timeout")]
    if tmo:
        lines += ["", "Killed with a program timing out (MUTATION_TIMEOUT=%s s; a hang, or a "
                  "slow program: check it against a longer timeout):" % meta.get("timeout"), ""]
        lines += ["- %s:%d %s (`%s`) by %s" % (r["file"], r["line"], r["what"], r["id"], r["by"])
                  for r in tmo]
    surv = [r for r in results if r["verdict"] == "survived"]
    lines += ["", "## Survivors (%d)" % len(surv), "",
              "Each needs a test, a fix, or a line in scripts/mutation-equivalents.txt", ""]
    for r in surv:
        lines += ["### %s:%d %s (`%s`, %s)" % (r["file"], r["line"], r["what"], r["id"], r["op"]),
                  "", "```diff", r["diff"].rstrip(), "```", ""]
    eq = [r for r in results if r["verdict"] == "equivalent"]
    if eq:
        lines += ["## Equivalent (listed)", ""]
        lines += ["- %s:%d %s (`%s`): %s" % (r["file"], r["line"], r["what"], r["id"], r["by"])
                  for r in eq]
    with open(os.path.join(out, "report.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")


def run_regression(args):
    """The hand-written mutants: name#file#perl -0pe expression#tests."""
    entries = [l.rstrip("\n") for l in open(REGRESSION_FILE)
               if l.strip() and not l.startswith("#")]
    if args.names:
        entries = [e for e in entries if e.split("#", 1)[0] in args.names]
    root = tempfile.mkdtemp(prefix="nproxy-mutation.")
    try:
        w = Worker(0, root, [])
        caught = 0
        for e in entries:
            name, f, expr, tests = e.split("#", 3)
            path = os.path.join(w.tree, f)
            original = open(path).read()
            rc, mutated = sh(["perl", "-0pe", expr, path])
            if rc or mutated == original:
                sys.exit("mutation: %s no longer applies to %s" % (name, f))
            m = {"file": f, "start": 0, "end": len(original), "new": mutated}
            before = w.lib_objects()
            verdict = None
            try:
                with open(path, "w") as fh:
                    fh.write(mutated)
                rc, log = w.make("lib")
                if rc:
                    sys.exit("mutation: %s: the mutated library does not build:\n%s" % (name, tail(log)))
                for t in tests.split():
                    area, prog = t.split("/")
                    rc, log = w.make("selftests/" + area, os.path.join(w.build, "selftests", t))
                    if rc:
                        verdict = "caught: %s does not build" % t
                        break
                    rc, out = sh(NICE + ["timeout", "-k", "5", str(args.timeout),
                                         os.path.join(w.build, "selftests", t)],
                                 cwd=os.path.join(w.build, "selftests", area))
                    if rc:
                        verdict = "caught by %s" % t
                        break
            finally:
                w.restore(path, original, before)
            del m
            caught += verdict is not None
            print("MUTANT %s: %s" % (name, verdict or "SURVIVED (%s passed)" % tests), flush=True)
        print("mutation: %d of %d regression mutants caught" % (caught, len(entries)))
        return 0 if caught == len(entries) else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--list", action="store_true", help="print the mutants, run none")
    ap.add_argument("--regression", action="store_true")
    ap.add_argument("names", nargs="*", help="--regression: only these mutants")
    ap.add_argument("--timeout", type=int, default=int(os.environ.get("MUTATION_TIMEOUT", "120")))
    args = ap.parse_args()
    os.chdir(TOP)
    if args.regression:
        return run_regression(args)
    t0 = time.time()
    muts = all_mutants()
    limit = int(os.environ.get("MUTATION_LIMIT", "0") or 0)
    seed = os.environ.get("MUTATION_SEED", "1")
    picked = sample(muts, limit, seed)
    ids = os.environ.get("MUTATION_IDS", "").split()
    if ids:
        picked = [m for m in picked if m["id"] in ids]
    if args.list:
        for m in picked:
            print("%s %s:%d %s %s" % (m["id"], m["file"], m["line"], m["op"], m["what"]))
        print("%d mutants (%d generated)" % (len(picked), len(muts)), file=sys.stderr)
        return 0
    all_areas = sorted(os.path.basename(os.path.dirname(p))
                       for p in glob.glob(os.path.join(TOP, "selftests", "*", "Makefile")))
    suite = os.environ.get("MUTATION_SUITE_AREAS",
                           " ".join(a for a in all_areas if a not in ("foundation", "packaging", "kmod")))
    suite_areas = suite.split() if os.environ.get("MUTATION_SUITE", "1") != "0" else []
    equiv = load_equivalents()
    th = tree_hash()
    cache_dir = os.path.join(OUT, "cache")
    os.makedirs(cache_dir, exist_ok=True)
    results, todo = [], []
    for m in picked:
        rec = {k: m[k] for k in ("id", "file", "line", "op", "what", "diff", "subsystem")}
        if m["id"] in equiv:
            rec.update(verdict="equivalent", by=equiv[m["id"]])
            results.append(rec)
            continue
        key = hashlib.sha256((m["diff"] + th + " ".join(suite_areas)).encode()).hexdigest()
        cp = os.path.join(cache_dir, key + ".json")
        if os.path.exists(cp):
            rec.update(json.load(open(cp)), cached=True)
            results.append(rec)
        else:
            todo.append((m, rec, cp))
    print("mutation: %d generated, %d picked, %d to run (%d cached, %d listed equivalent), -j%d" % (
        len(muts), len(picked), len(todo), len(picked) - len(todo) - sum(
            r["verdict"] == "equivalent" for r in results), sum(
            r["verdict"] == "equivalent" for r in results), args.jobs), flush=True)
    root = tempfile.mkdtemp(prefix="nproxy-mutation.")
    lock = threading.Lock()
    done = [0]
    try:
        workers = []
        if todo:
            with ThreadPoolExecutor(args.jobs) as ex:
                workers = list(ex.map(lambda n: Worker(n, root, suite_areas), range(min(args.jobs, len(todo)))))
            free = list(workers)

            def one(item):
                m, rec, cp = item
                with lock:
                    w = free.pop()
                try:
                    r = w.run(m, args.timeout, suite_areas)
                finally:
                    with lock:
                        free.append(w)
                rec.update(r)
                with open(cp, "w") as fh:
                    json.dump(r, fh)
                with lock:
                    results.append(rec)
                    done[0] += 1
                    print("[%d/%d] %s %s:%d %s: %s %s (%.0fs)" % (
                        done[0], len(todo), m["id"], m["file"], m["line"], m["what"],
                        r["verdict"], r.get("by", ""), r["seconds"]), flush=True)
                    if done[0] % 10 == 0:
                        write_report(sorted(results, key=lambda x: (x["file"], x["line"])),
                                     meta(muts, picked, limit, seed, t0, results))
            with ThreadPoolExecutor(args.jobs) as ex:
                list(ex.map(one, todo))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    results.sort(key=lambda x: (x["file"], x["line"], x["id"]))
    write_report(results, meta(muts, picked, limit, seed, t0, results))
    k, s, pct = score(results)
    print("mutation: %d killed, %d survived: %s (build/mutation/report.md)" % (k, s, pct_text(pct)))
    return 0


def meta(muts, picked, limit, seed, t0, results):
    return {"generated": len(muts), "files": len({m["file"] for m in muts}), "run": len(picked),
            "timeout": os.environ.get("MUTATION_TIMEOUT", "120"),
            "limit": limit or "all", "seed": seed, "seconds": int(time.time() - t0),
            "cached": sum(bool(r.get("cached")) for r in results)}


if __name__ == "__main__":
    sys.exit(main())
