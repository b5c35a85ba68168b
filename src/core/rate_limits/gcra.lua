-- GCRA over several budgets at once, all or nothing: a call is let through only if every
-- budget has room, and then it takes from each. KEYS[i] holds budget i's theoretical arrival
-- time (µs since the epoch, Redis's clock); ARGV[2i-1] is its emission interval (µs between
-- calls) and ARGV[2i] its burst. Returns {0, 0} when let through, else {i, µs to wait} for
-- the first budget without room (nothing is taken then).
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000000 + tonumber(now_parts[2])
local next_tats = {}
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[2 * i - 1])
  local burst = tonumber(ARGV[2 * i])
  local tat = tonumber(redis.call('GET', key) or '0') or 0
  if tat < now then
    tat = now
  end
  local next_tat = tat + interval
  local allowed_at = next_tat - interval * burst
  if allowed_at > now then
    return {i, allowed_at - now}
  end
  next_tats[i] = next_tat
end
for i, key in ipairs(KEYS) do
  -- Kept only while it still holds back a call: then it is as good as fresh.
  local ttl_ms = math.floor((next_tats[i] - now) / 1000) + 1
  redis.call('SET', key, string.format('%.0f', next_tats[i]), 'PX', ttl_ms)
end
return {0, 0}
