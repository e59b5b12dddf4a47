#!/usr/bin/env python3
"""Writes tests/core/half_fixtures.txt: float32 bit patterns with their correctly rounded
f16 and bf16 bit patterns, computed independently of kiln with exact rational arithmetic
(round to nearest, ties to even; overflow to infinity; NaN stays NaN). f16 results are
cross-checked against numpy's float16 conversion.

Usage: /usr/bin/python3 tests/tools/make_half_fixtures.py > tests/core/half_fixtures.txt
"""
import random
import struct
import sys
from fractions import Fraction

import numpy as np


def f32_value(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def exact(bits):
    """Exact rational value of a finite float32 bit pattern."""
    sign = -1 if bits >> 31 else 1
    exponent = (bits >> 23) & 0xFF
    mantissa = bits & 0x7FFFFF
    if exponent == 0:
        return sign * Fraction(mantissa, 1 << 149)
    return sign * Fraction((1 << 23) | mantissa) * Fraction(2) ** (exponent - 150)


def round_to_format(value, negative, mantissa_bits, min_exponent, max_finite_bits, sign_shift,
                    exp_bits):
    """Rounds a rational to a binary format given by its mantissa width and minimum normal
    exponent; returns the bit pattern. Enumerates the representable neighbours exactly."""
    magnitude = -value if value < 0 else value
    # The spacing of representable numbers around `magnitude`.
    if magnitude == 0:
        bits = 0
    else:
        e = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
        while Fraction(2) ** e > magnitude:
            e -= 1
        while Fraction(2) ** (e + 1) <= magnitude:
            e += 1
        e = max(e, min_exponent)
        ulp = Fraction(2) ** (e - mantissa_bits)
        q, r = divmod(magnitude, ulp)
        q = int(q)
        half = ulp / 2
        if r > half or (r == half and q % 2 == 1):
            q += 1
        # Encode q * ulp: subnormal if e == min_exponent and q < 2**mantissa_bits.
        if q == 0:
            bits = 0
        else:
            if q >= (1 << (mantissa_bits + 1)):  # carried into the next binade
                q >>= 1
                e += 1
            if q < (1 << mantissa_bits):
                biased = 0
            else:
                biased = e - min_exponent + 1
            bits = (biased << mantissa_bits) | (q & ((1 << mantissa_bits) - 1))
            if bits > max_finite_bits:
                bits = ((1 << exp_bits) - 1) << mantissa_bits  # infinity
    if negative:
        bits |= 1 << sign_shift
    return bits


def to_f16(bits):
    return round_to_format(exact(bits), bits >> 31, 10, -14, 0x7BFF, 15, 5)


def to_bf16(bits):
    return round_to_format(exact(bits), bits >> 31, 7, -126, 0x7F7F, 15, 8)


def cases():
    picked = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF,
              0xFF7FFFFF, 0x3F800000, 0xBF800000]
    values = [65504.0, 65505.0, 65519.0, 65519.99, 65520.0, 65536.0, -65520.0, 2.0 ** -14,
              2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -25 + 2.0 ** -40, 1 + 2.0 ** -11,
              1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -20,
              3.3895313892515355e38, 3.3895314e38, 1e-40, -1e-40, 0.1, 1.0 / 3, 2.0 ** -133,
              2.0 ** -134, 3 * 2.0 ** -135]
    for v in values:
        picked.append(struct.unpack("<I", struct.pack("<f", v))[0])
    rng = random.Random(20261130)
    for _ in range(3000):
        picked.append(rng.getrandbits(32))
    # Every tie and near-tie pattern in a few binades (low mantissa bits around the halfway point).
    for exponent in (0x01, 0x38, 0x3F, 0x70, 0x71, 0x7E, 0x8E, 0xFE):
        for low in (0x0FFF, 0x1000, 0x1001, 0x7FFF, 0x8000, 0x8001, 0x2000, 0x3000):
            for high in (0, 1, 2, 3):
                picked.append((exponent << 23) | (high << 16) | (high << 13) | low)
    return picked


def main():
    out = sys.stdout
    out.write("# f32_bits f16_bits bf16_bits (hex); NaN inputs are checked in the test itself\n")
    for bits in cases():
        exponent = (bits >> 23) & 0xFF
        if exponent == 0xFF:
            continue  # inf/NaN handled by the test
        f16 = to_f16(bits)
        bf16 = to_bf16(bits)
        numpy_f16 = int(np.array([f32_value(bits)], dtype=np.float32).astype(np.float16).view(np.uint16)[0])
        assert numpy_f16 == f16, (hex(bits), hex(f16), hex(numpy_f16))
        out.write(f"{bits:08x} {f16:04x} {bf16:04x}\n")


if __name__ == "__main__":
    main()
