#!/bin/sh
# Fails, naming file:line, when a module of runtime/src imports a module of
# its own layer or of a higher one (docs/DESIGN.md, "Layers"). Each layer
# imports only the layers below it; a module may use itself freely.
#
# What counts as an import: every `crate::NAME` path outside comments
# (`use` lines and paths written in code alike, `crate::{a, b}` groups
# too), and `super::` paths that climb out of the top-level module.
# Test code does not count: a `#[cfg(test)]` module (`mod tests { ... }`,
# the test doubles, a module's tests in its own `tests.rs` or
# `NAME_tests.rs`) may reach any layer, as tests/ does.
#
# The layers, from the ground up (cli/ and main.rs, the binary, stand on
# top of all of them and are not checked: nothing can import them):
layers='
0 sys abi errno cgroupv1 layout
1 policy
2 config views
3 annotations filter
4 supervisor
5 container
'
cd "$(dirname "$0")/.." || exit 2
hits=$(find runtime/src -name '*.rs' ! -path 'runtime/src/cli/*' ! -name main.rs ! -name lib.rs \
    ! -name tests.rs ! -name '*_tests.rs' | sort |
    xargs awk -v layers="$layers" '
    BEGIN {
        n = split(layers, rows, "\n")
        for (i = 1; i <= n; i++) {
            m = split(rows[i], f, " ")
            for (j = 2; j <= m; j++) rank[f[j]] = f[1]
        }
    }
    FNR == 1 {
        # The module path of this file: its folders, then its stem unless
        # it is a mod.rs; the top-level module is the first part.
        p = FILENAME; sub(/^runtime\/src\//, "", p); sub(/\.rs$/, "", p)
        depth = split(p, part, "/")
        if (part[depth] == "mod") depth--
        top = part[1]
        if (!(top in rank)) printf "%s: module %s is on no layer (add it to tools/check-layers.sh)\n", FILENAME, top
        intest = 0; cfgtest = 0; group = ""
    }
    # Skip #[cfg(test)] modules: from the attribute to the closing brace
    # at the same indentation.
    intest { if ($0 ~ close_re) intest = 0; next }
    cfgtest && /^[[:space:]]*(pub(\([a-z]+\))? )?mod [A-Za-z0-9_]+ *\{/ {
        indent = match($0, /[^ ]/) - 1
        close_re = "^" sprintf("%" indent "s", "") "}"
        if (indent == 0) close_re = "^}"
        intest = 1; cfgtest = 0; next
    }
    { cfgtest = 0 }
    /^[[:space:]]*#\[cfg\(test\)\]/ { cfgtest = 1; next }
    /^[[:space:]]*\/\// { next }
    {
        line = $0
        sub(/[[:space:]]\/\/.*$/, "", line)
        names = ""
        # A `crate::{...}` group, possibly over several lines.
        if (group != "") {
            group = group " " line
            if (line !~ /\}/) next
            line = group; group = ""
        } else if (line ~ /crate::\{/ && line !~ /crate::\{[^}]*\}/) {
            group = line; next
        }
        s = line
        while (match(s, /crate::\{[^}]*\}/)) {
            g = substr(s, RSTART + 8, RLENGTH - 9)
            k = split(g, items, ",")
            for (i = 1; i <= k; i++) {
                it = items[i]; gsub(/^[[:space:]{]+/, "", it); sub(/[^A-Za-z0-9_].*$/, "", it)
                if (it != "") names = names " " it
            }
            s = substr(s, RSTART + RLENGTH)
        }
        s = line
        while (match(s, /crate::[A-Za-z_][A-Za-z0-9_]*/)) {
            names = names " " substr(s, RSTART + 7, RLENGTH - 7)
            s = substr(s, RSTART + RLENGTH)
        }
        # super:: chains that leave the top-level module name another one.
        s = line
        while (match(s, /(super::)+[A-Za-z_][A-Za-z0-9_]*/)) {
            chain = substr(s, RSTART, RLENGTH)
            ups = gsub(/super::/, "", chain)
            if (ups == depth) names = names " " chain
            s = substr(s, RSTART + RLENGTH)
        }
        k = split(names, used, " ")
        for (i = 1; i <= k; i++) {
            u = used[i]
            if (u == top || !(u in rank)) continue
            if (rank[u] >= rank[top])
                printf "%s:%d: %s (layer %d) imports %s (layer %d)\n", FILENAME, FNR, top, rank[top], u, rank[u]
        }
    }
')
if [ -n "$hits" ]; then
    echo "an import against the layers (docs/DESIGN.md, \"Layers\"):" >&2
    echo "$hits" >&2
    exit 1
fi
