# Turns the text that --help prints, or config/README.md, into man(7) roff:
# the man pages are generated from the same sources users read elsewhere, so
# they cannot say something else (man/make-man.sh drives it; README.md, "Man
# pages", says why).  Three dialects, chosen with -v mode=:
#
#   manual  gpuframed --help: ALL-CAPS lines are sections; in SYNOPSIS every
#           line is kept as it is; a 4-space line followed by an 8-space one
#           is a term (an option), "X   text" at 4 spaces a term and its text
#           (EXIT STATUS), 8-space lines a term's text, other 4-space lines
#           running text.
#   usage   a gpuframe command's --help, after its "Usage:" line: a 2-space
#           "term  text" line (options, commands) is a term, deeper lines
#           continue it; other indented lines are kept as they are, column-0
#           lines are running text.
#   markdown  config/README.md: ## and ### headings, paragraphs, "- " lists,
#           ``` blocks, `code` and **bold**; a table row becomes a term (its
#           first cell) with "header value" for the middle cells and the last
#           cell as its text (a two-column table: a term per column).
#
# A blank line ends a paragraph in every dialect.  Nothing else is dropped:
# tests/man_pages.sh checks that every word of the source is on the page.

# Escapes text for roff: backslashes, a leading . or ', and "-" where it
# starts an option or a word (rendered as a minus sign, which copies as
# ASCII "-").
function esc(s,    out, c, prev, i) {
    out = ""
    prev = " "
    for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (c == "\\")
            out = out "\\e"
        else if (c == "-" && index(" [(,|=\"'/-", prev) > 0)
            out = out "\\-"
        else
            out = out c
        prev = c
    }
    if (out ~ /^[.']/)
        out = "\\&" out
    # The sources' non-ASCII characters as groff names them, so that troff
    # reads the page without preconv.
    out = replace_all(out, "\342\200\224", "\\(em")
    out = replace_all(out, "\302\265", "\\(mc")
    return out
}

# s with every `from` replaced by `to`, taken literally.
function replace_all(s, from, to,    out, at) {
    out = ""
    while ((at = index(s, from)) > 0) {
        out = out substr(s, 1, at - 1) to
        s = substr(s, at + length(from))
    }
    return out s
}

# Markdown's inline code and bold, on text already escaped, as bold.
function inline(s,    out, n, i, parts) {
    gsub(/\*\*/, "`", s)
    n = split(s, parts, "`")
    out = parts[1]
    for (i = 2; i <= n; i++)
        out = out (i % 2 == 0 ? "\\fB" : "\\fR") parts[i]
    if (n % 2 == 0)
        out = out "\\fR"
    return out
}

function indent_of(s) {
    match(s, /^ */)
    return RLENGTH
}

# Splits "term  text" (two or more spaces between) into T_TERM and T_TEXT;
# returns 0 when there is no such gap.
function split_term(s,    at) {
    if (!match(s, /[^ ]  +[^ ]/))
        return 0
    at = RSTART + 1
    T_TERM = substr(s, 1, at - 1)
    T_TEXT = substr(s, at)
    sub(/^ +/, "", T_TEXT)
    return 1
}

function literal_on() {
    if (!literal) {
        print ".nf"
        literal = 1
    }
}

function literal_off() {
    if (literal) {
        print ".fi"
        literal = 0
    }
}

# ---- manual -------------------------------------------------------------------
mode == "manual" {
    line[NR] = $0
    next
}

# ---- usage ----------------------------------------------------------------------
mode == "usage" && /^$/ {
    literal_off()
    print ".PP"
    in_term = 0
    next
}
mode == "usage" && in_term && indent_of($0) > 2 && indent_of($0) >= term_indent {
    t = $0
    sub(/^ +/, "", t)
    print esc(t)
    next
}
mode == "usage" && /^  [^ ]/ && split_term(substr($0, 3)) {
    literal_off()
    print ".TP"
    print "\\fB" esc(T_TERM) "\\fR"
    print esc(T_TEXT)
    in_term = 1
    term_indent = index($0, T_TEXT) - 1
    next
}
mode == "usage" && /^      -/ && split_term(substr($0, 7)) {
    literal_off()
    print ".TP"
    print "\\fB" esc(T_TERM) "\\fR"
    print esc(T_TEXT)
    in_term = 1
    term_indent = index($0, T_TEXT) - 1
    next
}
mode == "usage" && /^ / {
    in_term = 0
    literal_on()
    print esc($0)
    next
}
mode == "usage" {
    literal_off()
    in_term = 0
    print esc($0)
    next
}

# ---- markdown --------------------------------------------------------------------
function md_end_table() {
    table = 0
}

function md_row(s,    n, cells, i, body) {
    sub(/^\|/, "", s)
    sub(/\|$/, "", s)
    n = split(s, cells, "|")
    for (i = 1; i <= n; i++) {
        sub(/^ +/, "", cells[i])
        sub(/ +$/, "", cells[i])
        cells[i] = inline(esc(cells[i]))
    }
    if (table == 1) {
        for (i = 1; i <= n; i++)
            header[i] = cells[i]
        columns = n
        table = 2
        return
    }
    if (columns == 2) {
        for (i = 1; i <= n; i++) {
            print ".TP"
            print header[i]
            print cells[i]
        }
        return
    }
    print ".TP"
    print cells[1]
    body = ""
    for (i = 2; i < n; i++)
        body = body (i > 2 ? "; " : "") header[i] " " cells[i]
    print body "."
    print ".br"
    print cells[n]
}

mode == "markdown" && NR == 1 && /^# / {
    next
}
mode == "markdown" && /^```/ {
    if (literal) {
        print ".fi"
        print ".RE"
        literal = 0
    } else {
        print ".PP"
        print ".RS 4"
        print ".nf"
        literal = 1
    }
    next
}
mode == "markdown" && literal {
    print esc($0)
    next
}
mode == "markdown" && /^\|/ {
    if (!table)
        table = 1
    if ($0 ~ /^\|[ |-]+$/ && $0 ~ /-/ && table == 2)
        next
    md_row($0)
    next
}
mode == "markdown" {
    md_end_table()
}
mode == "markdown" && /^## / {
    t = substr($0, 4)
    gsub(/`/, "", t)
    print ".SH " esc(toupper(t))
    next
}
mode == "markdown" && /^### / {
    t = substr($0, 5)
    gsub(/`/, "", t)
    print ".SS " esc(t)
    next
}
mode == "markdown" && /^$/ {
    print ".PP"
    next
}
mode == "markdown" && /^- / {
    print ".IP \\(bu 2"
    print inline(esc(substr($0, 3)))
    next
}
mode == "markdown" {
    t = $0
    sub(/^ +/, "", t)
    print inline(esc(t))
    next
}

# ---- manual, now that the next line is known ------------------------------------
END {
    if (mode == "manual") {
        section = ""
        for (i = 1; i <= NR; i++) {
            s = line[i]
            if (s ~ /^[A-Z][A-Z ]*$/) {
                literal_off()
                section = s
                print ".SH " s
                continue
            }
            if (s == "") {
                literal_off()
                if (i > 1 && line[i + 1] !~ /^[A-Z][A-Z ]*$/ && i < NR)
                    print ".PP"
                continue
            }
            if (section == "SYNOPSIS") {
                literal_on()
                print esc(substr(s, 5))
                continue
            }
            t = s
            sub(/^ +/, "", t)
            if (indent_of(s) == 4 && indent_of(line[i + 1]) == 8 && line[i + 1] != "") {
                print ".TP"
                print "\\fB" esc(t) "\\fR"
            } else if (indent_of(s) == 4 && section != "NAME" && s ~ /^    [^ ]+   +[^ ]/ &&
                       split_term(t)) {
                print ".TP"
                print "\\fB" esc(T_TERM) "\\fR"
                print esc(T_TEXT)
            } else {
                print esc(t)
            }
        }
    }
    literal_off()
}
