#!/usr/bin/env bash
# The layer, size and line-length checker (scripts/check_layers.py): it passes on the tree, and it
# fails on a copy of the tree with one include that runs upward, one sideways between folders of a
# rank, one folder that the layer order does not place, one function over the size limit, or one
# line over the length limit.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source tests/expect.sh
check=scripts/check_layers.py

expect "the tree keeps its layers and sizes" 0 "check_layers: ok" -- python3 $check

# A copy of what the checker reads, to plant problems in.
fresh() {
  rm -rf "$tmp/tree" && mkdir -p "$tmp/tree/docs"
  cp -r src main.cpp "$tmp/tree/" && cp docs/architecture.md "$tmp/tree/docs/"
}

fresh
expect "the copy keeps its layers" 0 "check_layers: ok" -- python3 $check --layers-only --root "$tmp/tree"

fresh
sed -i '1a #include "train/trainer.hpp"' "$tmp/tree/src/util/escape.cpp"
expect "an upward include fails" 1 \
  "src/util/escape.cpp:2: includes train/trainer.hpp: util reaches up to train" -- \
  python3 $check --layers-only --root "$tmp/tree"

fresh
sed -i '1a #include "sweep/grid.hpp"' "$tmp/tree/src/plot/plot.cpp"
expect "a sideways include between folders of one rank fails" 1 "plot reaches sideways to sweep" -- \
  python3 $check --layers-only --root "$tmp/tree"

fresh
mkdir -p "$tmp/tree/src/extra" && printf '#include "util/error.hpp"\n' > "$tmp/tree/src/extra/extra.cpp"
expect "a folder the order does not place fails" 1 "extra: not in the layers block" -- \
  python3 $check --layers-only --root "$tmp/tree"

fresh
sed -i 's/^ops /ops+tensor /; /^tensor /d' "$tmp/tree/docs/architecture.md"
sed -i '1a #include "tensor/arena.hpp"' "$tmp/tree/src/ops/backend/op_profile.cpp"
expect "peers may include each other" 0 "check_layers: ok" -- python3 $check --layers-only --root "$tmp/tree"

# The size part: a function of 81 lines fails, one of 80 passes; the files of the tree that are
# over the limits today are not copied.
sizes() {
  rm -rf "$tmp/tree" && mkdir -p "$tmp/tree/docs" "$tmp/tree/src/util"
  cp docs/architecture.md "$tmp/tree/docs/" && cp src/util/*.hpp src/util/*.cpp "$tmp/tree/src/util/"
  {
    echo "int planted(int x) {"
    for i in $(seq 1 $(($1 - 2))); do echo "  x += $i;"; done
    echo "}"
  } > "$tmp/tree/src/util/planted.cpp"
}
sizes 80
expect "a function of 80 lines passes" 0 "check_layers: ok" -- python3 $check --root "$tmp/tree"
sizes 81
expect "a function of 81 lines fails" 1 "src/util/planted.cpp:1: planted is 81 lines, more than 80" -- \
  python3 $check --root "$tmp/tree"
sizes 10
for i in $(seq 1 501); do echo "// line $i"; done > "$tmp/tree/src/util/long.hpp"
expect "a file of 501 lines fails" 1 "src/util/long.hpp: 501 lines, more than 500" -- python3 $check --root "$tmp/tree"

# The line-length part: a line of 121 characters fails, one of 120 passes.
line_of() { printf '//%*s\n' $(($1 - 2)) '' | tr ' ' x; }
sizes 10
line_of 120 >> "$tmp/tree/src/util/planted.cpp"
expect "a line of 120 characters passes" 0 "check_layers: ok" -- python3 $check --root "$tmp/tree"
sizes 10
line_of 121 >> "$tmp/tree/src/util/planted.cpp"
expect "a line of 121 characters fails" 1 "src/util/planted.cpp:11: 121 characters, more than 120" -- \
  python3 $check --root "$tmp/tree"
