-- Running tasks whose replica's lease ran out (it died, or lost Redis for longer than a lease)
-- end failed. KEYS: 1 every running id and its replica. ARGV: 1 key prefix, 2 the change
-- channel, 3 now (ms), 4 how long an ended record is kept (ms), 5 the failure's message.
-- Returns how many ended.
local runners = redis.call('HGETALL', KEYS[1])
local reaped = 0
for i = 1, #runners, 2 do
  local id, replica = runners[i], runners[i + 1]
  if redis.call('EXISTS', ARGV[1] .. 'lease:' .. replica) == 0 then
    redis.call('HDEL', KEYS[1], id)
    local key = ARGV[1] .. 'task:' .. id
    local current = redis.call('GET', key)
    if current then
      local record = cjson.decode(current)
      redis.call('SREM', ARGV[1] .. 'tasks:running:' .. record.owner_kind .. ':' .. record.owner_id, id)
      if record.state == 'working' or record.state == 'input_required' then
        record.state = 'failed'
        record.status_message = ARGV[5]
        -- Left out rather than encoded: Lua cannot tell an empty list from an empty map.
        record.questions = nil
        record.outcome = {failed = {code = 'UNAVAILABLE', message = ARGV[5]}}
        record.updated_ms = tonumber(ARGV[3])
        record.expires_ms = tonumber(ARGV[3]) + tonumber(ARGV[4])
        redis.call('SET', key, cjson.encode(record), 'PX', ARGV[4])
        redis.call('PUBLISH', ARGV[2], 'c ' .. id)
        reaped = reaped + 1
      end
    end
  end
end
return reaped
