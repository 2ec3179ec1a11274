"""NCCL's hierarchy wired through: on a topology of servers ``ring`` and ``nccl-tree`` take their
server options from it in run_simulation, simulate, perf, demo and the experiments
(reactccl.algorithms.server_options); whole servers are required and the placement is checked."""

import json

import numpy as np
import pytest

from reactccl.algorithms import generate
from reactccl.algorithms.server_options import hierarchy_note, server_options
from reactccl.cli.main import main
from reactccl.experiments.demo import DemoConfig, demo_scenario
from reactccl.experiments.runner import ArmDriver
from reactccl.experiments.scenario import JobSpec, Scenario, job_pattern
from reactccl.netsim import run_simulation
from reactccl.pattern import PatternError
from reactccl.topology import parse_topology

RAIL = "rail:servers=4,gpus=8"            # 8 NICs per server, PXN
SHARED = "fat-tree:k=4,gpus=4"            # 16 servers of 4 GPUs, one shared NIC each


def same(a, b):
    return all(np.array_equal(getattr(a, f), getattr(b, f))
               for f in ("step", "src", "dst", "op", "chunk_ptr", "chunk_idx", "chunk_graph", "chunk_size"))


def test_fills_from_the_topology():
    rail, shared = parse_topology(RAIL), parse_topology(SHARED)
    assert server_options("ring", 32, rail) == {"servers": 4, "gpus": 8, "nics": 8}
    assert server_options("nccl-tree", 16, rail, {"channels": "4"}) == {"channels": "4", "servers": 2, "gpus": 8,
                                                                        "nics": 8}
    assert server_options("ring", 16, shared, placement="random", seed=3) == {"servers": 4, "gpus": 4, "nics": 1}
    # the caller's own keys stay; nics follows only when the servers have the topology's G GPUs
    assert server_options("ring", 32, rail, {"nics": "2"}) == {"nics": "2", "servers": 4, "gpus": 8}
    assert server_options("ring", 32, rail, {"gpus": "8"}) == {"gpus": "8", "nics": 8}
    assert server_options("ring", 32, rail, {"gpus": "4"}) == {"gpus": "4"}
    # nothing filled: flat pattern asked for, another generator, a flat topology
    assert server_options("ring", 12, rail, {"hierarchy": "flat"}) == {"hierarchy": "flat"}
    assert server_options("rabenseifner", 12, rail) == {}
    assert server_options("ring", 12, parse_topology("fat-tree:k=4")) == {}


@pytest.mark.parametrize("n, placement, message", [
    (12, "first", "12 ranks do not fill whole servers of 8 GPUs, which NCCL's hierarchical ring needs; use a "
                  "multiple of 8 ranks (8 or 16), or the option hierarchy=flat"),
    (4, "first", "use a multiple of 8 ranks (8)"),
    (16, [*range(8), *range(9, 16), 8], "rank 8 is on s1g1 (GPU 1 of server 1), but NCCL's hierarchical ring puts "
                                        "rank r on GPU r mod 8 of the server of rank r - r mod 8: rank 8 on GPU 0"),
    (16, [*range(8), *range(8, 15), 17], "rank 15 is on s2g1 (GPU 1 of server 2), but NCCL's hierarchical ring puts "
                                         "rank r on GPU r mod 8 of the server of rank r - r mod 8: rank 15 on GPU 7 "
                                         "of server 1, with rank 8"),
    (8, list(range(32, 40)), "rank 0 is on host st0, not a GPU"),
])
def test_partial_servers_and_misplaced_ranks_are_refused(n, placement, message):
    with pytest.raises(PatternError, match="ring on rail:servers=4,gpus=8: ") as exc:
        server_options("ring", n, parse_topology(RAIL), placement=placement)
    assert message in str(exc.value)
    # the flat pattern on the same GPUs stays available
    assert server_options("ring", n, parse_topology(RAIL), {"hierarchy": "flat"}, placement) == {"hierarchy": "flat"}


def test_hierarchy_notes():
    rail = parse_topology(RAIL)
    assert hierarchy_note("ring", 32, server_options("ring", 32, rail)) == \
        "ring: NCCL's hierarchical ring over 4 servers x 8 GPUs, 8 NICs each, 8 channels"
    assert hierarchy_note("nccl-tree", 32, server_options("nccl-tree", 32, rail)) == \
        "nccl-tree: NCCL's hierarchical tree over 4 servers x 8 GPUs, 8 NICs each, 16 channels"
    assert hierarchy_note("nccl-tree", 16, server_options("nccl-tree", 16, parse_topology(SHARED),
                                                          {"channels": "1"})) == \
        "nccl-tree: NCCL's hierarchical tree over 4 servers x 4 GPUs, 1 NIC each, 1 channel"
    assert hierarchy_note("ring", 8, {"hierarchy": "flat"}) == "ring: flat (hierarchy=flat)"
    assert hierarchy_note("ring", 8, {}) == "ring: flat (one GPU per server)"
    assert hierarchy_note("swing-b", 16, {}) is None


def test_run_simulation_builds_the_hierarchy_on_servers():
    # 2 servers x 4 GPUs, 4 NICs: the ring has 4 channels of 2(N-1) = 14 steps x 8 sends; flat: 8 x 14
    spec = "rail:servers=2,gpus=4"
    hier = run_simulation("ring", 8, topology=spec, size=1e6, epochs=1, slowest=0)
    flat = run_simulation("ring", 8, topology=spec, size=1e6, epochs=1, slowest=0, options={"hierarchy": "flat"})
    assert (hier.num_flows, flat.num_flows) == (4 * 14 * 8, 14 * 8)
    assert same(hier.traces[0].pattern, generate("ring", 8, gpus=4))
    # random placement takes whole servers: the same pattern, on other GPUs
    rnd = run_simulation("nccl-tree", 8, topology="rail:servers=4,gpus=4", size=1e6, epochs=1, slowest=0,
                         placement="random", seed=5)
    assert rnd.num_flows == generate("nccl-tree", 8, size=1e6, gpus=4, nics=4).num_flows
    layout = parse_topology("rail:servers=4,gpus=4").servers
    server, local = layout.server_of_host[rnd.placement], layout.local_of_host[rnd.placement]
    assert list(local) == [0, 1, 2, 3] * 2 and len(set(server[:4])) == len(set(server[4:])) == 1
    with pytest.raises(PatternError, match="6 ranks do not fill whole servers of 4 GPUs"):
        run_simulation("ring", 6, topology=spec, size=1e6, epochs=1)


def test_cli_simulate_fills_and_compares(capsys):
    base = ["simulate", "-a", "ring", "-n", "8", "-t", "rail:servers=2,gpus=4", "-s", "100MB", "-e", "1", "--json"]
    assert main(base) == 0
    hier = json.loads(capsys.readouterr().out)
    assert hier["algorithm"] == "ring(servers=2,gpus=4,nics=4,channels=4)" and hier["flows_per_epoch"] == 4 * 14 * 8
    assert main(base + ["-O", "hierarchy=flat"]) == 0
    flat = json.loads(capsys.readouterr().out)
    assert flat["algorithm"] == "ring" and flat["flows_per_epoch"] == 14 * 8
    # the hierarchy spreads the inter-server bytes over the 4 NICs: busbw about 4x the flat ring's
    assert hier["stats"]["busbw_Bps"] > 3.5 * flat["stats"]["busbw_Bps"]
    assert main(base + ["-O", "channels=2"]) == 0
    assert json.loads(capsys.readouterr().out)["algorithm"] == "ring(servers=2,gpus=4,nics=4,channels=2)"
    assert main(base[:4] + ["6"] + base[5:]) == 2
    err = capsys.readouterr().err
    assert "6 ranks do not fill whole servers of 4 GPUs" in err and "hierarchy=flat" in err


def test_perf_header_names_the_hierarchy(capsys):
    assert main(["perf", "-b", "1M", "-e", "1M", "--ranks", "8", "--topology", "rail:servers=2,gpus=4", "-n", "1",
                 "-w", "0"]) == 0
    out = capsys.readouterr().out
    assert ("# hierarchy (servers of rail:servers=2,gpus=4; -O hierarchy=flat: the flat pattern, -O channels=C: C "
            "channels): ring: NCCL's hierarchical ring over 2 servers x 4 GPUs, 4 NICs each, 4 channels; nccl-tree: "
            "NCCL's hierarchical tree over 2 servers x 4 GPUs, 4 NICs each, 8 channels") in out
    assert "pattern ring(servers=2,gpus=4,nics=4,channels=4)" in out
    assert main(["perf", "-b", "1M", "-e", "1M", "--ranks", "8", "--topology", "fat-tree:k=4", "-n", "1",
                 "-w", "0"]) == 0
    assert "hierarchy" not in capsys.readouterr().out


def test_experiments_and_demo_use_the_hierarchy():
    job = JobSpec("nccl-tree", 8, 1e6, tuple(range(8)))
    want = generate("nccl-tree", 8, slices=1, servers=2, gpus=4, nics=1)   # PAPER_OPTIONS: one slice
    assert same(job_pattern(job, SHARED), want)
    flat = JobSpec("nccl-tree", 8, 1e6, tuple(range(8)), (("hierarchy", "flat"),))
    assert same(job_pattern(flat, SHARED), generate("nccl-tree", 8, slices=1))
    assert flat.to_json()["options"] == {"hierarchy": "flat"} and "options" not in job.to_json()
    sc = Scenario("t", (), 0, 0, SHARED, (job,), epochs=2, warmup=0)
    assert same(ArmDriver(sc, (False,)).controllers[0].pattern_for_epoch(0), want)
    sc_demo, _ = demo_scenario(DemoConfig(topology="rail:servers=2,gpus=4", algorithm="ring", ranks=8,
                                          options=(("channels", "2"),)))
    assert same(job_pattern(sc_demo.jobs[0], sc_demo.topology), generate("ring", 8, gpus=4, channels=2))
    with pytest.raises(PatternError, match="6 ranks do not fill whole servers"):
        demo_scenario(DemoConfig(topology="rail:servers=2,gpus=4", algorithm="ring", ranks=6))


def test_random_scenarios_take_whole_servers():
    from reactccl.experiments.scenario import degraded_scenario, random_pairs_scenario
    sc = random_pairs_scenario("t", (), 0, 7, SHARED, "ring", 2, 1, ranks=8)
    lay = parse_topology(SHARED).servers
    place = np.array(sc.jobs[0].placement)
    assert list(lay.local_of_host[place]) == [0, 1, 2, 3] * 2
    assert len(set(lay.server_of_host[place[:4]])) == len(set(lay.server_of_host[place[4:]])) == 1
    assert same(job_pattern(sc.jobs[0], SHARED), generate("ring", 8, gpus=4, nics=1))
    dg = degraded_scenario("t", (), 0, 7, RAIL, "nccl-tree", 100e9, 1, ranks=16)
    assert same(job_pattern(dg.jobs[0], RAIL), generate("nccl-tree", 16, slices=1, gpus=8))
    # flat topologies keep their draws: the figures stay bit-identical
    flat = random_pairs_scenario("t", (), 0, 7, "fat-tree:k=4", "ring", 2, 1, ranks=8)
    rng = np.random.default_rng([flat.seed, 10])
    assert flat.jobs[0].placement == tuple(int(h) for h in rng.choice(16, size=8, replace=False))


def test_help_and_pattern_list_say_how_to_run_on_servers(capsys):
    assert main(["pattern", "list"]) == 0
    out = capsys.readouterr().out
    assert "simulate, perf and demo take servers, gpus and nics from a topology of servers" in out
    assert "reactccl simulate -a ring -n 32 -t rail:servers=4,gpus=8 -s 1GB -e 3" in out
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "On multi-GPU servers: reactccl simulate -a ring -n 32 -t rail:servers=4,gpus=8 -s 1GB -e 3" in text
    assert "-O hierarchy=flat gives the flat pattern on the same GPUs" in text
