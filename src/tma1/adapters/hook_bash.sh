#!/bin/bash -p
# tma1 hook for @@AGENT@@, written by `tma1 install` (`tma1 uninstall` removes it).
#
# Forwards the hook event on stdin to the local tma1 server and prints the server's
# answer (a <tma1-context> digest, a Stop block, or nothing). It must never get in the
# agent's way: on any problem (server down, slow or wedged, wrong token) it prints
# nothing and exits 0. TMA1_HOST, TMA1_PORT, TMA1_DATA_DIR and TMA1_HOOK_TIMEOUT in the
# environment override the values baked in at install time.
#
# Whoever listens on the port may not be tma1 (another user of this machine can listen
# there while tma1 is down), so the token never leaves this script: the request carries a
# fresh nonce and a keyed hash of it (SHA-256 over the token and the nonce), and an answer
# reaches the agent only when it carries the server's keyed hash of that nonce and of the
# answer itself (docs/hooks.md, "Who is on the other end").
#
# This is the bash variant (install writes it where /bin/bash 5.2+ exists; elsewhere the
# POSIX sh + curl one): it speaks HTTP/1.1 itself over bash's /dev/tcp; the one process it
# starts is the hash. `-p` on the first line: no $BASH_ENV, no functions imported from the
# environment.
# Run as `sh script` (the first line ignored)? This line is still POSIX: hand over to bash.
[ -n "${BASH_VERSION:-}" ] || exec /bin/bash -p "$0" "$@"
[ -n "${TMA1_HOST:-}" ] || TMA1_HOST=@@HOST@@
[ -n "${TMA1_PORT:-}" ] || TMA1_PORT=@@PORT@@
[ -n "${TMA1_DATA_DIR:-}" ] || TMA1_DATA_DIR=@@DATA_DIR@@
[ -n "${TMA1_HOOK_TIMEOUT:-}" ] || TMA1_HOOK_TIMEOUT=2
# Bytes, not characters: ${#body} is the Content-Length, `read -N` counts bytes. Also the
# `.` in $EPOCHREALTIME.
export LC_ALL=C

# Nothing this script could say on stderr helps the agent (exit 2 or a message there can
# even block it), so stderr goes nowhere from here on.
exec 2>/dev/null
# The agent's stdout, for the worker's answer (a closed stdout is not an error here).
exec 5>&1 || exec 5>/dev/null
# A background job's stdin would be /dev/null: keep the agent's pipe on fd 4 for the drain.
# No stdin at all: no event to post.
exec 4<&0 || exit 0

# The largest answer printed (the server's are a few KiB); a bigger one is not tma1's.
answer_max=262144

tma1_post() {
  local body token= url_host req nonce auth resp
  # At most 64 KiB + 1 byte of the event. Bash 5.2's `read -N` without `-t` reads a pipe
  # or socket in 4 KiB blocks (install picks this script only for bash 5.2+), so no process
  # is started for it (`head` cost ~1.5 ms). `$(</dev/stdin)` cannot open the socketpair
  # Claude Code passes as stdin. No timeout here (with `-t` bash makes two syscalls per
  # byte: 20 KB took 10 ms more): this worker's caller bounds it.
  IFS= read -r -N 65537 body
  [ -n "$body" ] || return
  if [ -r "$TMA1_DATA_DIR/hook-token" ]; then
    IFS= read -r token <"$TMA1_DATA_DIR/hook-token" || :
  fi
  # The time (the server refuses an old nonce) and 64 random bits ($SRANDOM: getrandom(2)).
  nonce=$EPOCHREALTIME-$SRANDOM$SRANDOM
  # The here-string's newline ends the last line, as the server's layout has it.
  auth=$(@@SHA256@@ <<<"tma1-hook-v2"$'\n'request$'\n'"$token"$'\n'"$nonce") || return
  auth=${auth%% *}
  if [ "${#body}" -gt 65536 ]; then
    tma1_post_big "$body" "$token" "$nonce" "$auth"
    return
  fi
  case $TMA1_HOST in
    *:*) url_host="[$TMA1_HOST]" ;;  # an IPv6 literal needs brackets in the Host header
    *) url_host=$TMA1_HOST ;;
  esac
  # /dev/tcp takes the bare address, IPv6 literals included; no proxy is ever consulted.
  exec 3<>"/dev/tcp/$TMA1_HOST/$TMA1_PORT" || return
  # The request is built by the printf builtin and written in one write(2), so the server
  # gets it as one TCP segment, not eight (strace; no difference in time was measurable,
  # docs/benchmarks.md). Bash's stdout is line-buffered and gets its buffer (glibc) only on
  # first use, until which a string goes out a line per write: one throw-away byte to
  # /dev/null (fd 2) gives it the buffer, and a string whose only flushing newline is its
  # last then leaves whole. That newline ends the JSON body (whitespace to a JSON parser).
  # No `Expect: 100-continue`, so no round trip is waited for.
  printf -v req 'POST /api/hooks@@QUERY@@ HTTP/1.1\r\nHost: %s:%s\r\nX-TMA1-Nonce: %s\r\nX-TMA1-Auth: %s\r\nContent-Type: application/json\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s\n' \
    "$url_host" "$TMA1_PORT" "$nonce" "$auth" "$((${#body} + 1))" "$body"
  printf x >&2
  printf '%s' "$req" >&3 || return
  # The whole answer at once: the server closes the connection after it (`Connection:
  # close`), and `read -N` takes it in 4 KiB blocks up to that end (reading the headers
  # line by line cost a read(2) a byte). A server that never ends it, or drips it, is cut
  # by the caller's time cap; one that sends more than answer_max is not tma1.
  IFS= read -r -N "$((answer_max + 4096))" resp <&3
  tma1_deliver "$resp" "$token" "$nonce"
}

# Prints the answer of a raw HTTP response ($1) to the agent only when it is a whole 200
# whose X-TMA1-Sig is the keyed hash of this request's nonce ($3) and of the answer.
tma1_deliver() {
  local head lower answer len sig want
  head=${1%%$'\r\n\r\n'*}
  [ "$head" != "$1" ] || return  # the headers never ended
  case $head in
    'HTTP/1.1 200 '*) ;;
    *) return ;;  # a 403 or 500 body is never shown to the agent
  esac
  answer=${1#*$'\r\n\r\n'}
  [ -n "$answer" ] || return
  [ "${#answer}" -le "$answer_max" ] || return
  lower=${head,,}
  case $lower in
    *$'\ncontent-length: '*)
      len=${lower#*$'\ncontent-length: '} len=${len%%$'\r'*}
      # cut short: print nothing rather than half an answer
      [ "${#answer}" = "$len" ] || return ;;
  esac
  case $lower in
    *$'\nx-tma1-sig: '*) sig=${lower#*$'\nx-tma1-sig: '} sig=${sig%%$'\r'*} ;;
    *) return ;;  # not signed: not tma1, or not for us
  esac
  want=$(@@SHA256@@ <<<"tma1-hook-v2"$'\n'response$'\n'"$2"$'\n'"$3"$'\n'"${#answer}"$'\n'"$answer") || return
  [ "${want%% *}" = "$sig" ] || return
  printf '%s' "$answer" >&5
}

# A big event goes to curl, streamed: what `read` took, then the rest of stdin (chunked,
# so no length is needed up front). Bash would take seconds over tens of MB; curl's
# start-up only matters for small events. The nonce and its hash go as a config file on
# fd 3; `-i` keeps the answer's headers for tma1_deliver, and the status code written
# after the body keeps its trailing newlines from `$( )`.
tma1_post_big() {
  local url_host out
  command -v curl >/dev/null 2>&1 || return
  case $TMA1_HOST in
    *:*) url_host="[$TMA1_HOST]" ;;
    *) url_host=$TMA1_HOST ;;
  esac
  out=$({ printf '%s' "$1"; cat; } 4<&- 5>&- | curl -q --silent --noproxy '*' \
      --connect-timeout 0.25 --max-time "$TMA1_HOOK_TIMEOUT" --config /dev/fd/3 \
      --max-filesize "$answer_max" -i \
      -H 'Content-Type: application/json' -H 'Expect:' \
      --upload-file - -X POST --write-out '%{http_code}' \
      "http://$url_host:$TMA1_PORT/api/hooks@@QUERY@@" 3<<TMA1_CURL_CONFIG 4<&- 5>&-
header = "X-TMA1-Nonce: $3"
header = "X-TMA1-Auth: $4"
TMA1_CURL_CONFIG
) || out=000
  if [ "${out: -3}" = 200 ]; then
    tma1_deliver "${out%???}" "$2" "$3"
  else
    # curl may have stopped reading (refused, 403, timed out): drain the rest in the
    # background, so an agent still writing never gets a broken pipe
    cat <&4 >/dev/null 5>&- &
  fi
}

# The worker runs in a process substitution (a fork, no exec) so that this process can
# bound it by the wall clock: the pipe ends when the worker exits, and `read -t` gives up
# at the cap whatever the worker is stuck on (an agent that never closes stdin, a connect
# to a listener that never accepts, a server that drips its answer). The worker writes
# nothing to that pipe, only its answer to fd 5. (`--stdin-closes`, which `tma1 install`
# passes where the agent closes stdin, once served the event without this fork; a
# connect(2) cannot be bounded in one bash process, so every mode pays the fork now.)
IFS= read -r -t "$TMA1_HOOK_TIMEOUT" _ < <(tma1_post)
if [ $? -gt 128 ]; then
  kill -s KILL $! || :
  # Whatever the worker left unread on stdin is drained in the background: an agent
  # still writing a large event must not get a broken pipe (Codex reports that as a
  # failed hook), and one that never closes stdin must not hold us up.
  cat <&4 >/dev/null 5>&- &
fi
exit 0
