#!/usr/bin/python3
"""Makes and checks .npy/.npz fixtures with NumPy, the reference for test_npy.cpp.

  npy_fixtures.py write DIR   writes NumPy-made files into DIR
  npy_fixtures.py check DIR   loads the files test_npy.cpp wrote into DIR; exits 1 on mismatch
"""
import sys

import numpy as np


def base():
    return (np.arange(24, dtype=np.float32).reshape(2, 3, 4) * 0.5 - 3.0)


def write(d):
    a = base()
    np.save(f"{d}/f4.npy", a)
    np.save(f"{d}/f8.npy", a.astype(np.float64) / 3.0)
    np.save(f"{d}/f2.npy", a.astype(np.float16))
    np.save(f"{d}/i4.npy", np.array([-(2**31), -1, 0, 7, 2**31 - 1], dtype=np.int32))
    np.save(f"{d}/i8.npy", np.array([[-(2**40), 3], [5, 2**40]], dtype=np.int64))
    np.save(f"{d}/u1.npy", np.arange(0, 256, 51, dtype=np.uint8))
    np.save(f"{d}/b1.npy", np.array([True, False, True]))
    np.save(f"{d}/scalar.npy", np.float32(2.5))
    np.save(f"{d}/empty.npy", np.zeros((0,), dtype=np.float32))
    np.save(f"{d}/vector.npy", np.array([1.0, -2.0, 4.0], dtype=np.float32))
    np.save(f"{d}/big_endian.npy", a.astype(">f4"))
    np.save(f"{d}/fortran.npy", np.asfortranarray(a[0]))
    np.save(f"{d}/complex.npy", np.array([1 + 2j], dtype=np.complex64))
    for version in [(1, 0), (2, 0), (3, 0)]:
        with open(f"{d}/v{version[0]}.npy", "wb") as f:
            np.lib.format.write_array(f, a, version=version)
    np.savez(f"{d}/stored.npz", weights=a, ids=np.array([3, 1, 4], dtype=np.int64))
    np.savez_compressed(f"{d}/deflated.npz", weights=a, mask=np.array([True, False]))
    # Every half bit pattern, and NumPy's f32 for it: checks f16 -> f32 exhaustively.
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    np.save(f"{d}/all_f16.npy", bits.view(np.float16))
    np.save(f"{d}/all_f16_as_f32.npy", bits.view(np.float16).astype(np.float32))
    # Random and edge f32 values and NumPy's rounding of them to f16.
    rng = np.random.default_rng(5)
    vals = np.concatenate([
        rng.standard_normal(20000).astype(np.float32) * np.float32(100),
        rng.standard_normal(5000).astype(np.float32) * np.float32(1e-5),
        np.array([65504, 65519.99, 65520, 1e9, -0.0, 2**-25, 3 * 2**-25, 2**-24 * 1.5,
                  6.1e-5, 1 + 2**-11, 1 + 3 * 2**-11], dtype=np.float32)])
    np.save(f"{d}/round_src.npy", vals)
    np.save(f"{d}/round_f16.npy", vals.astype(np.float16))


def check(d):
    a = base()
    ok = True

    def expect(name, got, want):
        nonlocal ok
        if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
            print(f"MISMATCH {name}: got {got.dtype} {got.shape} {got!r}, want {want.dtype} "
                  f"{want.shape}")
            ok = False

    expect("ours_f4", np.load(f"{d}/ours_f4.npy"), a)
    expect("ours_f2", np.load(f"{d}/ours_f2.npy"), a.astype(np.float16))
    expect("ours_i8", np.load(f"{d}/ours_i8.npy"), np.array([[-5, 6]], dtype=np.int64))
    expect("ours_b1", np.load(f"{d}/ours_b1.npy"), np.array([False, True]))
    expect("ours_scalar", np.load(f"{d}/ours_scalar.npy"), np.array(7.0, dtype=np.float64))
    expect("ours_empty", np.load(f"{d}/ours_empty.npy"), np.zeros((2, 0), dtype=np.int32))
    for name in ["ours_stored.npz", "ours_deflated.npz"]:
        z = np.load(f"{d}/{name}")
        if sorted(z.files) != ["u8", "w"]:
            print(f"MISMATCH {name}: keys {z.files}")
            ok = False
            continue
        expect(name + ":w", z["w"], a)
        expect(name + ":u8", z["u8"], np.array([9, 8, 7], dtype=np.uint8))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    {"write": write, "check": check}[sys.argv[1]](sys.argv[2])
