"""MSCCL XML both ways: round trips of every generator, hand-written msccl-tools-style fixtures,
and the programs the importer must refuse (unsafe XML, deadlocks, races, wrong results)."""

from pathlib import Path

import numpy as np
import pytest
from defusedxml import ElementTree as DET

from reactccl.algorithms import generate, names
from reactccl.cli.main import main
from reactccl.pattern import Collective, PatternBuilder, verify
from reactccl.pattern.canon import canonical
from reactccl.pattern.msccl_common import MscclError
from reactccl.pattern.msccl_export import to_msccl_xml
from reactccl.pattern.msccl_import import from_msccl_xml, load_msccl_xml

DATA = Path(__file__).parent / "data"

# every registered generator at several sizes (torus ones on their smallest tori)
CASES = {
    "binomial-broadcast": [(2, {}), (5, {"root": 2}), (8, {})],
    "binomial-reduce": [(3, {}), (6, {"root": 1})],
    "bucket": [(9, {}), (12, {"shape": "4x3"})],
    "k-sp-allreduce": [(9, {})],
    "nccl-tree": [(2, {}), (5, {}), (6, {"slices": 2}), (9, {})],
    "rabenseifner": [(4, {}), (6, {}), (8, {})],
    "rd-allreduce": [(2, {}), (4, {}), (8, {})],
    "recursive-doubling": [(4, {}), (6, {}), (8, {})],
    "ring": [(1, {}), (2, {}), (3, {}), (6, {})],
    "ring-allgather": [(3, {}), (5, {})],
    "ring-reducescatter": [(3, {}), (5, {})],
    "sp-allreduce": [(9, {})],
    "sp-allreduce-2h1": [(16, {})],
    "sp-hyperx": [(9, {})],
    "sp-spineleaf": [(8, {"q": 2})],
    "swing-b": [(16, {})],
    "swing-l": [(16, {})],
    "torus-ring": [(9, {})],
    "trivance-b": [(9, {})],
    "trivance-l": [(9, {})],
}


def test_every_generator_has_round_trip_cases():
    # AllToAll is not exported yet (test_alltoall.py checks the refusal)
    assert sorted(CASES) == [n for n in names() if not n.startswith("alltoall-")]


@pytest.mark.parametrize("algo,n,opts", [(a, n, o) for a, cs in CASES.items() for n, o in cs],
                         ids=lambda v: str(v) if not isinstance(v, dict) else "")
def test_round_trip_same_flows(algo, n, opts):
    p = generate(algo, n, **opts)
    xml = to_msccl_xml(p, max_channels=1 << 20)   # one channel per chunk graph: graphs survive
    q = from_msccl_xml(xml)                        # verified inside
    assert q.collective is p.collective and q.num_ranks == n and q.root == p.root
    assert canonical(q) == canonical(p)
    assert np.isclose(q.flow_fraction.sum(), p.flow_fraction.sum())   # same bytes moved


def test_round_trip_with_shared_channels_still_verifies():
    p = generate("sp-allreduce", 16)               # 64 chunk graphs on NCCL's 32 channels
    root = DET.fromstring(to_msccl_xml(p))
    assert root.get("nchannels") == "32"
    q = from_msccl_xml(to_msccl_xml(p))
    verify(q)
    assert _pair_bytes(q) == _pair_bytes(p)


def _steps(xml: str):
    root = DET.fromstring(xml)
    return root, {(int(g.get("id")), int(tb.get("id"))): (tb, list(tb)) for g in root for tb in g}


def test_ring_export_fuses_like_msccl_tools():
    root, tbs = _steps(to_msccl_xml(generate("ring", 3)))
    assert root.get("nchunksperloop") == "3" and root.get("coll") == "allreduce" and root.get("nchannels") == "3"
    tb, steps = tbs[(0, 1)]                       # gpu 0, channel 1: partial reduced and forwarded, then final
    assert (tb.get("send"), tb.get("recv"), tb.get("chan")) == ("1", "2", "1")
    assert [s.get("type") for s in steps] == ["rrs", "r"]
    types = sorted(s.get("type") for _, (_, st) in tbs.items() for s in st)
    assert types == sorted(["rrcs", "rrs", "r", "s", "rcs"] * 3)


def test_export_grid_and_cross_threadblock_waits():
    # rank 0 gets reduces from 1 and 2 in one step (one cell), then sends the sum to 3 and back
    b = PatternBuilder("allreduce", 4, name="star")
    c0, c1 = b.chunk(0.75, 0), b.chunk(0.25, 0)
    for r in (1, 2, 3):
        b.flow(0, r, 0, [c0, c1])
    for r in (1, 2, 3):
        b.flow(1, 0, r, [c0, c1], op="copy")
    p = b.build()
    verify(p)
    xml = to_msccl_xml(p)
    root, tbs = _steps(xml)
    assert root.get("nchunksperloop") == "4"                     # LCM of 4/3 and 4 denominators
    gpu0 = {k[1]: v for k, v in tbs.items() if k[0] == 0}
    recv = [(tid, s) for tid, (tb, st) in gpu0.items() for s in st if s.get("type") in ("rrc", "rrcs")]
    assert len(recv) == 3 and all(s.get("cnt") == "4" for _, s in recv)
    assert sorted(s.get("type") for _, s in recv) == ["rrc", "rrc", "rrcs"]    # the last one forwards to 1
    waits = [s for _, s in recv if s.get("depid") != "-1"]
    assert len(waits) == 2                                       # the three reduces into one cell are serialised
    for s in waits:
        dep_tb, dep_s = int(s.get("depid")), int(s.get("deps"))
        assert gpu0[dep_tb][1][dep_s].get("hasdep") == "1"
    sends = [(tb, s) for _, (tb, st) in gpu0.items() for s in st if s.get("type") == "s"]
    assert sorted(tb.get("send") for tb, _ in sends) == ["2", "3"]
    for tb, s in sends:                                          # each waits for the fused rrcs (after all reduces)
        dep = gpu0[int(s.get("depid"))][1][int(s.get("deps"))]
        assert dep.get("type") == "rrcs"
    assert canonical(from_msccl_xml(xml)) == canonical(p)


def test_fixture_ring_allreduce():
    p = load_msccl_xml(DATA / "msccl_ring_allreduce_4.xml")
    assert (p.num_ranks, p.num_chunks, p.num_flows, p.num_steps) == (4, 4, 24, 6)
    # chunk c starts at rank c: reduce steps 0-2 carry c, c-1, c-2 out of rank r; then copies
    first = [(f.src, f.dst, f.chunks, f.op.value) for f in p.flows if f.step == 0]
    assert sorted(first) == [(0, 1, (0,), "reduce"), (1, 2, (1,), "reduce"), (2, 3, (2,), "reduce"), (3, 0, (3,), "reduce")]
    assert {f.op.value for f in p.flows if f.step >= 3} == {"copy"}


def test_fixture_allpairs_with_scratch():
    p = load_msccl_xml(DATA / "msccl_allpairs_allreduce_4.xml")
    # receives into scratch + local re become reduce flows; the final broadcast copies
    assert (p.num_flows, p.num_steps) == (24, 2)
    red = sorted((f.src, f.dst, f.chunks) for f in p.flows if f.step == 0)
    assert red == sorted((s, d, (d,)) for s in range(4) for d in range(4) if s != d)
    assert all(f.op.value == "reduce" for f in p.flows if f.step == 0)
    assert sorted((f.src, f.dst, f.chunks) for f in p.flows if f.step == 1) == sorted(
        (s, d, (s,)) for s in range(4) for d in range(4) if s != d)


def test_fixture_halving_doubling_equals_rabenseifner_shape():
    p = load_msccl_xml(DATA / "msccl_halving_doubling_4.xml")
    assert (p.num_flows, p.num_steps, p.num_chunks) == (16, 4, 4)
    f0 = sorted((f.src, f.dst, f.chunks) for f in p.flows if f.step == 0)
    assert f0 == [(0, 2, (2, 3)), (1, 3, (2, 3)), (2, 0, (0, 1)), (3, 1, (0, 1))]
    assert [len({f.op for f in p.flows if f.step == t}) for t in range(4)] == [1, 1, 1, 1]


def test_cli_export_import_round_trip(tmp_path, capsys):
    x, j = tmp_path / "t.xml", tmp_path / "t.json"
    assert main(["pattern", "export", "nccl-tree", "-n", "5", "--to", "msccl-xml", "-o", str(x)]) == 0
    assert main(["pattern", "import", str(x), "-o", str(j)]) == 0
    assert "no deadlock or race" in capsys.readouterr().err
    assert main(["pattern", "verify", str(x)]) == 0
    assert main(["pattern", "verify", str(j)]) == 0
    assert main(["pattern", "export", str(j), "--to", "json"]) == 0
    assert '"schema": "reactccl.pattern/1"' in capsys.readouterr().out


BOMB = """<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
<algo name="&lol2;" ngpus="2" nchunksperloop="1" coll="allreduce"/>"""
EXTERNAL = """<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]>
<algo name="&x;" ngpus="2" nchunksperloop="1" coll="allreduce"/>"""


@pytest.mark.parametrize("text", [BOMB, EXTERNAL])
def test_unsafe_xml_refused(text):
    with pytest.raises(MscclError, match="refused unsafe XML"):
        from_msccl_xml(text)


def _hd():
    return (DATA / "msccl_halving_doubling_4.xml").read_text()


def test_race_found():
    # drop the wait of tb 1 step 0 on the reduce of tb 0: it may send rank r^1's chunk before it is reduced
    bad = _hd().replace('type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="0" deps="1"',
                        'type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1"', 1)
    assert bad != _hd()
    with pytest.raises(MscclError, match="race on gpu 0 cell i\\[1\\]"):
        from_msccl_xml(bad)


def test_deadlock_found():
    # gpu 0's tb 0 waits for its own later step
    bad = _hd().replace('cnt="2" depid="1" deps="3"', 'cnt="2" depid="0" deps="3"', 1)
    with pytest.raises(MscclError, match="deadlock: .* gpu 0, tb 0, step 2"):
        from_msccl_xml(bad)


def test_unmatched_send_named():
    # gpu 3 forgets its last receive
    text = (DATA / "msccl_ring_allreduce_4.xml").read_text()
    lines = text.splitlines()
    gpu3 = max(i for i, l in enumerate(lines) if '<gpu id="3"' in l)
    last = max(i for i, l in enumerate(lines) if 'type="r"' in l and i > gpu3)
    bad = "\n".join(lines[:last] + lines[last + 1:])
    with pytest.raises(MscclError, match="gpu 2 sends 6 times to gpu 3 on channel 0 but gpu 3 receives 5"):
        from_msccl_xml(bad)


def test_wrong_result_named():
    # gpu 0 adds the scratch cell from gpu 1 twice and never the one from gpu 2
    text = (DATA / "msccl_allpairs_allreduce_4.xml").read_text()
    gpu0 = text.index('<gpu id="0"')
    i = text.index('type="re" srcbuf="s" srcoff="1"', gpu0)
    bad = text[:i] + 'type="re" srcbuf="s" srcoff="0"' + text[i + len('type="re" srcbuf="s" srcoff="1"'):]
    with pytest.raises(MscclError, match="allreduce not computed: gpu 0 chunk 0 holds rank 1's data 2 times"):
        from_msccl_xml(bad)


def test_bad_attribute_named():
    bad = _hd().replace('type="rrc"', 'type="rrx"', 1)
    with pytest.raises(MscclError, match="gpu 0, tb 0, step 1: unknown type 'rrx'"):
        from_msccl_xml(bad)
    with pytest.raises(MscclError, match="outside the 4 cells"):
        from_msccl_xml(_hd().replace('srcoff="2" dstbuf="i" dstoff="2" cnt="2"', 'srcoff="3" dstbuf="i" dstoff="3" cnt="2"', 1))


def _adds_wrong_chunk():
    # the ring's first reduce on gpu 0 channel 1 reads cell 2 but receives chunk 1
    text = to_msccl_xml(generate("ring", 4))
    old = 'type="rrs" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1"'
    assert old in text
    return text.replace(old, 'type="rrs" srcbuf="i" srcoff="2" dstbuf="i" dstoff="1"', 1)


def _drops_last_receive():
    lines = (DATA / "msccl_ring_allreduce_4.xml").read_text().splitlines()
    last = max(i for i, l in enumerate(lines) if 'type="r"' in l)
    return "\n".join(lines[:last] + lines[last + 1:])


@pytest.mark.parametrize("make, why", [
    (_adds_wrong_chunk, "gpu 0, tb 1, step 0 (rrs): adds chunk 1 into chunk 2"),
    (_drops_last_receive, "gpu 2 sends 6 times to gpu 3 on channel 0 but gpu 3 receives 5"),
    (lambda: _hd().replace('cnt="2" depid="1" deps="3"', 'cnt="2" depid="0" deps="3"', 1), "deadlock: "),
])
def test_cli_xml_that_fails_its_check_is_fail_exit_1(tmp_path, capsys, make, why):
    # a program that parses but does not compute its collective: FAIL (exit 1), as for JSON
    f = tmp_path / "bad.xml"
    f.write_text(make())
    assert main(["pattern", "verify", str(f)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"FAIL {f}: ") and why in out and out.count("\n") == 1
    assert main(["pattern", "import", str(f)]) == 1
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.startswith(f"FAIL {f}: ") and why in cap.err


@pytest.mark.parametrize("make, why", [
    (lambda: _hd()[:-40], "not well-formed XML"),
    (lambda: _hd().replace('nchunksperloop="4"', "", 1), "attribute 'nchunksperloop' missing"),
    (lambda: _hd().replace('type="rrc"', 'type="rrx"', 1), "unknown type 'rrx'"),
])
def test_cli_xml_that_is_not_a_pattern_is_exit_2(tmp_path, capsys, make, why):
    f = tmp_path / "bad.xml"
    f.write_text(make())
    for action in ("verify", "import"):
        assert main(["pattern", action, str(f)]) == 2
        cap = capsys.readouterr()
        assert cap.out == "" and "FAIL" not in cap.err and why in cap.err and cap.err.count("\n") == 1


def test_allgather_exports_on_output_buffer():
    root, tbs = _steps(to_msccl_xml(generate("ring-allgather", 4)))
    assert root.get("coll") == "allgather"
    gpu = root.find("gpu")
    assert (gpu.get("i_chunks"), gpu.get("o_chunks")) == ("1", "4")
    assert {s.get("srcbuf") for _, (_, st) in tbs.items() for s in st} == {"o"}
    assert from_msccl_xml(to_msccl_xml(generate("ring-allgather", 4))).collective is Collective.ALLGATHER


def _st(s, t, sb, so, db, do, cnt=1):
    return (f'<step s="{s}" type="{t}" srcbuf="{sb}" srcoff="{so}" dstbuf="{db}" dstoff="{do}" cnt="{cnt}" '
            'depid="-1" deps="-1" hasdep="0"/>')


def _two_gpus(coll, inplace, body, i_chunks=2):
    gpus = "".join(f'<gpu id="{r}" i_chunks="{i_chunks}" o_chunks="2" s_chunks="0"><tb id="0" send="{1 - r}" '
                   f'recv="{1 - r}" chan="0">{body(r, 1 - r)}</tb></gpu>' for r in range(2))
    return f'<algo name="t" nchunksperloop="2" ngpus="2" coll="{coll}" inplace="{inplace}">{gpus}</algo>'


def test_out_of_place_programs():
    # AllReduce: copy the input to the output, then halve and double on the output buffer
    x = _two_gpus("allreduce", 0, lambda r, o: _st(0, "cpy", "i", 0, "o", 0, 2) + _st(1, "s", "o", o, "o", o)
                  + _st(2, "rrc", "o", r, "o", r) + _st(3, "s", "o", r, "o", r) + _st(4, "r", "o", o, "o", o))
    p = from_msccl_xml(x)
    assert sorted((f.step, f.src, f.dst, f.chunks, f.op.value) for f in p.flows) == [
        (0, 0, 1, (1,), "reduce"), (0, 1, 0, (0,), "reduce"), (1, 0, 1, (0,), "copy"), (1, 1, 0, (1,), "copy")]
    # AllGather: the input (one cell) goes to the rank's block of the output, then both swap blocks
    x = _two_gpus("allgather", 0, lambda r, o: _st(0, "cpy", "i", 0, "o", r) + _st(1, "s", "o", r, "o", r)
                  + _st(2, "r", "o", o, "o", o), i_chunks=1)
    p = from_msccl_xml(x)
    assert p.collective is Collective.ALLGATHER and p.num_steps == 1 and p.num_flows == 2
    # forgetting the copy leaves the output empty: named
    x = _two_gpus("allgather", 0, lambda r, o: _st(0, "s", "i", 0, "o", r) + _st(1, "r", "o", o, "o", o), i_chunks=1)
    with pytest.raises(MscclError, match="gpu 0 output cell o\\[0\\] holds nothing"):
        from_msccl_xml(x)


def test_broadcast_root_inferred_without_attribute():
    import re
    p = generate("binomial-broadcast", 6, root=2)
    q = from_msccl_xml(re.sub(' root="2"', "", to_msccl_xml(p)))
    assert q.root == 2 and canonical(q) == canonical(p)


def test_ring_on_one_channel_is_the_msccl_tools_ring():
    root, tbs = _steps(to_msccl_xml(generate("ring", 4), max_channels=1))
    assert len(tbs) == 4                                   # one threadblock per GPU: send r+1, receive r-1
    for (g, _), (tb, steps) in tbs.items():
        assert (tb.get("send"), tb.get("recv")) == (str((g + 1) % 4), str((g - 1) % 4))
        assert [s.get("type") for s in steps] == ["s", "rrs", "rrs", "rrcs", "rcs", "rcs", "r"]
        assert all(s.get("depid") == "-1" for s in steps)  # one threadblock: order alone suffices
    fixture = load_msccl_xml(DATA / "msccl_ring_allreduce_4.xml")
    assert canonical(from_msccl_xml(to_msccl_xml(generate("ring", 4), max_channels=1))).num_flows == fixture.num_flows


def test_executor_limits_named():
    from reactccl.pattern.msccl_export import executor_limits
    assert executor_limits(to_msccl_xml(generate("ring", 8))) == []
    steps = "".join(f'<step s="{i}" type="s" cnt="{80 if i == 3 else 1}"/>' for i in range(300))
    tbs = "".join(f'<tb id="{i}" send="1" recv="-1" chan="0">{steps if i == 0 else ""}</tb>' for i in range(33))
    msgs = executor_limits(f'<algo><gpu id="0">{tbs}</gpu></algo>')
    assert len(msgs) == 3
    assert "gpu 0 tb 0 has 300 steps" in msgs[0] and "33 threadblocks" in msgs[1] and "step 3 moves 80" in msgs[2]


from hypothesis import assume, given, settings, strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(algo=st.sampled_from(["ring", "nccl-tree", "rabenseifner", "torus-ring"]), n=st.sampled_from([4, 5, 8, 9]),
       seed=st.integers(0, 2**31 - 1), channels=st.sampled_from([1, 2, 32]))
def test_round_trip_after_react_style_swaps(algo, n, seed, channels):
    # REACT relabels single chunk graphs; each still verifies, and the XML must carry it exactly
    assume(not (algo == "rabenseifner" and n not in (4, 8)) and not (algo == "torus-ring" and n != 9))
    p = generate(algo, n)
    rng = np.random.default_rng(seed)
    for g in np.unique(p.chunk_graph)[: 3]:
        p = p.relabel(rng.permutation(n), graph=int(g))
    verify(p)
    q = from_msccl_xml(to_msccl_xml(p, max_channels=channels))
    if channels >= len(np.unique(p.chunk_graph)):
        assert canonical(q) == canonical(p)
    else:                       # graphs share channels: graph ids lost, the same bytes between the same pairs
        assert _pair_bytes(q) == _pair_bytes(p)


def _pair_bytes(p):
    out = {}
    for s, d, f in zip(p.src.tolist(), p.dst.tolist(), p.flow_fraction.tolist()):
        out[(s, d)] = out.get((s, d), 0.0) + f
    return {k: round(v, 6) for k, v in out.items()}     # chunk sizes are multiples of 1/K >= 1e-5


def test_relay_through_scratch_becomes_copy_flows():
    # Broadcast 0 -> 1 -> 2 where gpu 1 receives into scratch, forwards from scratch, then copies it home
    x = ('<algo name="relay" nchunksperloop="1" ngpus="3" coll="broadcast" inplace="1">'
         '<gpu id="0" i_chunks="1" o_chunks="1" s_chunks="0"><tb id="0" send="1" recv="-1" chan="0">'
         + _st(0, "s", "i", 0, "s", 0) + '</tb></gpu>'
         '<gpu id="1" i_chunks="1" o_chunks="1" s_chunks="1"><tb id="0" send="2" recv="0" chan="0">'
         + _st(0, "r", "i", 0, "s", 0) + _st(1, "s", "s", 0, "i", 0) + _st(2, "cpy", "s", 0, "i", 0) + '</tb></gpu>'
         '<gpu id="2" i_chunks="1" o_chunks="1" s_chunks="0"><tb id="0" send="-1" recv="1" chan="0">'
         + _st(0, "r", "s", 0, "i", 0) + '</tb></gpu></algo>')
    p = from_msccl_xml(x)
    assert p.root == 0
    assert [(f.step, f.src, f.dst, f.op.value) for f in sorted(p.flows, key=lambda f: f.step)] == [
        (0, 0, 1, "copy"), (1, 1, 2, "copy")]
    # forgetting the copy home leaves gpu 1's output empty
    with pytest.raises(MscclError, match="gpu 1 output cell i\\[0\\] holds nothing"):
        from_msccl_xml(x.replace(_st(2, "cpy", "s", 0, "i", 0), ""))


def test_partial_sums_of_others_in_scratch_are_refused_by_name():
    # Reduce to gpu 0: it adds gpu 2's value into gpu 1's in scratch before its own: no flow says that
    x = ('<algo name="rs" nchunksperloop="1" ngpus="3" coll="reduce" inplace="1" root="0">'
         '<gpu id="0" i_chunks="1" o_chunks="1" s_chunks="2">'
         '<tb id="0" send="-1" recv="1" chan="0">' + _st(0, "r", "i", 0, "s", 0) + '</tb>'
         '<tb id="1" send="-1" recv="2" chan="0">' + _st(0, "r", "i", 0, "s", 1) + '</tb>'
         '<tb id="2" send="-1" recv="-1" chan="0">'
         '<step s="0" type="nop" depid="0" deps="0"/>'
         '<step s="1" type="re" srcbuf="s" srcoff="1" dstbuf="s" dstoff="0" cnt="1" depid="1" deps="0"/>'
         + _st(2, "re", "s", 0, "i", 0) + '</tb></gpu>'
         '<gpu id="1" i_chunks="1" o_chunks="1" s_chunks="0"><tb id="0" send="0" recv="-1" chan="0">'
         + _st(0, "s", "i", 0, "s", 0) + '</tb></gpu>'
         '<gpu id="2" i_chunks="1" o_chunks="1" s_chunks="0"><tb id="0" send="0" recv="-1" chan="0">'
         + _st(0, "s", "i", 0, "s", 1) + '</tb></gpu></algo>')
    with pytest.raises(MscclError, match="gpu 0, tb 2, step 1 \\(re\\): adds two values of chunk 0 \\(of gpus 1 and 2\\)"):
        from_msccl_xml(x)
    # adding each into its own value in turn is fine: two reduce flows into the root
    ok = x.replace('<step s="1" type="re" srcbuf="s" srcoff="1" dstbuf="s" dstoff="0" cnt="1" depid="1" deps="0"/>',
                   '<step s="1" type="re" srcbuf="s" srcoff="1" dstbuf="i" dstoff="0" cnt="1" depid="1" deps="0"/>')
    p = from_msccl_xml(ok)
    assert sorted((f.src, f.dst, f.op.value) for f in p.flows) == [(1, 0, "reduce"), (2, 0, "reduce")]
