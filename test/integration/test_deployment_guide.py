"""The deployment guide's first try (docs/deployment.md, section 9, "Try it on one machine")
run as a new user would: its ```sh blocks, in order, in one bash, from the top of the source
tree. Only two things are substituted: the folder /tmp/arbor-demo becomes a fresh temporary
folder, and the build folder on the PATH line becomes the build under test
($ARBOR_BUILD_DIR). Then the outcome the guide describes is checked: the message crossed the
tree once, the picture was drawn, the tree shown before and after the root was stopped.
"""

import os
import pathlib
import re
import shutil
import subprocess

import pytest

from helpers import ARBOR_BIN

pytestmark = pytest.mark.arbor_only

ROOT = pathlib.Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "deployment.md"
BUILD = os.environ.get("ARBOR_BUILD_DIR") or os.path.dirname(ARBOR_BIN or "")


def guide_blocks():
    text = GUIDE.read_text()
    section = text.split("## 9. Try it on one machine", 1)[1]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def test_the_guide_has_the_blocks_this_test_runs():
    blocks = guide_blocks()
    assert len(blocks) == 5
    assert blocks[0].startswith('export PATH="$PWD/build:$PWD/build/tools:$PATH"\n')


def test_try_it_on_one_machine_runs_as_written(fixed_ports, tmp_path):
    for tool in ("mosquitto_pub", "mosquitto_sub", "dot"):
        if not shutil.which(tool):
            pytest.skip("%s is not installed (scripts/install-deps.sh installs it)" % tool)
    demo = str(tmp_path / "arbor-demo")
    script = "set -e\n" + "\n".join(guide_blocks())
    script = script.replace('export PATH="$PWD/build:$PWD/build/tools:$PATH"',
                            'export PATH="%s:%s/tools:$PATH"' % (BUILD, BUILD))
    script = script.replace("/tmp/arbor-demo", demo)
    try:
        run = subprocess.run(["bash", "-c", script], cwd=str(ROOT), capture_output=True,
                             text=True, timeout=120)
    finally:  # whatever happened, stop every broker the guide started (by its pid file)
        for site in (1, 2, 3):
            pid_file = os.path.join(demo, "site%d.pid" % site)
            try:
                os.kill(int(open(pid_file).read()), 15)
            except (OSError, ValueError):
                pass
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert open(os.path.join(demo, "received.txt")).read() == "demo/hello from site 3\n"
    with open(os.path.join(demo, "tree.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # show at site 3 (root: site 1), show at site 2 after the root stopped (site 2 took
    # over), show at site 3 after site 1 came back (root again)
    roots = re.findall(r"^root id +(\S+)$", run.stdout, re.M)
    assert roots == ["127.0.0.1:18841", "127.0.0.1:18842", "127.0.0.1:18841"], out
    assert "root 127.0.0.1:18841 -> 127.0.0.1:18842" in run.stdout, out   # the watch line
    assert "3 brokers reached, 0 unreachable, root 127.0.0.1:18841" in out
    for site in (1, 2, 3):
        log = open(os.path.join(demo, "site%d.log" % site)).read()
        assert "MQTT-ST: identity 127.0.0.1:1884%d" % site in log
        for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
            assert marker not in log, log
