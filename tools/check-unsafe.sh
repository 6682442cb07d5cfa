#!/bin/sh
# Fails, naming file:line, when `unsafe` appears in runtime/src outside
# runtime/src/sys/: every raw call of the runtime sits behind a safe
# wrapper there (docs/DESIGN.md, "unsafe"). Comments do not count.
cd "$(dirname "$0")/.." || exit 2
hits=$(grep -rn --include='*.rs' -E '\bunsafe\b' runtime/src | grep -v '^runtime/src/sys/' | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//')
if [ -n "$hits" ]; then
    echo "unsafe outside runtime/src/sys/ (wrap it in a safe sys:: function):" >&2
    echo "$hits" >&2
    exit 1
fi
