"""scripts/check-include-cycles.py, the check `make test` runs so that the files of src/ keep
depending on each other one way (docs/architecture.md, "Layers inside src/"): it must pass on
the real tree with nothing allowed, and fail, naming the files, on a tree with a cycle
between two files, a longer one through headers, and one between folders."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.arbor_only

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "check-include-cycles.py")


def run(src, *args):
    p = subprocess.run([sys.executable, SCRIPT, *args, str(src)], capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def write(base, files):
    for path, includes in files.items():
        full = base / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text("".join('#include "%s"\n' % i for i in includes) + "int x;\n")


def test_real_source_tree_has_no_cycle():
    rc, out = run(os.path.join(ROOT, "src"), "--strict")
    assert rc == 0, out
    assert "no cycle" in out


def test_two_files_that_include_each_other_fail(tmp_path):
    write(tmp_path, {"a.c": ["a.h", "b.h"], "a.h": [], "b.c": ["b.h", "a.h"], "b.h": [],
                     "c.c": ["a.h"]})
    rc, out = run(tmp_path)
    assert rc == 1, out
    assert "include cycle among 2 files of src/: a b" in out
    assert "c" not in out.split("src/:")[1].split("\n")[0]


def test_cycle_through_a_header_that_includes_another(tmp_path):
    # x.c -> y.h; y.h -> z.h; z.c -> x.h: three modules in one circle
    write(tmp_path, {"x.c": ["y.h"], "x.h": [], "y.h": ["z.h"], "z.h": [], "z.c": ["x.h"]})
    rc, out = run(tmp_path)
    assert rc == 1, out
    assert "x y z" in out


def test_files_in_order_pass(tmp_path):
    write(tmp_path, {"top.c": ["mid.h", "low.h"], "mid.c": ["mid.h", "low.h"], "mid.h": [],
                     "low.c": ["low.h"], "low.h": []})
    rc, out = run(tmp_path, "--strict")
    assert rc == 0, out


def test_folders_that_depend_on_each_other_fail(tmp_path):
    # no file cycle, but core/ uses transport/ and transport/ uses core/
    write(tmp_path, {"core/route.c": ["conn.h"], "core/route.h": [],
                     "transport/conn.c": ["conn.h", "session.h"], "transport/conn.h": [],
                     "core/session.c": ["session.h"], "core/session.h": []})
    rc, out = run(tmp_path)
    assert rc == 1, out
    assert "include cycle among the folders of src/: core transport" in out
