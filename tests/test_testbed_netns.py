"""The emulated cluster for real: namespaces, shaping, congestion, launcher (root + iproute2).

Rates are kept low (50-100 Mbit/s) so the shaper, not the shared CPU, is the
bottleneck; the asserted ranges are wide enough for a loaded 2-core machine.
Reference goodput of one TCP flow on a link of rate R with 1500-byte frames:
R x 1448/1514 (TCP payload per Ethernet frame as htb counts it) = 0.956 R.
"""

import os
import subprocess
import sys
import time

import pytest

from reactccl.testbed import Testbed, TestbedError, measure_transfers, netns_unavailable
from reactccl.testbed import netns as netns_mod
from reactccl.testbed import testbed as testbed_mod
from reactccl.testbed.state import new_prefix

pytestmark = [pytest.mark.netns,
              pytest.mark.skipif(netns_unavailable() is not None, reason=str(netns_unavailable()))]

GOODPUT = 1448 / 1514


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("REACTCCL_TESTBED_DIR", str(tmp_path))


def _leftovers(prefix):
    """Namespaces of ``prefix`` and traffic processes of *this checkout's* script still alive (a test
    run from another clone on the same machine, e.g. CI beside a newcomer check, runs its own path)."""
    ns = netns_mod.list_namespaces(prefix + "-")
    procs = subprocess.run(["pgrep", "-f", "traffic.py"], capture_output=True, text=True).stdout.split()
    return ns, [p for p in procs if int(p) != os.getpid() and testbed_mod._is_traffic(int(p))]


def test_up_down_leaves_nothing(tmp_path):
    tb = Testbed(hosts=3, rate="100mbit")
    with tb:
        assert tb.namespaces() == [f"{tb.prefix}-{n}" for n in ("h0", "h1", "h2", "sw")]
        assert (tmp_path / f"{tb.prefix}.json").exists()
        qd = subprocess.run(["tc", "-n", tb.host_ns(1), "qdisc", "show", "dev", "rcl0"],
                            capture_output=True, text=True).stdout
        assert "htb 1:" in qd and "bfifo 10:" in qd and "limit 256Kb" in qd
        link = subprocess.run(["ip", "-n", tb.host_ns(2), "-br", "addr", "show", "rcl0"],
                              capture_output=True, text=True).stdout
        assert "10.77.0.3/16" in link
        tb.congest(into=0, flows=2)
        assert len(tb.namespaces()) == 6
    assert _leftovers(tb.prefix) == ([], [])
    assert not (tmp_path / f"{tb.prefix}.json").exists()
    tb.down()  # twice is fine


def test_failed_up_cleans_up(monkeypatch):
    calls = []

    def flaky(ns, dev, rate, queue):
        calls.append(ns)
        if len(calls) == 3:
            raise TestbedError("injected failure")
        return real(ns, dev, rate, queue)

    real = testbed_mod.shape_egress
    monkeypatch.setattr(testbed_mod, "shape_egress", flaky)
    tb = Testbed(hosts=3, rate="100mbit")
    with pytest.raises(TestbedError, match="injected"):
        tb.up()
    assert tb.namespaces() == [] and not tb.state.path.exists()


def test_rate_shaping_within_range():
    with Testbed(hosts=2, rate="50mbit") as tb:
        t = measure_transfers(tb, [(0, 1)], 6_000_000)[0]   # about 1 s at 50 Mbit/s
        back = measure_transfers(tb, [(1, 0)], 6_000_000)[0]
    for tr in (t, back):
        assert 0.80 * 50e6 * GOODPUT < tr.bps < 1.02 * 50e6 * GOODPUT, tr


def test_congestion_slows_transfers_into_that_host():
    """Three external flows into rank 1: a transfer 0->1 gets a fraction of the link.

    Under fair sharing the transfer would get a quarter (4x slower); reno's share
    over a few seconds is uneven, and on a loaded CI machine a python sender may
    fall short of its share, so only a clear slowdown (> 1.4x) is asserted, the
    mean of three transfers. A transfer into rank 2 (not congested) is not slowed.
    """
    with Testbed(hosts=3, rate="100mbit") as tb:
        alone = measure_transfers(tb, [(0, 1)], 8_000_000)[0].seconds
        tb.congest(into=1, flows=3)
        time.sleep(0.5)
        into = [measure_transfers(tb, [(0, 1)], 8_000_000)[0].seconds for _ in range(3)]
        other = measure_transfers(tb, [(0, 2)], 8_000_000)[0].seconds  # rank 2 is not congested
        assert tb.stop_congestion() == 4  # the sink and three sources
    slowdown = sum(into) / len(into) / alone
    assert 1.4 < slowdown < 8.0, (alone, into)
    assert other < 1.3 * alone, (alone, other)


def test_run_sets_env_and_propagates_failure():
    with Testbed(hosts=3, rate="100mbit") as tb:
        ok = tb.run([sys.executable, "-c",
                     "import os; print(os.environ['RANK'], os.environ['WORLD_SIZE'], "
                     "os.environ['MASTER_ADDR'], os.environ['GLOO_SOCKET_IFNAME'])"],
                    stream=False, timeout=60)
        assert ok.returncode == 0 and ok.codes == [0, 0, 0]
        assert [o.strip() for o in ok.output] == [f"{r} 3 10.77.0.1 rcl0" for r in range(3)]

        bad = tb.run(["sh", "-c", 'if [ "$RANK" = 2 ]; then exit 7; fi; sleep 30'],
                     stream=False, timeout=60, grace=1.0)
        assert (bad.returncode, bad.failed_rank, bad.timed_out) == (7, 2, False)
        assert all(c is not None and c < 0 for c in bad.codes[:2]), bad.codes  # stopped by a signal

        slow = tb.run(["sleep", "30"], stream=False, timeout=1.0, grace=1.0)
        assert slow.timed_out and slow.returncode == 124


def test_two_prefixes_do_not_collide():
    a, b = Testbed(hosts=2, rate="100mbit", prefix=new_prefix()), Testbed(hosts=2, rate="100mbit")
    with a, b:
        with pytest.raises(TestbedError, match="in use"):
            Testbed(hosts=2, prefix=a.prefix).up()
        assert a.host_addr(1) == b.host_addr(1)  # same private subnet, separate namespaces
        ta = measure_transfers(a, [(0, 1)], 1_000_000)[0]
        tb_ = measure_transfers(b, [(1, 0)], 1_000_000)[0]
        assert ta.nbytes == tb_.nbytes == 1_000_000
        b.down()
        assert a.namespaces() and not b.namespaces()
        assert measure_transfers(a, [(1, 0)], 1_000_000)[0].nbytes == 1_000_000


def test_congestion_with_duration_ends_by_itself():
    with Testbed(hosts=2, rate="100mbit") as tb:
        g = tb.congest(into=1, flows=1, duration=1.0)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(netns_mod._alive(p) for p in g.pids):
            time.sleep(0.2)
        assert not any(netns_mod._alive(p) for p in g.pids)


def test_cli_up_congest_run_down(tmp_path, capsys):
    from reactccl.cli.main import main

    prefix = new_prefix()
    assert main(["testbed", "up", "--hosts", "2", "--rate", "100mbit", "--prefix", prefix]) == 0
    try:
        assert f"testbed {prefix}: 2 hosts, 100 Mbit/s" in capsys.readouterr().out
        assert main(["testbed", "congest", "--into", "1", "--flows", "1"]) == 0
        assert main(["testbed", "status"]) == 0
        assert "congestion: 1 into rank 1" in capsys.readouterr().out
        assert main(["testbed", "run", "--timeout", "30", "--", "sh", "-c", "exit $((RANK * 3))"]) == 3
        assert main(["testbed", "congest", "--stop"]) == 0
        assert main(["testbed", "congest", "--into", "5", "--flows", "1"]) == 2  # no rank 5: bad input
        assert "rank 5 out of range" in capsys.readouterr().err
    finally:
        assert main(["testbed", "down", "--prefix", prefix]) == 0
    assert _leftovers(prefix) == ([], [])


# --- issue 11: what a killed command leaves, the next up/down/run removes ---------------------

def _spawn(code: str) -> subprocess.Popen:
    """A python child (own session) that prints a line when it reached the point to kill it at."""
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ})


def _kill9_after(proc: subprocess.Popen, word: str, timeout: float = 60.0) -> None:
    import select
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline and word not in line:
        if select.select([proc.stdout], [], [], 0.5)[0]:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
    assert word in line, f"child never printed {word!r} (exit {proc.poll()})"
    proc.kill()
    proc.wait(10)


_MID_BUILD = """
import sys, time
from reactccl.testbed import Testbed, testbed as m
real, calls = m.shape_egress, []
def stuck(*a):
    calls.append(a)
    if len(calls) == 3:
        print("mid-build", flush=True)
        time.sleep(120)
    return real(*a)
m.shape_egress = stuck
Testbed(hosts=4, rate="100mbit", prefix=sys.argv[1] if len(sys.argv) > 1 else "{prefix}").up()
"""


def test_killed_up_is_removed_by_the_next_up(tmp_path):
    prefix = new_prefix()
    child = _spawn(_MID_BUILD.format(prefix=prefix))
    _kill9_after(child, "mid-build")
    assert netns_mod.list_namespaces(prefix + "-") and (tmp_path / f"{prefix}.json").exists()
    with Testbed(hosts=2, rate="100mbit") as other:
        assert [p for p, _ in other.swept] == [prefix]
        assert netns_mod.list_namespaces(prefix + "-") == [] and not (tmp_path / f"{prefix}.json").exists()


def test_killed_up_is_removed_by_down_and_down_of_nothing_fails(tmp_path, capsys):
    from reactccl.cli.main import main
    prefix = new_prefix()
    child = _spawn(_MID_BUILD.format(prefix=prefix))
    _kill9_after(child, "mid-build")
    assert main(["testbed", "down"]) == 0          # the only testbed: the half-built one
    assert _leftovers(prefix) == ([], []) and not (tmp_path / f"{prefix}.json").exists()
    assert "removed what a killed command left of testbed " + prefix in capsys.readouterr().err
    assert main(["testbed", "down", "--prefix", "zzz"]) == 1
    out, err = capsys.readouterr()
    assert "no testbed 'zzz' to remove" in err and out == ""
    assert main(["testbed", "down", "--prefix", "Bad!"]) == 2


def test_killed_with_block_and_killed_run_leave_nothing_for_the_next_command(tmp_path):
    # a `with Testbed` block (transient) whose process dies with congestion flows running
    prefix = new_prefix()
    child = _spawn(f"""
from reactccl.testbed import Testbed
import time
with Testbed(hosts=2, rate="100mbit", prefix="{prefix}") as tb:
    tb.congest(into=1, flows=2)
    print("congested", flush=True)
    time.sleep(120)
""")
    _kill9_after(child, "congested")
    assert len(netns_mod.list_namespaces(prefix + "-")) == 5 and _leftovers(prefix)[1]
    tb = Testbed(hosts=2, rate="100mbit")
    tb.up()  # removes the dead block's testbed and its flows
    try:
        assert _leftovers(prefix) == ([], [])
        # a `testbed run` launcher killed while its ranks run: the next run stops them first
        launcher = _spawn(f"""
from reactccl.testbed import Testbed
tb = Testbed.attach("{tb.prefix}")
import threading, time
threading.Timer(1.0, lambda: print("running", flush=True)).start()
tb.run(["sh", "-c", "sleep 97 & sleep 98"], timeout=100, stream=False)
""")
        _kill9_after(launcher, "running")
        ranks = Testbed.attach(tb.prefix).state.ranks
        assert len(ranks) == 2 and all(netns_mod._alive(p) for p, _ in ranks)
        ok = Testbed.attach(tb.prefix).run(["true"], timeout=30, stream=False)
        assert ok.returncode == 0 and not any(netns_mod._alive(p) for p, _ in ranks)
        assert subprocess.run(["pgrep", "-f", "sleep 9[78]"], capture_output=True).returncode == 1
        # and once more, this time `down` finds them
        launcher = _spawn(launcher.args[2])
        _kill9_after(launcher, "running")
        ranks = Testbed.attach(tb.prefix).state.ranks
        assert ranks and all(netns_mod._alive(p) for p, _ in ranks)
    finally:
        what = Testbed.attach(tb.prefix).down() if (tmp_path / f"{tb.prefix}.json").exists() else None
    assert what is not None and what["processes"] >= 2
    assert subprocess.run(["pgrep", "-f", "sleep 9[78]"], capture_output=True).returncode == 1
    assert netns_mod.list_namespaces(tb.prefix + "-") == []
