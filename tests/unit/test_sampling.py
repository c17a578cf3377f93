"""The sampling arithmetic (docs/formats.md, Sampling) is one definition in two languages: the C
sampler (coppelius/host/sample.c, run as a real program: tests/unit/host_sample_driver.c) draws the
same ids as coppelius/formats/sampling.py from the same rows, options and seeds, and its exp64 has
the same bits; the Python side is held to the arithmetic it defines (greedy ties, top-k, the
generator's known outputs, exp64 against math.exp)."""
import math
import random
import subprocess
from pathlib import Path

import numpy as np
import pytest

from coppelius.errors import CoppeliusError
from coppelius.formats.elf import host_machine
from coppelius.formats.sampling import Generator, exp64, sample
from coppelius.host.build import HOST_DIR, compile_program


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    out = tmp_path_factory.mktemp("sample") / "driver"
    compile_program(host_machine(), [HOST_DIR / "sample.c", Path(__file__).with_name("host_sample_driver.c")], out,
                    include_dirs=[HOST_DIR])
    return str(out)


def f16_row(rng: random.Random, vocab: int, spread: float) -> list[float]:
    """Logits as the device gives them: f16 values (with repeats, so that ties happen), as binary64."""
    row = np.array([rng.gauss(0.0, spread) for _ in range(vocab)], np.float16)
    row[rng.randrange(vocab)] = row.max()  # a tie at the top
    return row.astype(np.float64).tolist()


def test_splitmix64_gives_its_published_outputs():
    g = Generator(1234567)  # the reference outputs of Vigna's splitmix64.c for this seed
    assert [g.next() for _ in range(3)] == [6457827717110365317, 3203168211198807973, 9817491932198370423]
    u = Generator(0).uniform()
    assert 0.0 <= u < 1.0 and u * 2**24 == int(u * 2**24)


def test_exp64_is_within_two_ulps_of_libm_and_zero_below_the_cutoff():
    for x in np.linspace(-700.0, 0.0, 20001).tolist() + [-1e-300, -0.5 * math.log(2), -709.0]:
        want = math.exp(x) if x >= -700.0 else 0.0
        assert abs(exp64(x) - want) <= 2 * math.ulp(want), x
    assert exp64(0.0) == 1.0 and exp64(-700.5) == 0.0


def test_greedy_takes_the_lowest_id_among_equal_largest_and_draws_nothing():
    g = Generator(5)
    assert sample([1.0, 3.0, -2.0, 3.0], 0.0, 4, g) == 1 and g.state == 5


def test_top_1_is_greedy_and_top_k_never_leaves_the_k_largest():
    rng = random.Random(3)
    for _ in range(50):
        row = f16_row(rng, 40, 2.0)
        allowed = sorted(range(40), key=lambda i: (-row[i], i))[:5]
        assert sample(row, 1.0, 1, Generator(9)) == sample(row, 0.0, 40, Generator(9))
        assert sample(row, 1.3, 5, Generator(rng.randrange(1 << 64))) in allowed


def test_a_row_that_is_not_finite_is_refused_in_one_line():
    with pytest.raises(CoppeliusError, match=r"^sampling: the logits row holds a value that is not finite$"):
        sample([0.0, float("inf")], 1.0, 2, Generator(1))


def test_the_c_sampler_draws_the_same_ids_and_exp64_bits_as_python(driver):
    rng = random.Random(2026)
    cases, lines = [], []
    for vocab, temperature, spread in [(256, 1.0, 3.0), (256, 0.8, 1.0), (50, 0.05, 4.0), (300, 2.5, 0.5),
                                       (7, 1e-3, 1.0), (256, 0.0, 2.0), (3, 1.0, 30.0)] * 6:
        row, top_k, seed = f16_row(rng, vocab, spread), rng.choice([1, 2, 5, vocab]), rng.randrange(1 << 64)
        g = Generator(seed)
        cases.append([sample(row, temperature, top_k, g) for _ in range(20)])
        lines.append(f"{vocab} {temperature.hex()} {top_k} {seed} 20 " + " ".join(v.hex() for v in row))
    xs = [-rng.uniform(0.0, 720.0) for _ in range(3000)] + [-rng.uniform(0.0, 1.0) for _ in range(1000)]
    lines += [f"exp {x.hex()}" for x in xs]
    out = subprocess.run([driver], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True).stdout
    got = out.splitlines()
    assert [[int(i) for i in line.split()] for line in got[:len(cases)]] == cases
    assert got[len(cases):] == [np.float64(exp64(x)).view(np.uint64).item().to_bytes(8, "big").hex() for x in xs]
