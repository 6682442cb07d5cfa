#!/bin/sh
# Lists the functions in runtime/src longer than LIMIT lines (default 100),
# longest first, as "lines file:line name". A function runs from its `fn`
# line to the first line after it that closes at the `fn` line's
# indentation; comments and blank lines inside count.
# Usage: tools/long-functions.sh [LIMIT]  (`make lint` fails when it lists any)
cd "$(dirname "$0")/.." || exit 2
limit=${1:-100}
find runtime/src -name '*.rs' | sort | xargs awk -v limit="$limit" '
    FNR == 1 { inside = 0 }
    !inside && match($0, /^[[:space:]]*((pub(\([a-z]+\))?|const|async|unsafe|extern "C") +)*fn [A-Za-z0-9_]+/) {
        line = $0
        indent = match(line, /[^ ]/) - 1
        name = line; sub(/.*fn /, "", name); sub(/[^A-Za-z0-9_].*/, "", name)
        if (line ~ /;[[:space:]]*$/ || line ~ /\}[[:space:]]*$/) next
        inside = 1; start = FNR; close_re = "^" sprintf("%" indent "s", "") "}"
        if (indent == 0) close_re = "^}"
        next
    }
    inside && $0 ~ close_re {
        n = FNR - start + 1
        if (n > limit) printf "%d %s:%d %s\n", n, FILENAME, start, name
        inside = 0
    }
' | sort -rn
