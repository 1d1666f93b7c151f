#!/usr/bin/env bash
# Regenerates the Go code of every protobuf file in messages/: each
# messages/NAME.proto produces messages/NAME.pb.go next to it.
#
# Usage: scripts/genproto.sh          regenerate in place
#        scripts/genproto.sh --check  regenerate into a temporary directory and
#                                     fail if the committed .pb.go files differ
#
# Needs protoc (Debian/Ubuntu: apt-get install protobuf-compiler) and Go.
# protoc-gen-go is installed by this script, pinned to the version of
# google.golang.org/protobuf that go.mod requires, so the generated code always
# matches the runtime library it is compiled against.
set -euo pipefail

check=0
case "${1:-}" in
  "") ;;
  --check) check=1 ;;
  -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "genproto: unknown argument: $1 (try --help)" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if ! command -v protoc >/dev/null 2>&1; then
  echo "genproto: protoc not found on PATH." >&2
  echo "genproto: install it with: sudo apt-get install protobuf-compiler" >&2
  exit 1
fi
if ! command -v go >/dev/null 2>&1; then
  echo "genproto: go not found on PATH." >&2
  exit 1
fi

# protoc-gen-go pinned to the protobuf runtime version of go.mod.
version="$(go list -m -f '{{.Version}}' google.golang.org/protobuf)"
gopath="$(go env GOPATH)"
bindir="${gopath%%:*}/bin"   # first GOPATH entry
mkdir -p "$bindir"
GOBIN="$bindir" go install "google.golang.org/protobuf/cmd/protoc-gen-go@${version}"
plugin="$bindir/protoc-gen-go"

shopt -s nullglob
protos=(messages/*.proto)
if [ "${#protos[@]}" -eq 0 ]; then
  echo "genproto: no .proto files in messages/" >&2
  exit 1
fi

# protoc sees the files as aura/v1/NAME.proto (their proto package), so the
# paths registered in the global protobuf registry are unique to us; a plain
# "common.proto" would collide with any other dependency's file of that name
# and make the binary panic at init. aura/v1 is a symlink to messages/, so
# paths=source_relative output lands next to the .proto files.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src/aura" "$work/check"
ln -s "$root/messages" "$work/src/aura/v1"

if [ "$check" -eq 1 ]; then
  out="$work/check"
else
  out="$work/src"
  # Drop stale output of .proto files that no longer exist.
  rm -f messages/*.pb.go
fi

protoc \
  --proto_path="$work/src" \
  --plugin=protoc-gen-go="$plugin" \
  --go_out="$out" \
  --go_opt=paths=source_relative \
  "${protos[@]/#messages\//aura/v1/}"

if [ "$check" -eq 1 ]; then
  gen="$out/aura/v1"
  if ! diff -u <(cd messages && ls -1 -- *.pb.go 2>/dev/null) <(cd "$gen" && ls -1 -- *.pb.go) >&2; then
    echo "genproto: the set of generated files differs; run scripts/genproto.sh" >&2
    exit 1
  fi
  status=0
  for f in "$gen"/*.pb.go; do
    name="$(basename "$f")"
    if ! cmp -s "$f" "messages/$name"; then
      echo "genproto: messages/$name is out of date; run scripts/genproto.sh" >&2
      status=1
    fi
  done
  exit "$status"
fi

echo "genproto: generated ${#protos[@]} file(s) with $(protoc --version) and protoc-gen-go ${version}"
