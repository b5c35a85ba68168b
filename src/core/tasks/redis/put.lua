-- A task's record replaced by its runner, unless it was forgotten or has ended (the reaper may
-- have ended it for a runner it thought gone). KEYS: 1 the record, 2 the owner's running ids,
-- 3 every running id and its replica. ARGV: 1 id, 2 record, 3 '1' if it ended, 4 how long an
-- ended record is kept (ms), 5 the change channel. Returns 1 when replaced.
local current = redis.call('GET', KEYS[1])
if not current then
  return 0
end
local state = cjson.decode(current).state
if state == 'completed' or state == 'failed' or state == 'cancelled' then
  return 0
end
if ARGV[3] == '1' then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
  redis.call('SREM', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[3], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
redis.call('PUBLISH', ARGV[5], 'c ' .. ARGV[1])
return 1
