"""Checks that `moetrain prepare`'s byte-level shards in DIR hold FILE's paragraphs, each after a
document-start token, every 20th in the validation shard, and prints how many there are:
`python3 tests/inputs/own_text_shards.py FILE DIR`. The paragraphs are found here on their own:
runs of lines that are not blank (empty or only spaces and tabs), CRLF read as LF."""
import re
import struct
import sys

START = 256


def paragraphs(path):
    text = open(path, "rb").read().replace(b"\r\n", b"\n")
    docs, lines = [], []
    for line in text.split(b"\n") + [b""]:
        if re.fullmatch(rb"[ \t]*", line):
            if lines:
                docs.append(b"".join(l + b"\n" for l in lines))
            lines = []
        else:
            lines.append(line)
    return docs


def documents(shard):
    data = open(shard, "rb").read()
    magic, version, count = struct.unpack("<3i", data[:12])
    tokens = struct.unpack(f"<{count}H", data[1024:1024 + 2 * count])
    assert magic == 20240520 and len(data) == 1024 + 2 * count, f"{shard}: not a shard of {count} tokens"
    assert tokens and tokens[0] == START, f"{shard}: does not start with a document-start token"
    docs, doc = [], None
    for t in tokens:
        if t == START:
            if doc is not None:
                docs.append(bytes(doc))
            doc = []
        else:
            doc.append(t)
    docs.append(bytes(doc))
    return docs


def main():
    want = paragraphs(sys.argv[1])
    train, val = documents(f"{sys.argv[2]}/train_000000.bin"), documents(f"{sys.argv[2]}/val_000000.bin")
    got = [val.pop(0) if d % 20 == 19 else train.pop(0) for d in range(len(train) + len(val))]
    for d, (a, b) in enumerate(zip(want, got)):
        assert a == b, f"document {d}: {b[:60]!r} in the shards, {a[:60]!r} in the file"
    assert len(want) == len(got), f"{len(got)} documents in the shards, {len(want)} paragraphs in the file"
    print(len(want))


if __name__ == "__main__":
    main()
