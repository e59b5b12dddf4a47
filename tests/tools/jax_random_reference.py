#!/usr/bin/env python3
"""An independent NumPy implementation of JAX's threefry2x32 random numbers, configured as
JAX's default since 0.5 (jax_threefry_partitionable=True, jax_enable_x64=False), that writes
the expected values kiln::random is tested against (tests/random/expected_random.txt).

Written from the derivations in jax/_src/random (threefry2x32.py, prng.py, core.py) and the
Threefry specification (Salmon et al., SC'11), in plain NumPy uint32/uint64 arithmetic. It
shares no code with kiln. Transcendental functions (erf, erf_inv, log) are evaluated in
80-digit decimal arithmetic and rounded once to the sampled dtype (16-bit dtypes through
float32, as XLA computes them), so they are the correctly rounded values; JAX itself uses
polynomial approximations there, a few ulps away (see docs/random.md).

Self-checks run first: the Random123 known-answer vectors; the values JAX's own tests
(tests/random_test.py) publish for the parts that do not depend on jax_threefry_partitionable
(fold_in, and through a small "original" mode of this file the hash-to-bits and bits-to-float
steps); and the partitionable outputs that JAX's doctested documentation prints (jax/random.py,
docs/jep/9263-typed-keys.md, the jnp.floor/jnp.round, jnp.cov and jnp.corrcoef examples).

Usage:
  /usr/bin/python3 tests/tools/jax_random_reference.py > tests/random/expected_random.txt
  /usr/bin/python3 tests/tools/jax_random_reference.py --check tests/random/expected_random.txt
(--check exits 1, naming the first difference, unless the file is exactly what this writes;
the CTest test random_fixture_is_current runs it.)

Fixture format, one record per line ('#' starts a comment):
  <op> <key path> <dtype> <shape> <params> = <values>
key path: seed=<n> followed by /s<n>:<i> (row i of split(key, n)) and /f<d> (fold_in(key, d)).
params: comma-separated name=value (or '-'); arrays (logits, p) as ';'-separated hex bit
patterns of their dtype; values: integers in decimal, floats as the hex bit pattern of their
dtype, or 'fnv1a=<hex>' (FNV-1a 64 of the result's little-endian bytes).
"""
import difflib
import math
import sys
import zlib
from decimal import Decimal, getcontext

import numpy as np

getcontext().prec = 80

U32 = np.uint32
MASK32 = 0xFFFFFFFF

# ----- Threefry-2x32, 20 rounds ---------------------------------------------------------

ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
PARITY = 0x1BD11BDA  # Skein's key-schedule constant


def rotl(v, r):
    return ((v << U32(r)) | (v >> U32(32 - r))).astype(U32)


def threefry2x32(k0, k1, x0, x1):
    """Random123's threefry2x32_20 on broadcast uint32 arrays."""
    with np.errstate(over="ignore"):
        k0, k1, x0, x1 = np.broadcast_arrays(*(np.asarray(a, dtype=U32) for a in (k0, k1, x0, x1)))
        ks = (k0, k1, (k0 ^ k1 ^ U32(PARITY)).astype(U32))
        x0 = (x0 + ks[0]).astype(U32)
        x1 = (x1 + ks[1]).astype(U32)
        for r in range(20):
            x0 = (x0 + x1).astype(U32)
            x1 = rotl(x1, ROTATIONS[r % 8])
            x1 = (x1 ^ x0).astype(U32)
            if r % 4 == 3:
                s = r // 4 + 1  # key injection number
                x0 = (x0 + ks[s % 3]).astype(U32)
                x1 = (x1 + ks[(s + 1) % 3] + U32(s)).astype(U32)
    return x0, x1


# ----- keys and bits (partitionable) -----------------------------------------------------


def seed_key(seed):
    seed &= (1 << 64) - 1
    return np.array([seed >> 32, seed & MASK32], dtype=U32)


def hashed_counts(key, shape):
    """threefry2x32 over iota_2x32_shape(shape): the row-major index as (high, low)."""
    index = np.arange(math.prod(shape), dtype=np.uint64).reshape(shape)
    high = (index >> np.uint64(32)).astype(U32)
    low = (index & np.uint64(MASK32)).astype(U32)
    return threefry2x32(key[0], key[1], high, low)


def split(key, n):
    a, b = hashed_counts(key, (n,))
    return np.stack([a, b], axis=1)


def fold_in(key, data):
    a, b = threefry2x32(key[0], key[1], U32(0), U32(data))
    return np.array([a, b], dtype=U32)


def bits32(key, shape):
    a, b = hashed_counts(key, shape)
    return (a ^ b).astype(U32)


def bits64(key, shape):
    a, b = hashed_counts(key, shape)
    return (a.astype(np.uint64) << np.uint64(32)) | b.astype(np.uint64)


# ----- dtypes: rounding and arithmetic one op at a time ----------------------------------


def bf16_round(x32):
    """float32 array -> float32 values rounded to bfloat16 (nearest, ties to even)."""
    u = np.asarray(x32, dtype=np.float32).view(U32).astype(np.uint64)
    nan = np.isnan(np.asarray(x32, dtype=np.float32))
    rounded = ((u + np.uint64(0x7FFF) + ((u >> np.uint64(16)) & np.uint64(1))) &
               np.uint64(0xFFFF0000)).astype(U32)
    rounded = np.where(nan, U32(0x7FC00000), rounded)
    return rounded.view(np.float32)


class Kind:
    """A float dtype: numpy storage plus rounding (bf16 lives in float32 storage)."""

    def __init__(self, name):
        self.name = name
        self.storage = {"f16": np.float16, "bf16": np.float32, "f32": np.float32,
                        "f64": np.float64}[name]
        self.nmant = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}[name]
        self.tiny = {"f16": 2.0**-14, "bf16": 2.0**-126, "f32": 2.0**-126,
                     "f64": 2.0**-1022}[name]

    def round(self, x):
        """Values (any float array) rounded to this dtype, in its storage."""
        if self.name == "bf16":
            return bf16_round(np.asarray(x, dtype=np.float64).astype(np.float32))
        if self.name == "f16":
            # Through float32 first, as XLA computes f16 math in f32.
            return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float16)
        return np.asarray(x).astype(self.storage)

    def const(self, value):
        """A Python number converted to this dtype directly (one rounding), like
        np.array(value, dtype)."""
        value = np.float64(value)
        if self.name == "f16":
            return np.float16(value)
        if self.name == "bf16":
            # Round to odd into float32 first: then rounding to bf16 equals rounding the
            # double directly.
            f = np.float32(value)
            if np.isfinite(value) and np.float64(f) != value:
                if abs(np.float64(f)) > abs(value):
                    f = np.nextafter(f, np.float32(0))
                f = np.array([f], np.float32).view(U32) | U32(1)
                f = f.view(np.float32)[0]
            return bf16_round(np.float32(f))[()]
        return self.storage(value)

    # Elementwise ops with one rounding each (numpy's f16 ops compute in f32 and round,
    # which is the correctly rounded result for + - * /; bf16 does the same by hand).
    def add(self, a, b):
        return self.round(a.astype(np.float64) + b.astype(np.float64))

    def sub(self, a, b):
        return self.round(a.astype(np.float64) - b.astype(np.float64))

    def mul(self, a, b):
        return self.round(a.astype(np.float64) * b.astype(np.float64))

    def div(self, a, b):
        return self.round(np.asarray(a, np.float64) / np.asarray(b, np.float64))

    def bits(self, x):
        """Bit patterns as Python ints (16-bit dtypes: their 16-bit pattern)."""
        x = np.asarray(x, dtype=self.storage).ravel()
        if self.name == "bf16":
            return [int(v) >> 16 for v in x.view(U32)]
        view = {"f16": np.uint16, "f32": U32, "f64": np.uint64}[self.name]
        return [int(v) for v in x.view(view)]

    def next_after(self, value, toward):
        """numpy.nextafter in this dtype (bf16 by stepping its 16-bit pattern)."""
        if self.name != "bf16":
            return self.storage(np.nextafter(self.storage(value), self.storage(toward)))
        v = float(value)
        if v == toward:
            return np.float32(v)
        pattern = int(np.float32(v).view(U32)) >> 16
        if v == 0:
            pattern = 1 | (0x8000 if toward < 0 else 0)
        elif (v < toward) == (v > 0):
            pattern += 1
        else:
            pattern -= 1
        return np.array([pattern << 16], dtype=U32).view(np.float32)[0]


# ----- correctly rounded transcendental functions (decimal) -----------------------------


def dec_pi():
    """pi by Machin's formula, 16 / 5-atan-series style."""
    getcontext().prec += 10

    def arctan_inv(n):
        x = Decimal(1) / n
        x2 = x * x
        total, term, k = x, x, 1
        while True:
            term = -term * x2
            new = total + term / (2 * k + 1)
            if new == total:
                return total
            total, k = new, k + 1

    pi = 16 * arctan_inv(5) - 4 * arctan_inv(239)
    getcontext().prec -= 10
    return +pi


PI = dec_pi()
TWO_OVER_SQRT_PI = 2 / PI.sqrt()


def dec_erf(x):
    """erf by its Maclaurin series (|x| <= 7 needs ~200 terms at 80 digits)."""
    x = Decimal(x)
    if x.is_nan():
        return x
    if x.is_infinite():
        return Decimal(1).copy_sign(x)
    if abs(x) > 9:
        return Decimal(1).copy_sign(x)  # erfc(9) < 1e-36, below every dtype's resolution
    getcontext().prec += 40  # the alternating series cancels ~e^(x^2)
    x2 = x * x
    term, total, n = x, x, 0
    while True:
        n += 1
        term = -term * x2 / n
        add = term / (2 * n + 1)
        total += add
        if abs(add) < Decimal(10) ** -(getcontext().prec + 2):
            break
    result = TWO_OVER_SQRT_PI * total
    getcontext().prec -= 40
    return +result


def dec_erf_inv(u):
    u = float(u)
    if math.isnan(u) or abs(u) > 1:
        return Decimal("NaN")
    if abs(u) == 1:
        return Decimal("Infinity").copy_sign(Decimal(u))
    if u == 0:
        return Decimal(u)
    target = Decimal(u)
    # A float64 start by bisection on math.erf/erfc, then Newton in decimal.
    a = abs(u)
    lo, hi = 0.0, 10.0
    for _ in range(200):
        mid = (lo + hi) / 2
        below = math.erfc(mid) > 1 - a if a > 0.5 else math.erf(mid) < a
        lo, hi = (mid, hi) if below else (lo, mid)
    y = Decimal((lo + hi) / 2).copy_sign(target)
    if a < 1e-6:
        y = target * PI.sqrt() / 2
    for _ in range(6):
        slope = TWO_OVER_SQRT_PI * (-(y * y)).exp()
        y -= (dec_erf(y) - target) / slope
    return y


def dec_log(x):
    return Decimal(float(x)).ln() if x > 0 else None


def round_decimal(kind, d):
    """A decimal rounded once to float32 or float64 (or, for 16-bit dtypes, to float32 and
    then to the dtype, as XLA computes them in f32)."""
    if d.is_nan():
        return kind.const(np.nan)
    if d.is_infinite():
        return kind.const(float(d))
    if kind.name == "f64":
        return np.float64(float(d))  # Python rounds Decimal -> float correctly
    # Correctly rounded float32: pick the nearer of the neighbours of the double rounding.
    f = np.float32(float(d))
    best = f
    for c in (np.nextafter(f, np.float32(-np.inf)), np.nextafter(f, np.float32(np.inf))):
        if abs(Decimal(float(c)) - d) < abs(Decimal(float(best)) - d):
            best = c
    return kind.round(np.float64(best))


def apply_exact(kind, fn, x):
    """fn (decimal in, decimal out) on each element, rounded once to the dtype."""
    flat = np.asarray(x).ravel()
    out = [round_decimal(kind, fn(Decimal(float(v)))) for v in flat]
    return np.array(out, dtype=kind.storage).reshape(np.shape(x))


# ----- samplers (jax.random with jax_threefry_partitionable=True) ------------------------


def unit_floats(key, shape, kind, original=False):
    """JAX's _uniform before scaling: mantissa bits of one draw, as a float in [1, 2), - 1."""
    if kind.name == "f64":
        words = original_bits(key, 64, shape) if original else bits64(key, shape)
        floats = ((words >> np.uint64(12)) | np.uint64(0x3FF0000000000000)).view(np.float64)
    elif kind.name == "f32":
        words = original_bits(key, 32, shape) if original else bits32(key, shape)
        floats = ((words >> U32(9)) | U32(0x3F800000)).view(np.float32)
    else:
        # _uniform draws max(8, ...) bits when nmant < 8: bf16 (nmant 7) takes the low byte
        # of the 32-bit draw, f16 the low 16 bits; the top nmant of them become the mantissa
        # on top of 1.0's 16-bit pattern.
        drawn = 8 if kind.nmant < 8 else 16
        low = (bits32(key, shape) & U32((1 << drawn) - 1)).astype(np.uint16)
        mantissa = low >> np.uint16(drawn - kind.nmant)
        if kind.name == "f16":
            floats = (mantissa | np.uint16(0x3C00)).view(np.float16)
        else:
            pattern = mantissa | np.uint16(0x3F80)
            floats = (pattern.astype(U32) << U32(16)).view(np.float32)
    return kind.sub(floats, kind.const(1.0))


def uniform(key, shape, kind, minval=0.0, maxval=1.0, original=False):
    lo, hi = kind.const(minval), kind.const(maxval)
    return uniform_between(unit_floats(key, shape, kind, original), kind, lo, hi)


def uniform_between(floats, kind, lo, hi):
    scaled = kind.add(kind.mul(floats, kind.sub(hi, lo)), lo)
    return np.maximum(lo, scaled).astype(kind.storage)


def normal(key, shape, kind):
    lo = kind.next_after(-1.0, 0.0)
    u = uniform_between(unit_floats(key, shape, kind), kind, lo, kind.const(1.0))
    return kind.mul(kind.const(math.sqrt(2)), apply_exact(kind, dec_erf_inv, u))


def truncated_normal(key, lower, upper, shape, kind):
    sqrt2 = kind.const(math.sqrt(2))
    lower, upper = kind.const(lower), kind.const(upper)
    a = apply_exact(kind, dec_erf, kind.div(lower, sqrt2))
    b = apply_exact(kind, dec_erf, kind.div(upper, sqrt2))
    u = uniform_between(unit_floats(key, shape, kind), kind, a, b)
    out = kind.mul(sqrt2, apply_exact(kind, dec_erf_inv, u))
    return np.minimum(kind.next_after(upper, -np.inf),
                      np.maximum(kind.next_after(lower, np.inf), out)).astype(kind.storage)


def bernoulli(key, p, shape):
    f32 = Kind("f32")
    return uniform(key, shape, f32) < np.float32(p)


def bernoulli_array(key, p, shape, kind):
    """Per-element probabilities p (of dtype kind, broadcast to shape): uniform in p's dtype."""
    return uniform(key, shape, kind) < p


def categorical(key, logits, axis, kind):
    u = uniform(key, logits.shape, kind, kind.tiny, 1.0)
    ln = lambda x: apply_exact(kind, lambda d: d.ln(), x)
    gumbel = -ln(-ln(u))
    scores = kind.add(gumbel, logits)
    # Near-ties would make the result depend on the last bit of log: keep fixtures clear.
    if scores.shape[axis] > 1:
        top2 = np.sort(scores.astype(np.float64), axis=axis)
        best = np.take(top2, -1, axis=axis)
        gap = best - np.take(top2, -2, axis=axis)
        assert np.all(gap > 1e-3 * np.maximum(1, np.abs(best))), "near tie"
    return np.argmax(scores, axis=axis).astype(np.int32)


def shuffle(key, x, axis):
    rounds = int(np.ceil(3 * np.log(max(1, x.size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        keys = split(key, 2)
        key, sub = keys[0], keys[1]
        sort_keys = bits32(sub, x.shape)
        order = np.argsort(sort_keys, axis=axis, kind="stable")
        x = np.take_along_axis(x, order, axis=axis)
    return x


def permutation(key, n):
    return shuffle(key, np.arange(n, dtype=np.int32), 0)


def permutation_of(key, x, axis):
    if x.ndim == 1:
        return shuffle(key, x, axis)
    order = shuffle(key, np.arange(x.shape[axis], dtype=np.int32), 0)
    return np.take(x, order, axis=axis)


def randint(key, shape, minval, maxval, dtype):
    """jax.random.randint: two 32-bit draws from the halves of a split key, combined modulo
    the span in wrapping u32 arithmetic; u8 samples as i32 with its bounds clipped."""
    sampled = "i32" if dtype == "u8" else dtype
    if dtype == "u8":
        minval, maxval = min(max(minval, 0), 255), min(max(maxval, 0), 256)
    lowest, highest = (-(1 << 31), (1 << 31) - 1) if sampled == "i32" else (0, MASK32)
    out_of_range = maxval > highest
    lo, hi = min(max(minval, lowest), highest), min(max(maxval, lowest), highest)
    span = (hi - lo) & MASK32
    if hi <= lo:
        span = 1
    if out_of_range and hi > lo:
        span = (span + 1) & MASK32
    keys = split(key, 2)
    higher = [int(v) for v in bits32(keys[0], shape).ravel()]
    lower = [int(v) for v in bits32(keys[1], shape).ravel()]
    if span == 0:
        offsets = lower
    else:
        # 2^32 mod span as JAX computes it: (2^16 mod span)^2 in u32, which wraps to 0
        # once span > 2^16, and then mod span.
        multiplier = (1 << 16) % span
        multiplier = ((multiplier * multiplier) & MASK32) % span
        offsets = [((((h % span) * multiplier) & MASK32) + (l % span)) & MASK32 for h, l in
                   zip(higher, lower)]
        offsets = [o % span for o in offsets]
    values = [(lo + o) & MASK32 for o in offsets]
    if sampled == "i32":
        values = [v - (1 << 32) if v >= (1 << 31) else v for v in values]
    out = np.array(values, dtype=np.int64).reshape(shape)
    return out.astype({"i32": np.int32, "u32": np.uint32, "u8": np.uint8}[dtype])


# ----- self-checks against published values ----------------------------------------------


def original_threefry_2x32(key, counts):
    """JAX's threefry_2x32 wrapper (non-partitionable): split the flat counts in halves."""
    flat = np.asarray(counts, dtype=U32).ravel()
    odd = flat.size % 2
    if odd:
        flat = np.concatenate([flat, np.zeros(1, U32)])
    half = flat.size // 2
    a, b = threefry2x32(key[0], key[1], flat[:half], flat[half:])
    out = np.concatenate([a, b])
    return (out[:-1] if odd else out).reshape(np.shape(counts))


def original_bits(key, width, shape):
    size = math.prod(shape)
    count = -(-width * size // 32)
    words = original_threefry_2x32(key, np.arange(count, dtype=U32))
    if width == 64:
        high, low = np.split(words, 2)
        return ((high.astype(np.uint64) << np.uint64(32)) | low.astype(np.uint64)).reshape(shape)
    if width == 32:
        return words.reshape(shape)
    per_word = 32 // width
    parts = [(words >> U32(width * i)) & U32((1 << width) - 1) for i in range(per_word)]
    return np.stack(parts, axis=1).ravel()[:size].reshape(shape)


def self_check():
    kats = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
            ((MASK32, MASK32), (MASK32, MASK32), (0x1CB996FC, 0xBB002BE7)),
            ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]
    for key, ctr, expected in kats:
        got = threefry2x32(U32(key[0]), U32(key[1]), U32(ctr[0]), U32(ctr[1]))
        assert tuple(int(v) for v in got) == expected, (key, ctr, got)
    # jax tests/random_test.py testPRNGValues: fold_in is the same in both configurations.
    assert list(fold_in(seed_key(0), 4)) == [2285895361, 433833334]
    # ...and split(key, n)[i] == fold_in(key, i) under partitionable (JAX's symmetry test).
    assert list(split(seed_key(0), 5)[4]) == [2285895361, 433833334]
    # testRngRandomBits and _RANDOM_VALUES_CASES (jax_threefry_partitionable=False): they
    # check the hash, the seed and the bits-to-float derivation this file shares.
    key = seed_key(1701)
    assert list(original_bits(key, 32, (3,))) == [56197195, 4200222568, 961309823]
    assert list(original_bits(key, 8, (3,))) == [216, 115, 43]
    assert list(original_bits(key, 64, (3,))) == [3982329540505020460, 16822122385914693683,
                                                  7882654074788531506]
    key = seed_key(zlib.adler32(b"bitsthreefry2x32"))
    assert list(original_bits(key, 32, (5,))) == [1978747883, 4134381225, 3628107870, 689687174,
                                                  2788938207]
    assert list(original_bits(key, 8, (5,))) == [10, 158, 82, 54, 158]
    key = seed_key(zlib.adler32(b"uniformthreefry2x32"))
    published = [0.298671, 0.073213, 0.873356, 0.260549, 0.412797]
    got = uniform(key, (5,), Kind("f32"), original=True)
    assert np.allclose(got, published, atol=1e-6), got
    # Partitionable outputs printed by JAX's doctested documentation. jax/random.py and
    # docs/jep/9263-typed-keys.md: uniform(key(0)), uniform(key(0), (3,)), and uniform of
    # the second key of split(key(0)) (printed to numpy's 8 significant digits).
    f32 = Kind("f32")
    key = seed_key(0)
    assert f32.bits(uniform(key, (), f32)) == f32.bits(np.float32(0.947667))
    assert f32.bits(uniform(key, (3,), f32)[:2]) == f32.bits(np.float32([0.947667, 0.9785799]))
    assert abs(uniform(key, (3,), f32)[2] - 0.33229148) < 1e-8
    assert abs(uniform(split(key, 2)[1], (), f32) - 0.00729382) < 1e-8
    # jnp.floor and jnp.round examples: uniform(key(42), (3, 3), minval, maxval) printed to
    # two decimals; jnp.cov and jnp.corrcoef: normal(key(0), (3, 100)), likewise.
    for lo, hi, printed in [(-5, 5, [[-0.11, 1.8, 1.16], [0.61, -0.49, 0.86],
                                     [-4.25, 2.75, 1.99]]),
                            (-10, 10, [[-0.23, 3.6, 2.33], [1.22, -0.99, 1.72],
                                       [-8.5, 5.5, 3.98]])]:
        got = uniform(seed_key(42), (3, 3), f32, lo, hi)
        assert np.all(np.abs(got - np.array(printed)) <= 0.005), got
    x = normal(seed_key(0), (3, 100), f32).astype(np.float64)
    assert np.all(np.abs(np.cov(x) - [[0.9, 0.03, 0.1], [0.03, 1.0, 0.01],
                                      [0.1, 0.01, 0.85]]) <= 0.005), np.cov(x)
    assert np.all(np.abs(np.corrcoef(x) - [[1.0, 0.03, 0.12], [0.03, 1.0, 0.01],
                                           [0.12, 0.01, 1.0]]) <= 0.005), np.corrcoef(x)
    # Decimal special functions against known values.
    assert abs(float(dec_erf(Decimal("0.5"))) - 0.5204998778130465) < 1e-16
    assert abs(float(dec_erf_inv(0.5)) - 0.4769362762044699) < 1e-16


# ----- the fixture ------------------------------------------------------------------------


def key_from_path(path):
    parts = path.split("/")
    key = seed_key(int(parts[0].split("=")[1]))
    for part in parts[1:]:
        if part[0] == "s":
            n, i = part[1:].split(":")
            key = split(key, int(n))[int(i)]
        else:
            key = fold_in(key, int(part[1:]))
    return key


def fnv1a(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def shape_text(shape):
    return "[" + ",".join(str(d) for d in shape) + "]"


LINES = []  # the fixture, one string per line, as main() builds it


def emit(op, path, dtype, shape, params, values, digest_bytes=None):
    params_text = ",".join(f"{k}={v}" for k, v in params.items()) or "-"
    if digest_bytes is not None:
        body = f"fnv1a={fnv1a(digest_bytes):016x}"
    elif dtype in ("f16", "bf16", "f32", "f64"):
        body = " ".join(f"{v:x}" for v in Kind(dtype).bits(values))
    else:
        body = " ".join(str(int(v)) for v in np.asarray(values).ravel())
    LINES.append(f"{op} {path} {dtype} {shape_text(shape)} {params_text} = {body}")


def hex_list(kind, values):
    return ";".join(f"{v:x}" for v in kind.bits(values))


def build_fixture():
    LINES.append("# Expected kiln::random outputs, written by tests/tools/jax_random_reference.py")
    LINES.append("# (JAX threefry2x32 derivations, jax_threefry_partitionable=True). Do not edit.")
    paths = ["seed=0", "seed=42", "seed=1701", "seed=4294967295", "seed=4294967296",
             "seed=18446744073709551615", "seed=42/s3:1", "seed=42/f7", "seed=7/s5:4/f123/s2:0",
             "seed=123456789/f4294967295/f0"]
    for path in paths:
        emit("key", path, "u32", (2,), {}, key_from_path(path))
    for path, n in [("seed=0", 2), ("seed=42", 5), ("seed=3/f9", 1), ("seed=5", 0)]:
        emit("split", path, "u32", (n, 2), {"n": n}, split(key_from_path(path), n))
    shapes = [(), (0,), (1,), (7,), (3, 5), (2, 0, 3), (33, 17)]
    for path in ["seed=0", "seed=42/s3:2", "seed=1701/f5"]:
        key = key_from_path(path)
        for shape in shapes:
            emit("bits", path, "u32", shape, {}, bits32(key, shape))
        emit("bits", path, "u8", (13,), {}, bits32(key, (13,)) & U32(0xFF))
    for dtype in ["f32", "f64", "f16", "bf16"]:
        kind = Kind(dtype)
        for path in ["seed=0", "seed=42/s3:1", "seed=99/f3"]:
            key = key_from_path(path)
            for shape in [(), (0,), (5,), (3, 7), (2, 3, 4)]:
                emit("uniform", path, dtype, shape, {}, uniform(key, shape, kind))
            emit("uniform", path, dtype, (9,), {"minval": -2.5, "maxval": 7.0},
                 uniform(key, (9,), kind, -2.5, 7.0))
            emit("normal", path, dtype, (11,), {}, normal(key, (11,), kind))
            emit("normal", path, dtype, (2, 3), {}, normal(key, (2, 3), kind))
            emit("truncated_normal", path, dtype, (10,), {"lower": -1.5, "upper": 0.75},
                 truncated_normal(key, -1.5, 0.75, (10,), kind))
            emit("truncated_normal", path, dtype, (6,), {"lower": 0.0, "upper": "inf"},
                 truncated_normal(key, 0.0, np.inf, (6,), kind))
            emit("truncated_normal", path, dtype, (5,), {"lower": "-inf", "upper": -2.0},
                 truncated_normal(key, -np.inf, -2.0, (5,), kind))
    for path in ["seed=0", "seed=11/s2:1"]:
        key = key_from_path(path)
        for p, shape in [(0.5, (17,)), (0.1, (4, 5)), (0.0, (6,)), (1.0, (6,)), (0.3, ())]:
            emit("bernoulli", path, "bool", shape, {"p": p}, bernoulli(key, p, shape))
    # Per-element probabilities: p of each float dtype, broadcast along the leading axis.
    for path, dtype, shape in [("seed=0", "f32", (3, 4)), ("seed=8/f2", "f64", (5,)),
                               ("seed=8/f2", "bf16", (2, 5)), ("seed=31", "f16", (4, 1))]:
        kind = Kind(dtype)
        n = shape[-1]
        p = kind.round(np.linspace(0.0, 1.0, n) if n > 1 else np.array([0.7]))
        emit("bernoulli_p", path, "bool", shape, {"dtype": dtype, "p": hex_list(kind, p)},
             bernoulli_array(key_from_path(path), p, shape, kind))
    logits_specs = [((6,), -1, "f32"), ((4, 5), -1, "f32"), ((5, 3), 0, "f32"),
                    ((3, 4), 1, "f64"), ((2, 7), -1, "bf16"), ((1,), 0, "f16")]
    for path in ["seed=0", "seed=77/f1"]:
        key = key_from_path(path)
        for shape, axis, dtype in logits_specs:
            kind = Kind(dtype)
            n = math.prod(shape)
            # sqrt, not log: IEEE rounds sqrt exactly, while NumPy's SIMD log may differ in
            # the last bit between CPUs, and the fixture must not depend on the machine.
            logits = kind.round(np.sqrt(np.arange(1, n + 1, dtype=np.float64)).reshape(shape) / 2)
            values = hex_list(kind, logits)
            emit("categorical", path, "i32", shape,
                 {"axis": axis, "dtype": dtype, "logits": values},
                 categorical(key, logits, axis, kind))
    for path in ["seed=0", "seed=42/s3:0"]:
        key = key_from_path(path)
        for n in [0, 1, 2, 10, 1000, 2000]:
            emit("permutation", path, "i32", (n,), {"n": n}, permutation(key, n))
        for shape, axis in [((9,), 0), ((4, 3), 0), ((4, 3), 1), ((2, 3, 5), -1)]:
            x = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
            emit("permutation_of", path, "i32", shape, {"axis": axis},
                 permutation_of(key, x, axis))
    for path in ["seed=0", "seed=42/s3:1"]:
        key = key_from_path(path)
        for dtype, shape, minval, maxval in [
                ("i32", (7,), 0, 10), ("i32", (3, 5), -5, 5), ("i32", (4,), 3, 3),
                ("i32", (0,), 0, 10), ("i32", (6,), -(1 << 31), (1 << 31) - 1),
                ("i32", (6,), -(1 << 31), 1 << 31), ("i32", (5,), 7, 1 << 40),
                ("i32", (200,), 0, 7), ("u32", (5,), 10, 1000), ("u32", (5,), 0, 1 << 32),
                ("u8", (9,), 0, 256), ("u8", (9,), -3, 5)]:
            emit("randint", path, dtype, shape, {"minval": minval, "maxval": maxval},
                 randint(key, shape, minval, maxval, dtype))
    # Large draws (chunked kernels, several threads) compared by digest.
    key = key_from_path("seed=2024/f1")
    big = (1000, 301)
    emit("bits", "seed=2024/f1", "u32", big, {}, None, bits32(key, big).tobytes())
    emit("uniform", "seed=2024/f1", "f32", big, {}, None,
         uniform(key, big, Kind("f32")).tobytes())
    emit("uniform", "seed=2024/f1", "f64", (100003,), {}, None,
         uniform(key, (100003,), Kind("f64")).tobytes())
    emit("bernoulli", "seed=2024/f1", "bool", (65537,), {"p": 0.25}, None,
         bernoulli(key, 0.25, (65537,)).astype(np.uint8).tobytes())
    emit("permutation", "seed=2024/f1", "i32", (100000,), {"n": 100000}, None,
         permutation(key, 100000).tobytes())


def main(argv):
    self_check()
    build_fixture()
    text = "\n".join(LINES) + "\n"
    if len(argv) == 3 and argv[1] == "--check":
        with open(argv[2]) as f:
            current = f.read()
        if current == text:
            print(f"{argv[2]} is current ({len(LINES)} lines)")
            return 0
        diff = list(difflib.unified_diff(current.splitlines(), text.splitlines(),
                                         "committed", "generated", n=0, lineterm=""))
        print(f"{argv[2]} is NOT what {argv[0]} writes. First differences:")
        for line in diff[:12]:
            print("  " + (line if len(line) <= 160 else line[:160] + "..."))
        print(f"Regenerate it with: /usr/bin/python3 {argv[0]} > {argv[2]}")
        return 1
    if len(argv) != 1:
        print(f"usage: {argv[0]} [--check FIXTURE]", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
