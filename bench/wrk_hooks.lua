-- wrk script for bench/bench_hooks.py: every request a distinct hook event, the same mix
-- as the Python clients' payload() (Read/Edit/Bash; PreToolUse and PostToolUse
-- alternating, PostToolUse with a tool_response), tool_use_id "wrk-<thread>-<n>" so the
-- rows can be counted afterwards. It posts as Claude Code's native http hooks do
-- (?transport=http with the key derived from the token, args[1]): wrk cannot hash a fresh
-- nonce per request as the hook script does.
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

local tools = {
  function(i) return "Read", string.format('{"file_path":"/repo/src/a%d.py"}', i) end,
  function(i)
    return "Edit", string.format(
      '{"file_path":"/repo/src/a%d.py","old_string":"x","new_string":"y"}', i)
  end,
  function(i) return "Bash", string.format('{"command":"pytest -q tests/%d"}', i) end,
}
local post_fields = ',"tool_response":{"stdout":"' .. string.rep("ok ", 20) ..
  '","stderr":"","interrupted":false}'

function request()
  counter = counter + 1
  local tool, input = tools[counter % 3 + 1](counter % 50)
  local post = counter % 2 == 1
  local body = string.format(
    '{"session_id":"wrk-%d-%d","hook_event_name":"%s","tool_name":"%s",' ..
    '"tool_input":%s,"cwd":"/repo","tool_use_id":"wrk-%d-%d"%s}',
    id, counter % 8, post and "PostToolUse" or "PreToolUse", tool, input, id, counter,
    post and post_fields or "")
  return wrk.format("POST", "/api/hooks?transport=http", nil, body)
end

function response(status, headers, body)
  if status == 200 then ok = ok + 1 else other = other + 1 end
end

function done(summary, latency, requests)
  io.write(string.format("wrk: %d requests, %d errors\n", summary.requests,
    summary.errors.status + summary.errors.connect + summary.errors.read +
    summary.errors.write + summary.errors.timeout))
end
