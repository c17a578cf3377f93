"""bench/ncu_hotspots.py: Nsight Compute's source page (its csv as `ncu -i REP --page source --csv --print-source
sass` prints it) read launch by launch, the hottest instructions and runs reported, and one-line refusals."""
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import ncu_hotspots  # noqa: E402

SCRIPT = Path(ncu_hotspots.__file__)
# two launches as ncu 2025 exports them (columns cut to those read, and one it skips); the first with an empty
# trailing field, the second with a blank sample count
HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)",'
          '"Instructions Executed","stall_long_sb","stall_wait","stall_barrier","stall_long_sb (Not Issued)"')
PAGE = "\n".join([
    '"Kernel Name","attention_backward",', HEADER,
    '"0x10","      LDG.E.U16 R14, desc[UR12][R18.64]","42","30","49152","15","20","0","9"',
    '"0x20","      HADD2.F32 R24, -RZ, R24.H0_H0","2354","2300","49152","2341","7","0","2300"',
    '"0x30","      FFMA R16, R27, R24, R16","5","1","49152","0","5","0","0"',
    '"0x40","      BAR.SYNC.DEFER_BLOCKING 0x0","824","800","208896","765","0","59","700"',
    '"Kernel Name","attention_backward",', HEADER,
    '"0x10","      EXIT","","0","1,024","0","0","0","0"',
    '"0x20","      NOP","7","7","24576","0","0","7","0"',
    ""])


def test_each_launch_is_read_with_its_instructions_counts_and_issued_stall_reasons():
    found = ncu_hotspots.launches(PAGE)
    assert [(launch["kernel"], len(launch["lines"])) for launch in found] == [("attention_backward", 4),
                                                                              ("attention_backward", 2)]
    hadd = found[0]["lines"][1]
    assert hadd["source"] == "HADD2.F32 R24, -RZ, R24.H0_H0" and hadd["samples"] == 2354
    assert hadd["executed"] == 49152
    assert hadd["stalls"] == {"long_sb": 2341, "wait": 7, "barrier": 0}  # "(Not Issued)" columns left out
    assert found[1]["lines"][0]["samples"] == 0 and found[1]["lines"][0]["executed"] == 1024


def test_the_report_orders_reasons_and_keeps_the_hottest_lines_in_code_order():
    out = ncu_hotspots.report(ncu_hotspots.launches(PAGE)[0], top=2, window=2)
    assert out[0] == "attention_backward: 3225 stall samples, 356352 warp instructions executed"
    assert out[1] == "reasons: long_sb 3121, barrier 59, wait 32"
    hot = out[3:5]
    assert hot[0].split()[:3] == ["1", "2354", "73.0%"] and hot[0].endswith("long_sb 2341 wait 7")
    assert hot[1].split()[:3] == ["3", "824", "25.6%"] and "BAR.SYNC.DEFER_BLOCKING 0x0" in hot[1]
    runs = out[out.index("runs of 2 instructions with the most samples (first index, samples, share):") + 1:]
    assert [r.split() for r in runs] == [["0", "2396", "74.3%"], ["2", "829", "25.7%"]]


def test_the_command_line_reports_a_launch_and_refuses_in_one_line(tmp_path):
    page = tmp_path / "attention_backward.csv"
    page.write_text(PAGE)
    run = subprocess.run([sys.executable, str(SCRIPT), str(page), "--launch", "1", "--top", "1"],
                         capture_output=True, text=True, check=True)
    assert run.stdout.splitlines()[0] == "attention_backward: 7 stall samples, 25600 warp instructions executed"
    for args, says in [([str(page), "--launch", "2"], "--launch 2 is not one of its launches 0..1"),
                       ([str(SCRIPT)], 'holds no "Kernel Name" row: export the source page with'),
                       ([str(tmp_path / "missing.csv")], "cannot read it")]:
        bad = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)
        assert bad.returncode == 2 and bad.stdout == ""
        assert len(bad.stderr.splitlines()) == 1 and says in bad.stderr, bad.stderr
