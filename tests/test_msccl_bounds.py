"""MSCCL-XML import: bounded before its loops (the header alone, then the counted program),
its memory estimate honest (tracemalloc), its integers strict, its echoed values short."""

import functools
import time
import tracemalloc

import pytest

from reactccl.algorithms import generate
from reactccl.cli.main import main
from reactccl.pattern import msccl_import
from reactccl.pattern.msccl_bounds import MAX_RACE_WORK, PASS_CELLS, check_race_work, import_bytes
from reactccl.pattern.msccl_common import MSCCL_TO_COLL, MscclError
from reactccl.pattern.msccl_export import to_msccl_xml
from reactccl.pattern.msccl_import import from_msccl_xml

TINY = '<algo ngpus="1000000000" nchunksperloop="1000000000" coll="allreduce"></algo>\n'


def _refused_fast(text, match, seconds=1.0, mbytes=50):
    tracemalloc.start()
    t = time.perf_counter()
    try:
        with pytest.raises(MscclError, match=match) as e:
            from_msccl_xml(text)
    finally:
        took = time.perf_counter() - t
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert took < seconds and peak < mbytes << 20, (took, peak)
    return str(e.value)


def test_the_78_byte_program_is_refused_at_once():
    assert len(TINY) == 78
    _refused_fast(TINY, "nchunksperloop 1000000000 is above 65536")


@pytest.mark.parametrize("header, words", [
    ('ngpus="1000" nchunksperloop="10000" coll="allreduce"', r"1000 gpus x 10000 chunks needs about 162\.\d\d GiB "
                                                             r"\(limit 4\.00 GiB\)"),
    ('ngpus="1000000000" nchunksperloop="1" coll="allreduce"', r"1000000000 gpus x 1 chunks needs about"),
    ('ngpus="1000000000" nchunksperloop="1" coll="broadcast" root="0"', r"1000000000 gpus x 1 chunks needs about"),
    ('ngpus="100000" nchunksperloop="1" coll="reduce" root="3"', r"100000 gpus x 1 chunks needs about"),
    ('ngpus="2147483647" nchunksperloop="65536" coll="reduce_scatter"', "not a multiple of ngpus"),
])
def test_headers_that_ask_for_too_much_are_refused_before_any_gpu_is_read(header, words):
    # the <gpu> below is never reached: the header alone is over the limit
    _refused_fast(f'<algo {header}><gpu id="0" i_chunks="1"/></algo>', words)


def _one_step(cnt, steps=1, tbs=1):
    """Two GPUs: GPU 0 sends ``steps`` times ``cnt`` cells to GPU 1, which receives them; GPU 0
    also has ``tbs - 1`` idle threadblocks."""
    sends = "".join(f'<step s="{i}" type="s" srcbuf="i" srcoff="0" cnt="{cnt}"/>' for i in range(steps))
    recvs = "".join(f'<step s="{i}" type="r" dstbuf="s" dstoff="0" cnt="{cnt}"/>' for i in range(steps))
    idle = "".join(f'<tb id="{t}" send="-1" recv="-1" chan="0"/>' for t in range(1, tbs))
    return (f'<algo ngpus="2" nchunksperloop="2" coll="allreduce"><gpu id="0" i_chunks="{cnt}">'
            f'<tb id="0" send="1" recv="-1" chan="0">{sends}</tb>{idle}</gpu>'
            f'<gpu id="1" i_chunks="2" s_chunks="{cnt}"><tb id="0" send="-1" recv="0" chan="0">{recvs}</tb>'
            '</gpu></algo>')


def test_steps_that_move_too_many_cells_are_refused_before_the_symbolic_run(monkeypatch):
    ran = []
    monkeypatch.setattr(msccl_import, "_order", lambda *a: ran.append(a))
    msg = _refused_fast(_one_step(cnt=2_000_000_000),
                        r"2 gpus x 2 chunks \(2 steps moving 4000000000 cells\) needs about")
    assert "GiB (limit 4.00 GiB)" in msg and not ran


def test_a_race_check_over_its_budget_is_refused_before_it_runs(monkeypatch):
    # 300 steps on each GPU (602 levels with the receives) and 20,000 threadblocks on GPU 0: the check would update
    # (steps + edges) x 20,001 clock cells; with the budget cut to 10^7 that is refused
    monkeypatch.setattr(msccl_import, "check_race_work", functools.partial(check_race_work, max_work=10_000_000))
    _refused_fast(_one_step(cnt=1, steps=300, tbs=20_000), r"race check would update \d+ clock cells in 602 level "
                  r"passes .*limit 1\.00e\+07", seconds=10, mbytes=400)
    assert MAX_RACE_WORK >= 1000 * PASS_CELLS


@pytest.mark.parametrize("algo, n", [("ring", 32), ("recursive-doubling", 32), ("nccl-tree", 64),
                                     ("rabenseifner", 32), ("ring-allgather", 32), ("ring-reducescatter", 16),
                                     ("binomial-broadcast", 16), ("bucket", 16)])
def test_the_estimate_bounds_the_measured_peak(algo, n, monkeypatch):
    counts = {}
    check = msccl_import.check_import_size

    def spy(n, k, coll, **kw):
        if kw:
            counts.update(kw, head=(n, k, coll))
        return check(n, k, coll, **kw)

    monkeypatch.setattr(msccl_import, "check_import_size", spy)
    text = to_msccl_xml(generate(algo, n))
    tracemalloc.start()
    from_msccl_xml(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    est = import_bytes(*counts.pop("head"), **counts)
    assert peak <= est <= 4.5 * peak + (1 << 20), (peak, est)


def test_a_big_program_with_few_cells_is_still_accepted():
    p = from_msccl_xml(to_msccl_xml(generate("ring", 48)))
    assert p.num_ranks == 48 and p.collective.value == "allreduce"


@pytest.mark.parametrize("value", ["٢", "+2", " 2_0 ", "2 ", "0x2", "2.0", "", "²"])
def test_integers_are_ascii_digits_only(value):
    text = f'<algo ngpus="{value}" nchunksperloop="2" coll="allreduce"></algo>'
    with pytest.raises(MscclError, match=r"algo: attribute ngpus=.* is not an integer \(ASCII digits"):
        from_msccl_xml(text)


def test_an_over_long_integer_names_its_attribute_and_is_not_echoed():
    for attr in ("ngpus", "nchunksperloop"):
        other = "nchunksperloop" if attr == "ngpus" else "ngpus"
        text = f'<algo {attr}="{"9" * 5000}" {other}="2" coll="allreduce"></algo>'
        with pytest.raises(MscclError, match=f"algo: attribute {attr} has 5000 digits, out of range") as e:
            from_msccl_xml(text)
        assert len(str(e.value)) < 120


def test_a_huge_attribute_is_echoed_as_a_short_excerpt(tmp_path, capsys):
    f = tmp_path / "huge.xml"
    f.write_text('<algo ngpus="2" nchunksperloop="2" coll="' + "x" * 1_000_000 + '"></algo>')
    assert main(["pattern", "verify", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 300 and "... (1000002 chars)" in err, err[:300]


def test_negative_and_out_of_range_ids_are_named():
    bad = ('<algo ngpus="2" nchunksperloop="2" coll="allreduce">'
           '<gpu id="0"><tb id="-3" send="1" recv="-1"/></gpu></algo>')
    with pytest.raises(MscclError, match=r"gpu 0, tb: attribute id=-3 is out of range 0\.\.2147483647"):
        from_msccl_xml(bad)
    with pytest.raises(MscclError, match=r"algo: attribute inplace=2 is out of range 0\.\.1"):
        from_msccl_xml('<algo ngpus="2" nchunksperloop="2" coll="allreduce" inplace="2"></algo>')


def test_collectives_known_to_the_bounds():
    # every collective the importer reads has a cell count in the estimate
    for coll in MSCCL_TO_COLL.values():
        assert import_bytes(4, 8, coll) > 0


def _child_react_allreduce_reads_the_bounded_loader(rank, world, path):
    from reactccl.torch import ReactAllReduce
    t = time.perf_counter()
    try:
        ReactAllReduce(pattern=path, react=False)
        return ("no error", 0.0)
    except MscclError as e:
        return (str(e), time.perf_counter() - t)


@pytest.mark.torch
def test_react_allreduce_refuses_the_78_byte_program_at_once(tmp_path):
    pytest.importorskip("torch")
    from reactccl.runtime.local import run_local
    f = tmp_path / "tiny.xml"
    f.write_text(TINY)
    for msg, took in run_local(_child_react_allreduce_reads_the_bounded_loader, 2, str(f), timeout=120):
        assert "nchunksperloop 1000000000 is above 65536" in msg and took < 1, (msg, took)
