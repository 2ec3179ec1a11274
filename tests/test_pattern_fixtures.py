"""Hand-written pattern files in tests/data: what a user would type, checked end to end."""

from pathlib import Path

import pytest

from reactccl.cli.main import main
from reactccl.pattern import VerificationError, load, verify

DATA = Path(__file__).parent / "data"


def test_hand_written_chain_verifies():
    p = load(DATA / "chain3_allreduce.json")
    r = verify(p)
    assert (r.num_ranks, r.num_chunks, r.num_flows, r.num_steps) == (3, 2, 4, 4)
    ptr, idx = p.dependencies()
    assert [idx[ptr[i]:ptr[i + 1]].tolist() for i in range(4)] == [[], [0], [1], [0, 2]]


def test_reduce_back_instead_of_copy_counts_twice():
    # step 2 adds rank 2's full sum into rank 1, which already holds ranks 0 and 1: both counted twice
    with pytest.raises(VerificationError, match="rank 0, chunk 0: contribution of rank 0 counted twice") as e:
        verify(load(DATA / "chain3_double_count.json"))
    assert e.value.step == 2
    assert "flow 2 (2->1) reduced chunk 0 into rank 1" in str(e.value)


def test_cli_verify_exit_codes(capsys):
    assert main(["pattern", "verify", str(DATA / "chain3_allreduce.json")]) == 0
    assert main(["pattern", "verify", str(DATA / "chain3_double_count.json")]) == 1
    out = capsys.readouterr().out
    assert "OK" in out and "FAIL" in out and "counted twice" in out
