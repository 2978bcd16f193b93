-- wrk script for bench/bench_hooks.py --wrk: every request a distinct hook event
-- (tool_use_id "wrk-<thread>-<n>"), so the rows can be counted afterwards.
local counter = 0
local thread_id = 0
local ok, other = 0, 0

function setup(thread)
  thread:set("id", thread_id)
  thread_id = thread_id + 1
end

function init(args)
  wrk.headers["X-TMA1-Token"] = args[1]
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  counter = counter + 1
  local body = string.format(
    '{"session_id":"wrk-%d-%d","hook_event_name":"PreToolUse","tool_name":"Read",' ..
    '"tool_input":{"file_path":"/repo/src/a%d.py"},"cwd":"/repo","tool_use_id":"wrk-%d-%d"}',
    id, counter % 8, counter % 50, id, counter)
  return wrk.format("POST", "/api/hooks", nil, body)
end

function response(status, headers, body)
  if status == 200 then ok = ok + 1 else other = other + 1 end
end

function done(summary, latency, requests)
  io.write(string.format("wrk: %d requests, %d errors\n", summary.requests,
    summary.errors.status + summary.errors.connect + summary.errors.read +
    summary.errors.write + summary.errors.timeout))
end
