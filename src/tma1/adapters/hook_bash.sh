#!/bin/bash -p
# tma1 hook for @@AGENT@@, written by `tma1 install` (`tma1 uninstall` removes it).
#
# Forwards the hook event on stdin to the local tma1 server and prints the server's
# answer (a <tma1-context> digest, a Stop block, or nothing). It must never get in the
# agent's way: on any problem (server down, slow or wedged, wrong token) it prints
# nothing and exits 0. TMA1_HOST, TMA1_PORT, TMA1_DATA_DIR and TMA1_HOOK_TIMEOUT in the
# environment override the values baked in at install time.
#
# This is the bash variant (install writes it where /bin/bash exists; elsewhere the POSIX
# sh + curl one): it speaks HTTP/1.1 itself over bash's /dev/tcp, so no process is
# exec'd on the agent's path at all. Starting curl was nearly all of the old hook's cost
# (docs/benchmarks.md). `-p` on the first line: no $BASH_ENV, no functions imported from
# the environment.
# Run as `sh script` (the first line ignored)? This line is still POSIX: hand over to bash.
[ -n "${BASH_VERSION:-}" ] || exec /bin/bash -p "$0" "$@"
[ -n "${TMA1_HOST:-}" ] || TMA1_HOST=@@HOST@@
[ -n "${TMA1_PORT:-}" ] || TMA1_PORT=@@PORT@@
[ -n "${TMA1_DATA_DIR:-}" ] || TMA1_DATA_DIR=@@DATA_DIR@@
[ -n "${TMA1_HOOK_TIMEOUT:-}" ] || TMA1_HOOK_TIMEOUT=2
# Bytes, not characters: ${#body} is the Content-Length, `read -N` counts bytes.
export LC_ALL=C

# Nothing this script could say on stderr helps the agent (exit 2 or a message there can
# even block it), so stderr goes nowhere from here on.
exec 2>/dev/null
# The agent's stdout, for the worker's answer (a closed stdout is not an error here).
exec 5>&1 || exec 5>/dev/null
# A background job's stdin would be /dev/null: keep the agent's pipe on fd 4 for the drain.
# No stdin at all: no event to post.
exec 4<&0 || exit 0

tma1_post() {
  local body token= url_host req len= answer= first= resp head
  # At most 64 KiB + 1 byte of the event. Bash 5.2's `read -N` without `-t` reads a pipe
  # or socket in 4 KiB blocks (install picks this script only for bash 5.2+), so no process
  # is started for it (`head` cost ~1.5 ms). `$(</dev/stdin)` cannot open the socketpair
  # Claude Code passes as stdin. No timeout here (with `-t` bash makes two syscalls per
  # byte: 20 KB took 10 ms more): the forked worker's caller bounds it, or the agent has
  # closed stdin (`--stdin-closes`).
  IFS= read -r -N 65537 body
  [ -n "$body" ] || return
  if [ -r "$TMA1_DATA_DIR/hook-token" ]; then
    IFS= read -r token <"$TMA1_DATA_DIR/hook-token" || :
  fi
  if [ "${#body}" -gt 65536 ]; then
    tma1_post_big "$body" "$token"
    return
  fi
  case $TMA1_HOST in
    *:*) url_host="[$TMA1_HOST]" ;;  # an IPv6 literal needs brackets in the Host header
    *) url_host=$TMA1_HOST ;;
  esac
  # /dev/tcp takes the bare address, IPv6 literals included; no proxy is ever consulted.
  exec 3<>"/dev/tcp/$TMA1_HOST/$TMA1_PORT" || return
  # The request is built by the printf builtin (the token is in no argv) and written in
  # one write(2), so the server gets it as one TCP segment, not eight (strace; no
  # difference in time was measurable, docs/benchmarks.md). Bash's stdout is line-buffered
  # and gets its buffer (glibc) only on first use, until which a string goes out a line
  # per write: one throw-away byte to /dev/null (fd 2) gives it the buffer, and a string
  # whose only flushing newline is its last then leaves whole. That newline ends the JSON
  # body (whitespace to a JSON parser). No `Expect: 100-continue`, so no round trip is
  # waited for.
  printf -v req 'POST /api/hooks@@QUERY@@ HTTP/1.1\r\nHost: %s:%s\r\nX-TMA1-Token: %s\r\nContent-Type: application/json\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s\n' \
    "$url_host" "$TMA1_PORT" "$token" "$((${#body} + 1))" "$body"
  printf x >&2
  printf '%s' "$req" >&3 || return
  # The whole answer at once: the server closes the connection after it (`Connection:
  # close`), so once its first byte is here (the wait for the server, bounded by
  # `answer_wait` in this process or by the forked worker's caller), `read -N` takes the
  # rest in 4 KiB blocks up to that end. Reading the headers line by line cost a
  # read(2) a byte.
  IFS= read -r "${answer_wait[@]}" -N 1 first <&3 || return
  IFS= read -r -N 1048576 resp <&3
  resp=$first$resp
  head=${resp%%$'\r\n\r\n'*}
  [ "$head" != "$resp" ] || return  # the headers never ended
  case $head in
    'HTTP/1.1 200 '*) ;;
    *) return ;;  # a 403 or 500 body is never shown to the agent
  esac
  answer=${resp#*$'\r\n\r\n'}
  case ${head,,} in
    *$'\ncontent-length: '*)
      len=${head,,} len=${len#*$'\ncontent-length: '} len=${len%%$'\r'*}
      # cut short: print nothing rather than half an answer
      [ "${#answer}" = "$len" ] || return ;;
  esac
  [ -z "$answer" ] || printf '%s' "$answer" >&5
}

# A big event goes to curl, streamed: what `read` took, then the rest of stdin (chunked,
# so no length is needed up front). Bash would take seconds over tens of MB; curl's
# start-up only matters for small events. The token goes as a config file on fd 3.
tma1_post_big() {
  local url_host out
  command -v curl >/dev/null 2>&1 || return
  case $TMA1_HOST in
    *:*) url_host="[$TMA1_HOST]" ;;
    *) url_host=$TMA1_HOST ;;
  esac
  out=$({ printf '%s' "$1"; cat; } 4<&- 5>&- | curl -q --silent --noproxy '*' \
      --connect-timeout 0.25 --max-time "$TMA1_HOOK_TIMEOUT" --config /dev/fd/3 \
      -H 'Content-Type: application/json' -H 'Expect:' \
      --upload-file - -X POST --write-out '%{http_code}' \
      "http://$url_host:$TMA1_PORT/api/hooks@@QUERY@@" 3<<TMA1_CURL_CONFIG 4<&- 5>&-
header = "X-TMA1-Token: $2"
TMA1_CURL_CONFIG
) || out=000
  if [ "${out: -3}" = 200 ]; then
    [ -z "${out%???}" ] || printf '%s' "${out%???}" >&5
  else
    # curl may have stopped reading (refused, 403, timed out): drain the rest in the
    # background, so an agent still writing never gets a broken pipe
    cat <&4 >/dev/null 5>&- &
  fi
}

# An agent that closes stdin once the event is written (install says so with
# `--stdin-closes`, for the events where the agent was checked to) is served in this
# process: a fork costs ~1 ms on a busy 2-core machine (docs/benchmarks.md), more than
# anything else the script does. The answer is still bounded (`read -t`), and a connect to
# a listening port or a write of at most 64 KiB on loopback does not wait for the server.
if [ "${1:-}" = --stdin-closes ]; then
  answer_wait=(-t "$TMA1_HOOK_TIMEOUT")
  tma1_post
  exit 0
fi

# Otherwise the worker runs in a process substitution (a fork, no exec) so that this
# process can bound it: the pipe ends when the worker exits, and `read -t` gives up at the
# timeout whatever the worker is stuck on (an agent that never closes stdin, a connect or
# write to a wedged server). The worker writes nothing to that pipe, only its answer to fd 5.
answer_wait=()
IFS= read -r -t "$TMA1_HOOK_TIMEOUT" _ < <(tma1_post)
if [ $? -gt 128 ]; then
  kill -s KILL $! || :
  # Whatever the worker left unread on stdin is drained in the background: an agent
  # still writing a large event must not get a broken pipe (Codex reports that as a
  # failed hook), and one that never closes stdin must not hold us up.
  cat <&4 >/dev/null 5>&- &
fi
exit 0
