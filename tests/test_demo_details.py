"""The demo's decision log names why each swap was made, for both kinds of move."""

from types import SimpleNamespace

from reactccl.cli.demo_cmd import _decision_details


def test_local_search_move_says_model_not_a_congested_rank():
    d = SimpleNamespace(detected=[{"kind": "steady", "src": 3, "dst": 2}],
                        swaps=[{"symbol": "③", "a": 7, "b": 4, "graph": 0, "t0": 0, "t1": 1, "est_after_s": 8e-3}])
    lines = _decision_details(d)
    assert lines[0] == "detected 1 steady-congested flows: 3>2"
    assert lines[1] == ("③ swap ranks 7 <-> 4 in chunk graph 0, steps 0..1 (local search on the learned link "
                        "model); epoch est. 8 ms after this move")
    assert "?" not in "".join(lines)


def test_algorithm1_swap_names_its_rank():
    d = SimpleNamespace(detected=[], swaps=[{"symbol": "①", "a": 1, "b": 5, "node": {"kind": "erratic", "rank": 1},
                                             "lowers_degree": True, "est_before_s": 2e-3, "est_after_s": 1e-3}])
    (line,) = _decision_details(d)
    assert line.startswith("① swap ranks 1 <-> 5 in all chunk graphs (for erratic-congested rank 1, lowers its degree)")
    assert "critical path est." in line
