"""moetrain's training order, written again from its definition (src/train/data_order.hpp) so
the oracle checks the order independently: sequence i of the run is in epoch e = i // W at
position p = i % W; shuffled, it reads window perm(p), a keyed Feistel permutation of the next
even power of two at or above W (4 rounds), applied again until it lands below W.

`python3 tests/oracle/data_order.py SEED WINDOWS COUNT` prints the windows of sequences 0..COUNT-1."""
import sys

M64 = (1 << 64) - 1
DATA_STREAM = 0x64617461206F7264
ROUNDS = 4


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def half_bits(windows):
    h = 1
    while h < 31 and (1 << (2 * h)) < windows:
        h += 1
    return h


def permute(epoch_key, x, h):
    mask = (1 << h) - 1
    left, right = x >> h, x & mask
    for r in range(ROUNDS):
        left, right = right, left ^ (splitmix64(right ^ splitmix64((epoch_key + r) & M64)) & mask)
    return (left << h) | right


def window(seed, windows, sequence, shuffle=True):
    epoch, position = divmod(sequence, windows)
    if not shuffle:
        return position
    key = splitmix64(splitmix64(seed) ^ DATA_STREAM)
    epoch_key = splitmix64(key ^ splitmix64(epoch))
    h = half_bits(windows)
    x = permute(epoch_key, position, h)
    while x >= windows:
        x = permute(epoch_key, x, h)
    return x


if __name__ == "__main__":
    seed, windows, count = (int(a) for a in sys.argv[1:4])
    print(" ".join(str(window(seed, windows, i)) for i in range(count)))
