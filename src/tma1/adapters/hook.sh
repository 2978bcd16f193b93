#!/bin/sh
# tma1 hook for @@AGENT@@, written by `tma1 install` (`tma1 uninstall` removes it).
#
# Forwards the hook event on stdin to the local tma1 server and prints the server's
# answer (a <tma1-context> digest, a Stop block, or nothing). It must never get in the
# agent's way: on any problem (server down or slow, wrong token, curl missing) it prints
# nothing and exits 0. Deliberately POSIX sh + curl: no interpreter start-up on the
# agent's path. TMA1_HOST, TMA1_PORT, TMA1_DATA_DIR and TMA1_HOOK_TIMEOUT in the
# environment override the values baked in at install time.
#
# Whoever listens on the port may not be tma1 (another user of this machine can listen
# there while tma1 is down), so the token never leaves this script: the request carries a
# nonce and a keyed hash of it (SHA-256 over the token and the nonce), and an answer
# reaches the agent only when it carries the server's keyed hash of that nonce and of the
# answer itself (docs/hooks.md, "Who is on the other end").
[ -n "${TMA1_HOST:-}" ] || TMA1_HOST=@@HOST@@
[ -n "${TMA1_PORT:-}" ] || TMA1_PORT=@@PORT@@
[ -n "${TMA1_DATA_DIR:-}" ] || TMA1_DATA_DIR=@@DATA_DIR@@
[ -n "${TMA1_HOOK_TIMEOUT:-}" ] || TMA1_HOOK_TIMEOUT=2
# Bytes, not characters: ${#body} goes into the answer's keyed hash.
LC_ALL=C
export LC_ALL

# Nothing this script could say on stderr helps the agent (exit 2 or a message there can
# even block it), so stderr goes nowhere from here on.
exec 2>/dev/null
# A background job's stdin would be /dev/null: keep the agent's pipe on fd 4 for the drain
# (`command` keeps a closed stdin from ending the script, as a failed `exec` would).
command exec 4<&0 || exec 4</dev/null

if ! command -v curl >/dev/null 2>&1; then
  cat <&4 >/dev/null 2>&1 &  # drain stdin so the agent never sees a broken pipe
  exit 0
fi

token=
if [ -r "$TMA1_DATA_DIR/hook-token" ]; then
  IFS= read -r token <"$TMA1_DATA_DIR/hook-token" || :
fi
# The time (the server refuses an old nonce) and this process's id: unique on this machine
# for that second.
nonce=$(date +%s)-$$
auth=$(printf '%s\n' tma1-hook-v2 request "$token" "$nonce" | @@SHA256@@)
auth=${auth%% *}

case $TMA1_HOST in
  *:*) url_host="[$TMA1_HOST]" ;;  # an IPv6 literal needs brackets in a URL
  *) url_host=$TMA1_HOST ;;
esac

# The largest answer printed (the server's are a few KiB); a bigger one is not tma1's.
answer_max=262144
# stdin is streamed (--upload-file -, chunked) rather than read whole before connecting,
# so --max-time bounds the read too: an agent that never closes stdin costs the cap, not
# the hook's whole timeout. --max-time is a wall-clock cap on everything curl does
# (connect, upload, a server that drips its answer), --max-filesize refuses a big answer.
# The cap (2 s, under the agents' 5 s hook timeout) is what a big event needs to upload:
# the server takes bodies up to 64 MiB, answers a big one as soon as it has arrived, and
# answers every other within its 400 ms insert budget.
# The nonce and its hash go to curl as a config file on fd 3, not as arguments, so other
# local users cannot race the request with them from the process list (only where /dev/fd
# is missing do they fall back to arguments). `Expect:` stops curl from waiting for a
# 100-continue on large events; --noproxy keeps a user's http_proxy off loopback traffic;
# -q (first) keeps a user's ~/.curlrc out of it. -i keeps the answer's headers (its
# signature); -w appends the 3-digit status so that a 403 or 500 body is never shown to
# the agent, and keeps the answer's trailing newlines from `$( )`.
# Cost: almost all of it is curl's own start (dynamic linking, TLS library set-up), which
# no flag avoids. curl is the last command of the substitution's subshell, so the shell
# execs it instead of forking again; docs/benchmarks.md has the figures.
fd_dir=/dev/fd
if [ -d "$fd_dir" ]; then
  set -- --config "$fd_dir/3"
else
  set -- -H "X-TMA1-Nonce: $nonce" -H "X-TMA1-Auth: $auth"
fi
out=$(curl -q --silent --noproxy '*' \
    --connect-timeout 0.25 --max-time "$TMA1_HOOK_TIMEOUT" --max-filesize "$answer_max" \
    "$@" -i \
    -H 'Content-Type: application/json' -H 'Expect:' \
    --upload-file - -X POST --write-out '%{http_code}' \
    "http://$url_host:$TMA1_PORT/api/hooks@@QUERY@@" 3<<TMA1_CURL_CONFIG
header = "X-TMA1-Nonce: $nonce"
header = "X-TMA1-Auth: $auth"
TMA1_CURL_CONFIG
) || out=000
# Only patterns whose cost grows with the answer's length once: `${out#"${out%???}"}` made
# dash compare a 100 KB pattern at every offset (17.8 s of CPU for a 100 KB answer).
case $out in
  *200) ;;
  *)
    # Whatever curl left unread on stdin (server down, refused, timed out) is drained in
    # the background: an agent still writing a large event must not get a broken pipe
    # (Codex reports that as a failed hook), and one that never closes stdin must not hold
    # us up.
    cat <&4 >/dev/null 2>&1 &
    exit 0 ;;
esac
out=${out%???}
crlf=$(printf '\r\n.')
crlf=${crlf%.}
head=${out%%"$crlf$crlf"*}
[ "$head" != "$out" ] || exit 0
answer=${out#*"$crlf$crlf"}
[ -n "$answer" ] || exit 0
[ "${#answer}" -le "$answer_max" ] || exit 0
case $head in
  *"$crlf"[Xx]-[Tt][Mm][Aa]1-[Ss][Ii][Gg]:" "*) ;;
  *) exit 0 ;;  # not signed: not tma1, or not for us
esac
sig=${head#*"$crlf"[Xx]-[Tt][Mm][Aa]1-[Ss][Ii][Gg]: }
sig=${sig%%"$crlf"*}
want=$(printf '%s\n' tma1-hook-v2 response "$token" "$nonce" "${#answer}" "$answer" | @@SHA256@@)
[ "${want%% *}" = "$sig" ] || exit 0
printf '%s' "$answer"
exit 0
