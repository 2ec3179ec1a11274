"""The pattern IR: structure checks, degrees, dependencies, relabelling, equality, JSON."""

import json

import numpy as np
import pytest

from reactccl.pattern import (Chunk, Collective, CollectivePattern, Flow, Op, PatternBuilder, PatternError,
                              dumps, from_dict, loads, to_dict)


def two_rank_allreduce() -> CollectivePattern:
    b = PatternBuilder("allreduce", 2, name="pair")
    c = b.chunk(1.0, graph=0)
    b.flow(0, 0, 1, [c])
    b.flow(0, 1, 0, [c])
    return b.build()


def chain_allreduce() -> CollectivePattern:
    """3 ranks in a chain 0-1-2: reduce to 2 in two steps, copy back in two steps."""
    chunks = [Chunk(0, 0.5, 0), Chunk(1, 0.5, 0)]
    flows = [Flow(0, 0, 1, (0, 1)), Flow(1, 1, 2, (0, 1)),
             Flow(2, 2, 1, (0, 1), Op.COPY), Flow(3, 1, 0, (0, 1), Op.COPY)]
    return CollectivePattern("allreduce", 3, chunks, flows, name="chain")


def test_basic_accessors():
    p = chain_allreduce()
    assert (p.num_ranks, p.num_chunks, p.num_flows, p.num_steps) == (3, 2, 4, 4)
    assert p.flow(2) == Flow(2, 2, 1, (0, 1), Op.COPY)
    assert p.flows[0].op is Op.REDUCE
    np.testing.assert_allclose(p.flow_fraction, [1, 1, 1, 1])
    np.testing.assert_allclose(p.flow_bytes(2e6), [2e6] * 4)
    assert list(p.chunk_graphs()) == [0]
    assert p.chunk_graphs()[0].tolist() == [0, 1]


def test_degrees_per_step_and_graph():
    b = PatternBuilder("allreduce", 3)
    a, c = b.chunk(0.5, 0), b.chunk(0.5, 1)
    b.flow(0, 0, 2, [a]); b.flow(0, 1, 2, [a]); b.flow(0, 2, 0, [c])
    b.flow(1, 2, 0, [a], "copy"); b.flow(1, 2, 1, [a], "copy"); b.flow(1, 0, 2, [c], "copy")
    b.flow(2, 2, 1, [c], "copy")
    # not a valid allreduce (chunk 1 is never reduced at rank 1); degrees are structural only
    p = b.build()
    indeg, outdeg = p.degrees()
    assert indeg.shape == (3, 3)
    assert indeg[0].tolist() == [1, 0, 2]
    assert outdeg[1].tolist() == [1, 0, 2]
    gin, gout = p.degrees(per_graph=True)
    assert gin.shape == (2, 3, 3)
    assert gin[0, 0].tolist() == [0, 0, 2] and gin[1, 0].tolist() == [1, 0, 0]
    assert gout[0, 1].tolist() == [0, 0, 2]
    # flow degree: max over both endpoints of max(in, out) at that step
    assert p.flow_degree().tolist() == [2, 2, 2, 2, 2, 2, 1]


def test_dependencies_are_earlier_flows_into_source_with_same_chunks():
    b = PatternBuilder("allreduce", 4)
    x, y = b.chunk(0.5, 0), b.chunk(0.5, 1)
    b.flow(0, 0, 1, [x])        # 0
    b.flow(0, 2, 1, [y])        # 1
    b.flow(1, 3, 1, [x])        # 2: into 1, same chunk x, but later than flow 3's step? no: step 1
    b.flow(1, 1, 3, [y])        # 3: from 1 at step 1 with y: depends on flow 1 only
    b.flow(2, 1, 0, [x], "copy")  # 4: from 1 at step 2 with x: depends on 0 and 2
    p = b.build()
    ptr, idx = p.dependencies()
    deps = [idx[ptr[i]:ptr[i + 1]].tolist() for i in range(p.num_flows)]
    assert deps == [[], [], [], [1], [0, 2]]


def test_relabel_whole_graph_and_flows():
    p = chain_allreduce()
    q = p.relabel([2, 0, 1])
    assert [(f.src, f.dst) for f in q.flows] == [(2, 0), (0, 1), (1, 0), (0, 2)]
    b = PatternBuilder("allreduce", 3)
    a, c = b.chunk(0.5, 0), b.chunk(0.5, 1)
    b.flow(0, 0, 1, [a]); b.flow(0, 1, 2, [c])
    p2 = b.build()
    q2 = p2.relabel([1, 0, 2], graph=1)
    assert [(f.src, f.dst) for f in q2.flows] == [(0, 1), (0, 2)]
    q3 = p2.relabel([1, 0, 2], flows=[0])
    assert [(f.src, f.dst) for f in q3.flows] == [(1, 0), (1, 2)]
    with pytest.raises(PatternError, match="permutation"):
        p.relabel([0, 0, 1])
    with pytest.raises(PatternError, match="chunk graph 7"):
        p2.relabel([1, 0, 2], graph=7)


def test_relabel_moves_root():
    b = PatternBuilder("broadcast", 3, root=0)
    c = b.chunk(1.0, 0)
    b.flow(0, 0, 1, [c], "copy"); b.flow(1, 1, 2, [c], "copy")
    p = b.build()
    assert p.relabel([2, 1, 0]).root == 2


def test_equality_ignores_flow_order():
    p = chain_allreduce()
    flows = p.flows[::-1]
    q = CollectivePattern("allreduce", 3, p.chunks, flows, name="other")
    assert p == q and hash(p) == hash(q)
    assert p != p.relabel([1, 0, 2])


def test_show_is_compact():
    text = chain_allreduce().show()
    assert "t0   0>1+[0-1]" in text
    assert "t2   2>1=[0-1]" in text


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(bogus=1), "unknown field 'bogus'"),
    (lambda d: d["flows"][1].update(dst=3), r"flows\[1\].dst: rank 3 out of range"),
    (lambda d: d["flows"][2].update(src=1, dst=1), r"flows\[2\]: self-flow"),
    (lambda d: d["flows"][0].update(step=-1), r"flows\[0\].step: must be >= 0"),
    (lambda d: d["chunks"][1].update(size=0.25), "sum to 1"),
    (lambda d: d["flows"][3].update(op="add"), r"flows\[3\].op"),
    (lambda d: d["flows"][0].update(src="0"), r"flows\[0\].src: expected an integer"),
    (lambda d: d["chunks"][0].update(id=1), r"chunks\[0\].id"),
    (lambda d: d["flows"][0].update(chunks=[0, 5]), r"flows\[0\].chunks: chunk id 5 out of range"),
    (lambda d: d["flows"][0].update(chunks=[]), r"flows\[0\].chunks: a flow must carry"),
    (lambda d: d["flows"][0].update(extra=True), r"flows\[0\]: unknown field 'extra'"),
    (lambda d: d.update(collective="allreduce2"), "collective: unknown"),
    (lambda d: d.update(root=0), "root: allreduce takes no root"),
    (lambda d: d.update(schema="reactccl.pattern/2"), "schema"),
    (lambda d: d.pop("flows"), "missing field 'flows'"),
    (lambda d: d["chunks"][1].update(graph=1), r"flows\[0\].chunks: chunks of different chunk graphs"),
])
def test_json_errors_name_the_field(mutate, message):
    d = to_dict(chain_allreduce())
    mutate(d)
    with pytest.raises(PatternError, match=message):
        from_dict(d)


def test_blocked_collectives_need_chunks_inside_blocks():
    b = PatternBuilder("allgather", 2)
    b.chunk(0.75, 0); b.chunk(0.25, 0)
    with pytest.raises(PatternError, match="inside one rank's block"):
        b.build()


def test_json_roundtrip_is_lossless(tmp_path):
    p = chain_allreduce()
    text = dumps(p)
    doc = json.loads(text)
    assert doc["schema"] == "reactccl.pattern/1"
    assert doc["flows"][2] == {"step": 2, "src": 2, "dst": 1, "chunks": [0, 1], "op": "copy"}
    q = loads(text)
    assert q == p and q.name == "chain"
    assert [f for f in q.flows] == [f for f in p.flows]   # order kept too
    assert dumps(q) == text
    assert loads(dumps(p, indent=2)) == p
    with pytest.raises(PatternError, match="not valid JSON"):
        loads("{")


def test_collective_enum():
    assert Collective.BROADCAST.needs_root and not Collective.ALLREDUCE.needs_root
    assert Collective.ALLGATHER.is_blocked
    assert two_rank_allreduce().collective is Collective.ALLREDUCE


def test_cli_file_errors_are_messages(tmp_path, capsys):
    from reactccl.cli.main import main
    assert main(["pattern", "verify", str(tmp_path / "missing.json")]) == 2
    assert "No such file or directory" in capsys.readouterr().err
    assert main(["pattern", "generate", "ring", "--ranks", "3", "-o", str(tmp_path / "no" / "x.json")]) == 2
    assert "No such file or directory" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    d = to_dict(chain_allreduce())
    d["flows"] = d["flows"][:-1]          # drop the last copy: rank 0 never gets the result
    bad.write_text(json.dumps(d))
    assert main(["pattern", "verify", str(bad)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAIL") and "rank 0" in out
