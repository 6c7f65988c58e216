# shellcheck shell=bash
# shellcheck disable=SC2034  # colours and ROW are used by the sourcing script
# Narration helpers for demo/refund-story.sh (sourced). Every SQL statement the story
# runs is printed before it runs, and its rows after; every expectation is checked,
# and any miss makes the story exit non-zero (it doubles as a smoke test).

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
    C_DIM=$'\e[2m' C_BOLD=$'\e[1m' C_SQL=$'\e[36m' C_OK=$'\e[32m' C_BAD=$'\e[31m'
    C_HEAD=$'\e[1;35m' C_WARN=$'\e[33m' C_OFF=$'\e[0m'
else
    C_DIM='' C_BOLD='' C_SQL='' C_OK='' C_BAD='' C_HEAD='' C_WARN='' C_OFF=''
fi

STORY_FAILURES=0
STORY_CHECKS=0
declare -gA ROW=()        # columns of the first row of the last sql_call
SQL_ERROR_STATE=""        # SQLSTATE of the last sql_expect_error
SQL_ERROR_TEXT=""

PSQL=(psql -X -q -v ON_ERROR_STOP=1)
DEMO_ROLE=${PGUSER:-postgres}

# as_role ROLE: the following statements run as that login role (the shipped group
# roles decide what it may do: docs/security.md); the prompt shows who is calling.
as_role() {
    DEMO_ROLE=$1
    PSQL=(psql -X -q -v ON_ERROR_STOP=1 -U "$1")
}

chapter() {
    printf '\n%s== %s ==%s\n' "$C_HEAD" "$*" "$C_OFF"
}

say() {
    # Narrative paragraph, wrapped at 88 columns.
    printf '%s\n' "$*" | fold -s -w 88 | sed 's/ *$//'
}

note() {
    printf '%s%s%s\n' "$C_DIM" "$*" "$C_OFF"
}

_print_sql() {
    local line first=1
    while IFS= read -r line; do
        if [ $first = 1 ]; then
            printf '  %s%s=>%s %s%s%s\n' "$C_DIM" "$DEMO_ROLE" "$C_OFF" "$C_SQL" "$line" "$C_OFF"
            first=0
        else
            printf '             %s%s%s\n' "$C_SQL" "$line" "$C_OFF"
        fi
    done <<<"$1"
}

# sql_call "SQL": print the statement, run it, print each returned row as
# "column | value" lines and keep the first row's columns in ROW[column].
sql_call() {
    local sql="$1" out
    _print_sql "$sql"
    ROW=()
    if ! out=$("${PSQL[@]}" -A -t -x -F $'\x1f' -c "$sql" 2>&1); then
        sed "s/^/    ${C_BAD}/; s/\$/${C_OFF}/" <<<"$out"
        fail "the statement above failed"
        return 1
    fi
    if [ -z "$out" ]; then
        printf '    %s(done)%s\n' "$C_DIM" "$C_OFF"
        return 0
    fi
    local line key val width=0 rowno=1
    while IFS= read -r line; do
        key=${line%%$'\x1f'*}
        [ "${#key}" -gt "$width" ] && width=${#key}
    done <<<"$out"
    while IFS= read -r line; do
        if [ -z "$line" ]; then
            rowno=$((rowno + 1))
            printf '    %s-- row %d --%s\n' "$C_DIM" "$rowno" "$C_OFF"
            continue
        fi
        key=${line%%$'\x1f'*}
        val=${line#*$'\x1f'}
        [ "$rowno" = 1 ] && ROW[$key]=$val
        printf '    %s%-*s%s | %s\n' "$C_DIM" "$width" "$key" "$C_OFF" "$val"
    done <<<"$out"
}

# sql_show "SQL": print the statement and its result as psql's aligned table.
sql_show() {
    local sql="$1" out
    _print_sql "$sql"
    if ! out=$("${PSQL[@]}" -P footer=off -c "$sql" 2>&1); then
        sed "s/^/    ${C_BAD}/; s/\$/${C_OFF}/" <<<"$out"
        fail "the statement above failed"
        return 1
    fi
    sed 's/^/    /' <<<"$out"
}

# sql_expect_error SQLSTATE "SQL": the statement must fail with that SQLSTATE.
sql_expect_error() {
    local want="$1" sql="$2" out
    _print_sql "$sql"
    SQL_ERROR_STATE="" SQL_ERROR_TEXT=""
    if out=$("${PSQL[@]}" -v VERBOSITY=verbose -c "$sql" 2>&1); then
        sed 's/^/    /' <<<"$out"
        fail "expected an error with SQLSTATE $want, but the statement succeeded"
        return 1
    fi
    SQL_ERROR_TEXT=$(grep -v '^LOCATION:' <<<"$out")
    SQL_ERROR_STATE=$(sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\): .*/\1/p' <<<"$out" | head -n1)
    sed "s/^/    ${C_WARN}/; s/\$/${C_OFF}/" <<<"$SQL_ERROR_TEXT"
    expect "SQLSTATE" "$SQL_ERROR_STATE" "$want"
}

# sql_value "SQL": run a query and print its single value (no narration; for checks).
sql_value() {
    "${PSQL[@]}" -A -t -c "$1"
}

ok() {
    STORY_CHECKS=$((STORY_CHECKS + 1))
    printf '  %s✔ %s%s\n' "$C_OK" "$*" "$C_OFF"
}

fail() {
    STORY_CHECKS=$((STORY_CHECKS + 1))
    STORY_FAILURES=$((STORY_FAILURES + 1))
    printf '  %s✘ UNEXPECTED: %s%s\n' "$C_BAD" "$*" "$C_OFF"
}

# expect LABEL ACTUAL WANTED
expect() {
    if [ "$2" = "$3" ]; then
        ok "$1 is $3"
    else
        fail "$1 is '$2', the story expects '$3'"
    fi
}

# expect_contains LABEL HAYSTACK NEEDLE
expect_contains() {
    if [[ "$2" == *"$3"* ]]; then
        ok "$1 mentions $3"
    else
        fail "$1 does not mention '$3'"
    fi
}
