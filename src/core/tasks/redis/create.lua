-- A new running task: kept unless its owner runs ARGV[4] already (then their count is
-- returned); past ARGV[5] records of the owner, its oldest that does not run is forgotten.
-- KEYS: 1 the record, 2 the owner's ids (by start), 3 the owner's running ids, 4 every running
-- id and its replica, 5 that replica's lease. ARGV: 1 id, 2 record, 3 start (ms), 4 max
-- running, 5 max kept, 6 replica, 7 key prefix, 8 how long the owner's indexes outlive their
-- last task (ms), 9 the lease's length (ms). Returns -1 when kept.
local running = redis.call('SCARD', KEYS[3])
if running >= tonumber(ARGV[4]) then
  return running
end
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then
  -- Oldest first, a page at a time: only running ones come before the one forgotten, so a
  -- start reads a few ids, not every kept one (reading all cost Redis 80 us a start at 1,000).
  local from, forgotten, page = 0, false, nil
  repeat
    page = redis.call('ZRANGE', KEYS[2], from, from + 15)
    for _, old in ipairs(page) do
      if redis.call('SISMEMBER', KEYS[3], old) == 0 then
        redis.call('DEL', ARGV[7] .. 'task:' .. old)
        redis.call('ZREM', KEYS[2], old)
        forgotten = true
        break
      end
    end
    from = from + 16
  until forgotten or #page < 16
end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[8])
redis.call('PEXPIRE', KEYS[3], ARGV[8])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[6])
redis.call('SET', KEYS[5], '1', 'PX', ARGV[9])
return -1
